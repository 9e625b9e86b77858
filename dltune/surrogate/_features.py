"""Feature rows for the surrogates: workload meta-features, hardware, configuration.

A *row* is a dict with ``meta`` (the workload's meta-features), ``hardware`` (a
:meth:`Hardware.to_dict`) and ``config`` (a :meth:`TrainConfig.to_dict`); measurement records
and recommendation candidates both become rows, so training and prediction see the same
features. Counts and sizes enter as logarithms; categories as one-hot columns whose levels
are learned at ``fit``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dltune._errors import NotFittedError
from dltune.config import LR_RANGES, OPTIMIZERS
from dltune.measure._record import current_revision, revision_of

__all__ = [
    "FeatureEncoder",
    "WORKLOAD_FEATURES",
    "HARDWARE_FEATURES",
    "ran_in_new_process",
    "record_row",
    "total_work",
    "workload_facts",
    "workload_vector",
    "hardware_vector",
    "memory_as_now",
]

# (name, meta key, log-transform)
WORKLOAD_FEATURES: tuple[tuple[str, str, bool], ...] = (
    ("log_n_train", "n_train", True),
    ("log_n_test", "n_test", True),
    ("channels", "channels", False),
    ("log_height", "height", True),
    ("log_input_size", "input_size", True),
    ("log_num_classes", "num_classes", True),
    ("class_balance", "class_balance", False),
    ("landmark_logreg", "landmark_logreg", False),
    ("landmark_1nn", "landmark_1nn", False),
    ("log_param_count", "param_count", True),
    ("log_flops_per_sample", "flops_per_sample", True),
    ("log_layers", "layers", True),
    ("log_activations_per_sample", "activations_per_sample", True),
    ("conv_outputs_per_sample", "conv_outputs_per_sample", False),
)
HARDWARE_FEATURES: tuple[str, ...] = (
    "usable_cores", "log_logical_cores", "log_memory_gb", "avx2", "avx512f", "gpus",
)
_SCHEDULES = ("constant", "inv", "step")


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan


def _log(value: Any) -> float:
    v = _num(value)
    return math.log(v) if v > 0 else math.nan


def record_row(record: Any) -> dict[str, Any]:
    """A measurement record (a :class:`Measurement` or its dict) as a feature row."""
    data = record if isinstance(record, dict) else record.to_dict()
    workload = data["workload"]
    meta = workload.get("meta", {})
    if "conv_outputs_per_sample" not in meta and workload.get("model_spec"):
        # Records written before these were meta-features: the model spec they keep has them.
        meta = dict(meta, **_model_costs(json.dumps(workload["model_spec"], sort_keys=True)))
    if "model" not in meta and workload.get("model"):
        meta = dict(meta, model=workload["model"])
    return {"meta": meta, "hardware": data.get("hardware", {}), "config": data["config"],
            "fresh": ran_in_new_process(data)}


def ran_in_new_process(data: dict[str, Any]) -> bool:
    """Whether a record's run was its worker's first (the framework was imported during it).

    A new process pays one-time warm-ups in its first epoch that a reused one has behind it,
    and its peak memory is the run's own, not the high-water mark of earlier runs.
    """
    return ((data.get("metrics") or {}).get("import_time_s") or 0) > 0


def memory_as_now(data: dict[str, Any]) -> bool:
    """Whether a record's peak memory is what its backend needs now: it was measured at the
    backend's current revision (:attr:`BackendInfo.revision <dltune.backends.BackendInfo>`),
    which is raised when what its training process holds changes."""
    return revision_of(data) >= current_revision(str((data.get("config") or {}).get("framework")))


@functools.lru_cache(maxsize=256)
def _model_costs(spec_json: str) -> dict[str, int]:
    from dltune.models import ModelSpec

    try:
        return ModelSpec.from_dict(json.loads(spec_json)).cost_features()
    except Exception:  # noqa: BLE001 - a spec this version cannot read: the features stay unknown
        return {}


def total_work(row: dict[str, Any]) -> float:
    """Training work of a row: epochs x training samples x forward FLOPs per sample."""
    meta, config = row["meta"], row["config"]
    return float(config["epochs"]) * _num(meta.get("n_train")) * _num(meta.get("flops_per_sample"))


def workload_vector(meta: dict[str, Any]) -> np.ndarray:
    return np.array([_log(meta.get(k)) if lg else _num(meta.get(k)) for _, k, lg in WORKLOAD_FEATURES])


def workload_facts(meta: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """The categorical facts of a workload's meta-features that its coverage is judged by:
    ``modality``, ``model_family``, ``input_shape`` (a tuple, or None) and ``num_classes``.

    Records written before these were meta-features hold images (the only data then) trained
    by a preset (``model``, or the meta-features' own ``model``), whose family the preset
    registry declares."""
    from dltune.models import MODEL_PRESETS

    name = meta.get("model") or model
    family = meta.get("model_family") or (MODEL_PRESETS[name].family if name in MODEL_PRESETS else None)
    shape = meta.get("input_shape")
    if shape is None and all(meta.get(k) is not None for k in ("channels", "height", "width")):
        shape = (meta["channels"], meta["height"], meta["width"])
    classes = meta.get("num_classes")
    return {"modality": meta.get("modality") or "image", "model_family": family,
            "input_shape": tuple(int(v) for v in shape) if shape is not None else None,
            "num_classes": int(classes) if classes is not None else None}


def hardware_vector(hardware: dict[str, Any]) -> np.ndarray:
    flags = set(hardware.get("cpu_flags") or ())
    return np.array([
        _num(hardware.get("usable_cores")),
        _log(hardware.get("logical_cores")),
        _log(hardware.get("memory_gb")),
        float("avx2" in flags),
        float("avx512f" in flags),
        float(len(hardware.get("gpus") or ())),
    ])


def _lr_position(optimizer: Any, learning_rate: Any) -> float:
    """Where a learning rate lies in its optimizer's usual range (``LR_RANGES``; 0 its low end,
    1 its high end, log scale): rates of different optimizers are not comparable steps
    (docs/explanation/how-recommend-decides.md#the-surrogates)."""
    low, high = LR_RANGES.get(str(optimizer), (math.nan, math.nan))
    return (_log(learning_rate) - math.log(low)) / (math.log(high) - math.log(low))


def _step_per_sample(optimizer: Any, learning_rate: Any, momentum: float, batch: float) -> float:
    """Log of the learning rate per sample of the batch, momentum's as its effective rate
    ``lr / (1 - momentum)``: it tells where plain and momentum SGD diverge, a ratio the trees
    would need many splits to find from the rate and the batch size apart. Adam's is its raw
    rate (its step does not grow with the gradient: another scale, which the optimizer columns
    tell apart).

    The accuracy point's ensembles see it, its interval's do not (``PerformanceModel``).
    """
    lr = _num(learning_rate)
    if optimizer == "momentum":
        lr = lr / (1.0 - momentum) if momentum < 1.0 else math.nan
    return _log(lr / batch)


def _threads(config: dict[str, Any], hardware: dict[str, Any]) -> tuple[float, float]:
    threads = config.get("threads") or {}
    usable = _num(hardware.get("usable_cores"))
    cores = _num(threads.get("cores")) if threads.get("cores") is not None else usable
    intra = _num(threads.get("intra_op")) if threads.get("intra_op") is not None else cores
    return intra, cores


class FeatureEncoder:
    """Rows to a float matrix; learns the framework levels at ``fit``.

    Columns: workload features, hardware features, configuration features, one-hot
    framework, and ``log_work`` (see :func:`total_work`) last.
    """

    def __init__(self) -> None:
        pass

    def fit(self, rows: Sequence[dict[str, Any]]) -> FeatureEncoder:
        self.frameworks_ = sorted({r["config"]["framework"] for r in rows})
        # Framework x model preset: the training-time cost model's finest groups.
        self.framework_models_ = sorted({(r["config"]["framework"], str(r["meta"].get("model")))
                                         for r in rows if r.get("meta", {}).get("model")})
        self.feature_names_ = (
            [n for n, _, _ in WORKLOAD_FEATURES]
            + list(HARDWARE_FEATURES)
            + ["log_lr", "lr_position", "momentum", "log_weight_decay", "log2_batch", "epochs", "log_epochs", "log_steps",
               "log_updates", "log_lr_updates", "log_step_per_sample",
               "intra_threads", "cores", "threads_per_core", "fresh_process"]
            + [f"opt_{o}" for o in OPTIMIZERS]
            + [f"sched_{s}" for s in _SCHEDULES]
            + [f"fw_{f}" for f in self.frameworks_]
            + [f"fwm_{f}|{m}" for f, m in self.framework_models_]
            + ["log_work"]
        )
        return self

    @property
    def work_column(self) -> int:
        return len(self.feature_names_) - 1

    def transform(self, rows: Sequence[dict[str, Any]]) -> np.ndarray:
        if not hasattr(self, "frameworks_"):
            raise NotFittedError("This FeatureEncoder is not fitted yet. Call 'fit' first.")
        out = np.empty((len(rows), len(self.feature_names_)), dtype=np.float64)
        # Candidates share their workload and hardware dicts: encode each one once.
        seen: dict[int, np.ndarray] = {}
        for i, row in enumerate(rows):
            meta, hw, cfg = row["meta"], row["hardware"], row["config"]
            if id(meta) not in seen:
                seen[id(meta)] = workload_vector(meta)
            if id(hw) not in seen:
                seen[id(hw)] = hardware_vector(hw)
            intra, cores = _threads(cfg, hw)
            batch = _num(cfg.get("batch_size"))
            optimizer = cfg.get("optimizer")
            momentum = _num(cfg.get("momentum")) if optimizer == "momentum" else 0.0
            config_part = [
                _log(cfg.get("learning_rate")), _lr_position(optimizer, cfg.get("learning_rate")), momentum,
                math.log(_num(cfg.get("weight_decay")) + 1e-6),
                math.log2(batch), _num(cfg.get("epochs")), _log(cfg.get("epochs")),
                _log(_num(meta.get("n_train")) / batch),
                _log(_num(cfg.get("epochs")) * _num(meta.get("n_train")) / batch),
                _log(_num(cfg.get("learning_rate")) * _num(cfg.get("epochs")) * _num(meta.get("n_train")) / batch),
                _step_per_sample(optimizer, cfg.get("learning_rate"), momentum, batch),
                intra, cores, intra / cores,
                # A row without the flag is a run to come: the user's own, in a new process.
                float(row.get("fresh", True)),
            ]
            config_part += [float(optimizer == o) for o in OPTIMIZERS]
            config_part += [float(cfg.get("lr_schedule", "constant") == s) for s in _SCHEDULES]
            config_part += [float(cfg["framework"] == f) for f in self.frameworks_]
            config_part += [float(cfg["framework"] == f and meta.get("model") == m)
                            for f, m in self.framework_models_]
            out[i] = np.concatenate([seen[id(meta)], seen[id(hw)], config_part, [_log(total_work(row))]])
        return out

    def to_state(self) -> dict[str, Any]:
        return {"frameworks": self.frameworks_, "feature_names": self.feature_names_,
                "framework_models": [list(p) for p in self.framework_models_]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FeatureEncoder:
        enc = cls()
        enc.frameworks_ = list(state["frameworks"])
        enc.framework_models_ = [tuple(p) for p in state.get("framework_models", [])]
        enc.feature_names_ = list(state["feature_names"])
        return enc
