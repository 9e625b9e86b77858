"""Saving and loading a fitted :class:`~dltune.surrogate.PerformanceModel`: numpy arrays plus a
JSON state, written and read without pickle."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dltune._errors import ParameterError
from dltune.surrogate._features import FeatureEncoder

if TYPE_CHECKING:
    from dltune.surrogate._model import PerformanceModel

__all__ = ["FORMAT_VERSION", "PersistenceMixin"]

FORMAT_VERSION = 31


class PersistenceMixin:
    """:class:`~dltune.surrogate.PerformanceModel`'s ``save`` and ``load``."""

    # Persistence: numpy arrays plus a JSON state, written and read without pickle.
    def save(self, path: str | Path) -> Path:
        self._check_fitted()
        path = Path(path)
        arrays: dict[str, np.ndarray] = {}
        for key, est in (("acc.", self.accuracy_), ("time.", self.train_time_), ("mem.", self.memory_)):
            arrays.update(est.to_arrays(key))
        for i, est in enumerate(self.machine_time_.values()):
            arrays.update(est.to_arrays(f"time@{i}."))
        for i, m in enumerate(self.measured_.values()):
            raw = m["configs"] if isinstance(m["configs"], bytes) else json.dumps(m["configs"]).encode()
            arrays[f"measured@{i}"] = np.frombuffer(raw, dtype=np.uint8)
        state = {
            "format": FORMAT_VERSION, "params": self.get_params(), "encoder": self.encoder_.to_state(),
            "workloads": self.workloads_, "workload_scale": self.workload_scale_.tolist(),
            # Each workload's configurations in an array of its own, parsed only when asked for
            # (a recommendation reads one workload's; parsing them all would cost it more).
            "measured": {k: {"sigma": m["sigma"], "floor": m["floor"]} for k, m in self.measured_.items()},
            "measured_sigma": self.measured_sigma_,
            "workload_center": self.workload_center_.tolist(), "ood_threshold": self.ood_threshold_,
            "hardware": self.hardware_, "config_ranges": self.config_ranges_,
            "frameworks": self.frameworks_, "framework_runs": self.framework_runs_,
            "n_records": self.n_records_,
            "n_memory_records": self.n_memory_records_,
            "memory_ungrounded": self.memory_ungrounded_,
            "reference_machine": self.reference_machine_, "machine_speed": self.machine_speed_,
            "reference_frameworks": self.reference_frameworks_,
            "memory_reference_machine": self.memory_reference_machine_,
            "machine_memory": self.machine_memory_,
            "machine_time": [dict(self.machine_time_info_[m], machine=m) for m in self.machine_time_],
            "machine_now": self.machine_now_, "machine_now_info": self.machine_now_info_,
            "threads_measured": self.threads_measured_,
            "fitted_with": getattr(self, "fitted_with_", {}),
        }
        arrays["state_json"] = np.frombuffer(json.dumps(state, default=float).encode(), dtype=np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")  # per process: two may fit one key
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> PerformanceModel:
        with np.load(Path(path), allow_pickle=False) as arrays:
            state = json.loads(arrays["state_json"].tobytes().decode())
            if state.get("format") != FORMAT_VERSION:
                raise ParameterError(f"Surrogate file {str(path)!r} has an unknown format.")
            model = cls(**state["params"])
            model.encoder_ = FeatureEncoder.from_state(state["encoder"])
            current = FeatureEncoder().fit(
                [{"config": {"framework": f}, "meta": {}} for f in model.encoder_.frameworks_]
                + [{"config": {"framework": f}, "meta": {"model": m}}
                   for f, m in model.encoder_.framework_models_]).feature_names_
            if current != model.encoder_.feature_names_:
                raise ParameterError(
                    f"Surrogate file {str(path)!r} was written with other features; refit it."
                )
            # The model classes, not the estimators: loading and predicting need no scikit-learn.
            model.accuracy_, model.train_time_, model.memory_ = model._estimators(model.encoder_, fitting=False)
            model.accuracy_.load_arrays(arrays, "acc.")
            model.train_time_.load_arrays(arrays, "time.")
            model.memory_.load_arrays(arrays, "mem.")
            model.machine_time_, model.machine_time_info_ = {}, {}
            for i, info in enumerate(state["machine_time"]):
                info = dict(info)
                machine = info.pop("machine")
                model.machine_time_[machine] = model._estimators(model.encoder_, fitting=False)[1].load_arrays(
                    arrays, f"time@{i}.")
                model.machine_time_info_[machine] = info
            model.measured_ = {k: {"sigma": m["sigma"], "floor": m["floor"], "configs": arrays[f"measured@{i}"].tobytes()}
                               for i, (k, m) in enumerate(state["measured"].items())}
        model.workloads_ = state["workloads"]
        model.measured_sigma_ = state["measured_sigma"]
        model.workload_scale_ = np.array(state["workload_scale"])
        model.workload_center_ = np.array(state["workload_center"])
        model.ood_threshold_ = state["ood_threshold"]
        model.hardware_ = state["hardware"]
        model.config_ranges_ = state["config_ranges"]
        model.threads_measured_ = state["threads_measured"]
        model.frameworks_ = state["frameworks"]
        model.framework_runs_ = state["framework_runs"]
        model.n_records_ = state["n_records"]
        model.n_memory_records_ = state["n_memory_records"]
        model.memory_ungrounded_ = state["memory_ungrounded"]
        model.reference_machine_ = state["reference_machine"]
        # None in a file written before it was kept: the reason then reads every factor as a speed.
        model.reference_frameworks_ = state.get("reference_frameworks")
        model.memory_reference_machine_ = state.get("memory_reference_machine", model.reference_machine_)
        model.machine_speed_ = state["machine_speed"]
        model.machine_memory_ = state["machine_memory"]
        model.machine_now_ = state["machine_now"]
        model.machine_now_info_ = state["machine_now_info"]
        model.fitted_with_ = state.get("fitted_with", {})
        return model
