"""``PerformanceModel``: accuracy, training time and memory surrogates fitted on records together,
with the knowledge base's workloads and hardware kept for out-of-distribution checks."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dltune._errors import NotFittedError, ParameterError
from dltune._validation import check_int
from dltune.backends import BACKENDS
from dltune.hardware._hardware import cpu_identity
from dltune.measure._noise import SeedNoise, noise_scale
from dltune.surrogate._estimators import (
    SIZE_INPUTS,
    AccuracySurrogate,
    MemorySurrogate,
    TrainTimeSurrogate,
)
from dltune.surrogate._features import (
    HARDWARE_FEATURES,
    MEMORY_CHANGED,
    WORKLOAD_FEATURES,
    FeatureEncoder,
    _threads,
    hardware_vector,
    memory_as_now,
    ran_in_new_process,
    record_row,
    workload_vector,
)

__all__ = ["PerformanceModel", "blas_kernels", "epochs_ran", "machine_factor", "machine_key", "reference_machine",
           "usable_records"]

FORMAT_VERSION = 30
# Workload features that say how alike two workloads are (size, shape, difficulty, model cost).
_NOVELTY = ("log_n_train", "channels", "log_height", "log_num_classes", "landmark_logreg",
            "landmark_1nn", "log_flops_per_sample")
# The encoder's columns for the cost model's inputs (TrainTimeSurrogate, COST_INPUTS order).
_TIME_COST = ("epochs", "log_steps", "log_n_train", "log_param_count", "log_flops_per_sample",
              "log_input_size", "intra_threads", "log_layers", "log_activations_per_sample",
              "opt_momentum", "opt_adam", "fresh_process", "conv_outputs_per_sample")
# Speed-only columns the accuracy trees do not see (with the hardware and framework columns).
_NOT_ACCURACY = ("intra_threads", "cores", "threads_per_core", "log_work", "fresh_process",
                 "conv_outputs_per_sample")
# Accuracy-only columns the training-time and memory trees do not see.
_NOT_SPEED = ("lr_position", "log_step_per_sample")
# Columns the accuracy point's ensembles (value, order, transfer) see and its interval's quantile
# ensembles do not: given to those too, the step per sample moved the picks, which rank by the
# interval's low end, to worse ones (a scratch leave-one-workload-out: regret 1.64 -> 2.39 points on
# average; docs/recommendation-history.md).
_NOT_BANDS = ("log_step_per_sample",)
# Fresh-process records needed before the memory surrogate learns from them alone.
MIN_FRESH_RECORDS = 20
# How much wider the training-time interval gets each way per way the hardware differs from
# every measured machine, and the memory interval when it does (see PerformanceModel.widen).
HARDWARE_TIME_FACTOR = 3.0
HARDWARE_MEMORY_FACTOR = 1.5
# Peak RSS counts the framework's mapped library pages, and how many of them are resident
# differs between installations: the knowledge base's runs came from one venv, while a fresh
# clone's venv read 364 and 409 MB where they predicted 332 and 325 MB (docs/recommendation.md,
# Limits). A recommendation's memory interval reaches at least this many times its point.
INSTALLATION_MEMORY_FACTOR = 1.3
# A data set more than this many times the largest measured (training and test samples x input
# values) is extrapolated by the time and memory models: flagged, and their intervals widened by
# 1 + ln(ratio) (PerformanceModel.widen).
DATA_SIZE_OOD = 2.0
# Records a machine other than the knowledge base's needs before its speed is calibrated and it
# counts as measured (``dltune kb calibrate`` makes 60; see PerformanceModel.fit).
MIN_MACHINE_RECORDS = 8
# Records from which ``PerformanceModel(n_jobs=None)`` fits the accuracy surrogate in a second
# process: starting it (a fresh interpreter importing numpy and scikit-learn) takes 1-2 s on
# 2 cores, and a fit on fewer records takes about that in all.
CHILD_FIT_MIN_RECORDS = 2000
# Records of one framework on such a machine before it gets a speed factor of its own (fewer:
# the machine's factor over all its frameworks).
MIN_MACHINE_FRAMEWORK_RECORDS = 3
# Records of one framework x model on such a machine, from at least two of its workloads, before
# that pair gets a factor of its own. Machines differ by model, not only by framework: the
# 2-vCPU AVX2 VM ran TensorFlow's MLPs 1.8-3.2x and its cifar_quick 3.9-6.3x as long as the
# AVX-512 build machine. A calibration (one workload per model, 5 runs each) keeps to the
# framework's factor: one workload cannot tell the machine from that workload.
MIN_MACHINE_MODEL_RECORDS = 10
# Workloads of one framework measured on such a machine before its training times there come
# from a cost model of its own (PerformanceModel._fit_machine_time).
MIN_MACHINE_WORKLOADS = 12
# Runs of one framework at one thread count beyond the knowledge base's on such a machine before
# that count gets a factor of its own (``dltune kb calibrate`` on more than 2 cores runs 12 per
# framework with all of them; see machine_factor).
MIN_MACHINE_THREADS_RECORDS = 3
# Successful runs of a framework, and workloads they span, before recommend takes it as a
# candidate: its training times come from a cost model of about 16 terms per framework x model,
# which a few runs leave at zero (a user's 2 runs of the numpy backend on one workload made
# every numpy candidate predict 7e-07 s, and the balanced pick was numpy). The learning curve of
# the cost model (docs/recommendation.md, Validation): 30 % MAPE from 6 workloads. A framework
# measured about as widely as the most measured one (half its workloads, a tenth of its runs)
# counts too: a small knowledge base (a test's, or a user's --kb) has fewer of everything.
MIN_FRAMEWORK_RUNS = 60
MIN_FRAMEWORK_WORKLOADS = 6
_NOVELTY_IDX = [i for i, (n, _, _) in enumerate(WORKLOAD_FEATURES) if n in _NOVELTY]
# What does not change what a configuration trains to: left out when runs of one workload are
# grouped into measured configurations (PerformanceModel.measured_runs).
_NOT_TRAINING = ("seed", "threads", "device", "timeout_s", "preset_name")
# A workload without them takes the median of this many nearest measured workloads' of its model.
NOISE_NEIGHBOURS = 3


def measured_key(config: dict[str, Any]) -> str:
    """What tells measured configurations apart: the configuration but for how and where it
    ran (threads, device, timeout) and its seed."""
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_TRAINING}, sort_keys=True, default=str)


def workload_key(fingerprint: str | None, model: str | None) -> str:
    """A measured workload's key: its data set's fingerprint and its model."""
    return f"{fingerprint}|{model}"


def _as_dict(record: Any) -> dict[str, Any]:
    return record if isinstance(record, dict) else record.to_dict()


def usable_records(records: Iterable[Any]) -> list[dict[str, Any]]:
    """The ``ok`` records with the metrics and meta-features the surrogates need, as dicts."""
    out = []
    for record in records:
        data = _as_dict(record)
        m = data.get("metrics") or {}
        meta = (data.get("workload") or {}).get("meta") or {}
        if data.get("status") != "ok" or not meta.get("flops_per_sample"):
            continue
        if not (m.get("train_time_s") or 0) > 0 or m.get("test_accuracy") is None:
            continue
        if not (m.get("peak_rss_mb") or 0) > 0:
            continue
        out.append(data)
    return out


def workload_label(data: dict[str, Any]) -> str:
    """A unique label of a record's workload (its data set's fingerprint tells apart equal names)."""
    w = data["workload"]
    return f"{display_name(w)}#{w.get('fingerprint', '')[:6]}"


def display_name(workload: dict[str, Any]) -> str:
    """A readable workload name: data set, its size / shape / classes / difficulty, model."""
    p = workload.get("dataset_params") or {}
    meta = workload.get("meta") or {}
    name = workload.get("dataset") or workload.get("name", "?")
    if p:
        shape = f"{meta.get('height', '?')}x{meta.get('width', '?')}x{meta.get('channels', '?')}"
        parts = [f"n={meta.get('n_train', p.get('n_train', '?'))}", shape,
                 f"k={meta.get('num_classes', '?')}"]
        if "difficulty" in p:
            parts.append(f"d={p['difficulty']}")
        name = f"{name}[{','.join(parts)}]"
    return f"{name}-{workload.get('model', '?')}"


def intra_threads(config: dict[str, Any], hardware: dict[str, Any]) -> int | None:
    """A run's intra-op threads as the features read them (as configured, else its pinned
    cores, else the usable cores); None when none is known."""
    intra, _ = _threads(config, hardware)
    return int(intra) if math.isfinite(intra) else None


def remeasured(data: Sequence[dict[str, Any]]) -> set[int]:
    """The records (indices) that measure again, in a new process, a configuration of a backend
    whose memory changed (:data:`MEMORY_CHANGED`) that a new process ran before the change: the
    knowledge base's fresh runs of a later revision (``FRESH_REVISIONS``), measured for their
    memory; the same configuration and seed as a run on record."""
    def key(d: dict[str, Any]) -> str:
        return workload_label(d) + json.dumps(d.get("config"), sort_keys=True, default=str)

    changed = [i for i, d in enumerate(data)
               if (d.get("config") or {}).get("framework") in MEMORY_CHANGED and ran_in_new_process(d)]
    before = {key(data[i]) for i in changed if not memory_as_now(data[i])}
    return {i for i in changed if memory_as_now(data[i]) and key(data[i]) in before}


def blas_kernels(hardware: dict[str, Any]) -> str | None:
    """The kernels OpenBLAS picked for this CPU (its ``architecture`` as threadpoolctl reports
    it, e.g. ``'SkylakeX'``), or None where no OpenBLAS was loaded or it did not say. A
    description's own ``blas_kernels`` (the model's ``hardware_`` entries) is taken as it is.

    The CPU model string and flags do not tell every two machines apart: two 2-vCPU VMs that
    both report "AMD EPYC" with AVX-512 ran the same knowledge-base runs 1.47x apart (median of
    84 configurations measured on both, TensorFlow and MXNet, 2026-12-02 and -05), and OpenBLAS
    picked Haswell kernels on the faster one and SkylakeX kernels on the other: it reads the
    CPU's family and model, which the model string hides.
    """
    if hardware.get("blas_kernels"):
        return str(hardware["blas_kernels"])
    kernels = sorted({str(b["architecture"]) for b in hardware.get("blas") or ()
                      if b.get("internal_api") == "openblas" and b.get("architecture")})
    return "+".join(kernels) if kernels else None


def machine_key(hardware: dict[str, Any], kernels: bool = True) -> str:
    """One machine as the training-time model tells machines apart: CPU identity
    (:func:`cpu_identity`), logical cores and memory (the 1-core affinity target of a machine
    is the same machine), and the BLAS kernels picked for it (:func:`blas_kernels`; not with
    ``kernels=False``, nor where unknown)."""
    memory = hardware.get("memory_gb")
    try:
        memory = round(float(memory))
    except (TypeError, ValueError):
        memory = None
    key = f"{cpu_identity(hardware)}|{hardware.get('logical_cores')}|{memory}"
    picked = blas_kernels(hardware) if kernels else None
    return f"{key}|{picked}" if picked else key


def reference_machine(machines: Iterable[str]) -> str:
    """The machine most records come from (the first seen among equals): the one the main
    training-time model is fitted on; every other is a factor against it, or has a model of its
    own with enough workloads (``PerformanceModel._fit_machine_time``)."""
    counts = Counter(machines)
    return max(counts, key=lambda m: counts[m])


def machine_factor(entry: dict[str, float], framework: str, model: str | None,
                   threads: int | None = None) -> float:
    """A machine's log factor for one framework and model: the pair's own, else the framework's,
    else the machine's over every framework (see ``PerformanceModel._fit_per_machine``); at
    ``threads`` intra-op threads beyond the most the reference machine's runs used, plus what
    that many threads gain there against the cost model's extrapolation (:func:`thread_delta`)."""
    return entry.get(f"{framework}/{model}", entry.get(framework, entry["*"])) + thread_delta(
        entry, framework, threads)


def thread_delta(entry: dict[str, float], framework: str, threads: int | None) -> float:
    """How much longer (log) a run at ``threads`` intra-op threads takes on a machine than its
    factor says, where its runs used more threads than the reference machine's (``"@"``: that
    count). Measured per framework at a thread count (``"<framework>@<n>"``, else over all its
    frameworks, ``"*@<n>"``), interpolated in log threads from 0 at ``"@"``, and beyond the
    most threads measured that count's. 0 up to ``"@"`` threads, or without such runs."""
    top = entry.get("@")
    if threads is None or top is None or threads <= top:
        return 0.0
    for prefix in (f"{framework}@", "*@"):
        points = sorted((int(k[len(prefix):]), v) for k, v in entry.items() if k.startswith(prefix))
        if points:
            return float(np.interp(math.log(threads), [math.log(top)] + [math.log(n) for n, _ in points],
                                   [0.0] + [v for _, v in points]))
    return 0.0


def _factors(factors: dict[str, dict[str, float]], machines: Sequence[str],
             frameworks: Sequence[str], models: Sequence[str | None],
             threads: Sequence[int | None] | None = None) -> np.ndarray:
    """Per row, its machine's factor for its framework, model and intra-op threads (1 for an
    uncalibrated machine)."""
    threads = threads if threads is not None else [None] * len(machines)
    return np.exp(np.array([machine_factor(factors[m], fw, model, n) if m in factors else 0.0
                            for m, fw, model, n in zip(machines, frameworks, models, threads, strict=True)]))


def _thread_deltas(log_ratio: np.ndarray, beyond: np.ndarray, entry: dict[str, float],
                   frameworks: np.ndarray, models: np.ndarray, threads: np.ndarray,
                   top: int) -> dict[str, float]:
    """:func:`thread_delta`'s entries from a machine's rows ``beyond`` the reference machine's
    ``top`` threads: per framework (and over all, ``"*@<n>"``) and thread count with
    :data:`MIN_MACHINE_THREADS_RECORDS` rows, the median of their log ratio less the factor
    ``entry`` gives them at ``top`` threads; with ``"@"`` = ``top`` when there are any."""
    out: dict[str, float] = {}
    if not beyond.any():
        return out
    less = np.array([machine_factor(entry, str(fw), str(model)) for fw, model
                     in zip(frameworks, models, strict=True)])
    for n in sorted(set(threads[beyond].tolist())):
        at = beyond & (threads == n)
        if at.sum() >= MIN_MACHINE_THREADS_RECORDS:
            out[f"*@{n}"] = float(np.median(log_ratio[at] - less[at]))
        for fw in sorted(set(frameworks[at])):
            sel = at & (frameworks == fw)
            if sel.sum() >= MIN_MACHINE_THREADS_RECORDS:
                out[f"{fw}@{n}"] = float(np.median(log_ratio[sel] - less[sel]))
    return out | {"@": float(top)} if out else out


def _median_factors(log_ratio: np.ndarray, on: np.ndarray, frameworks: np.ndarray,
                    min_framework: int) -> dict[str, float]:
    """A machine's log factors from its rows ``on``: the median over all of them (``"*"``) and
    per framework with ``min_framework`` rows or more."""
    entry = {"*": float(np.median(log_ratio[on]))}
    for fw in sorted(set(frameworks[on])):
        sel = on & (frameworks == fw)
        if sel.sum() >= min_framework:
            entry[str(fw)] = float(np.median(log_ratio[sel]))
    return entry


def _outside(est, X: np.ndarray, y: np.ndarray, factor: np.ndarray) -> float:
    """How much wider (log, each way) ``est``'s interval, times each row's ``factor`` (log),
    must be to hold ``y``: the split-conformal quantile of how far each row lies outside it (0
    inside), at the level that holds ``est.coverage`` of rows like these (all of them, with few
    rows). ``est`` has not seen the rows (fitted on the other machines' alone)."""
    _, low, high = est.predict_interval(X)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_y = np.log(y)
        score = np.maximum(np.log(np.maximum(low, 1e-300)) + factor - log_y,
                           log_y - np.log(np.maximum(high, 1e-300)) - factor)
    score = np.maximum(score[np.isfinite(score)], 0.0)
    if not len(score):
        return 0.0
    level = min(1.0, math.ceil((len(score) + 1) * est.coverage) / len(score))
    return float(np.quantile(score, level))


def epochs_ran(data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the epochs its record's run trained (fewer than configured if it stopped
    early); ``row`` itself when they are the configured ones."""
    ran = (data.get("metrics") or {}).get("epochs_run")
    if ran and ran != row["config"].get("epochs"):
        return dict(row, config=dict(row["config"], epochs=ran))
    return row


def _data_values(meta: dict[str, Any]) -> float | None:
    """Training and test samples x input values of a workload's data set (None if unknown)."""
    try:
        return (float(meta["n_train"]) + float(meta.get("n_test") or 0)) * float(meta["input_size"])
    except (KeyError, TypeError, ValueError):
        return None


def _stretch(pred: dict[str, np.ndarray], key: str, factor: float, log_space: bool) -> None:
    """Multiply the distances from ``pred[key]`` to its interval ends by ``factor``."""
    point, low, high = pred[key], pred[f"{key}_low"], pred[f"{key}_high"]
    if log_space:
        point, low, high = np.log(point), np.log(low), np.log(high)
    low, high = point - factor * (point - low), point + factor * (high - point)
    if log_space:
        low, high = np.exp(low), np.exp(high)
    pred[f"{key}_low"], pred[f"{key}_high"] = low, high


class PerformanceModel:
    """Predicts test accuracy, training seconds and peak MB, each with an interval.

    Args:
        coverage: target coverage of the intervals.
        max_iter: boosting iterations of the accuracy and memory tree ensembles.
        time_residual_iter: boosting iterations of the quantile trees on the log ratio of
            measured to modelled training time, which give its interval (the point is the
            cost model's own; see TrainTimeSurrogate).
        calibrate: conformal calibration of the intervals (costs ``cv`` extra fits each).
        random_state: seed.
        machine_workloads: workloads a machine other than the reference one needs measured
            (with one framework) before that framework's training times there come from a cost
            model fitted on that machine's runs alone rather than from the reference machine's
            scaled by a factor (see ``fit``).
        transfer: share of the accuracy order drawn from the measured workloads most like the
            one predicted, each by a rank model of its own (see ``AccuracySurrogate``); 0: the
            order model alone.
        n_jobs: processes for the fit. 1: this one. 2 or more: the accuracy surrogate is fitted
            in a second process while this one fits the rest (about half the fit each, so more
            than 2 add nothing); the fit is the same to the last bit. None: 2 where at least
            2 cores are usable and at least :data:`CHILD_FIT_MIN_RECORDS` records are fitted
            on (on fewer, starting the process costs more than it saves).
    """

    def __init__(self, coverage: float = 0.8, max_iter: int = 100, time_residual_iter: int = 30,
                 calibrate: bool = True, random_state: int = 0,
                 machine_workloads: int = MIN_MACHINE_WORKLOADS, transfer: float = 0.5,
                 n_jobs: int | None = None) -> None:
        self.coverage = coverage
        self.max_iter = max_iter
        self.time_residual_iter = time_residual_iter
        self.calibrate = calibrate
        self.random_state = random_state
        self.machine_workloads = machine_workloads
        self.transfer = transfer
        self.n_jobs = n_jobs

    def _estimators(self, encoder: FeatureEncoder):
        kw = dict(coverage=self.coverage, calibrate=self.calibrate, random_state=self.random_state)
        names = encoder.feature_names_
        cost = tuple(names.index(n) for n in _TIME_COST)
        groups = tuple(i for i, n in enumerate(names) if n.startswith("fw_"))
        subgroups = tuple(i for i, n in enumerate(names) if n.startswith("fwm_"))
        # Accuracy: every framework trains the same model with the same semantics, and the
        # hardware and threads change speed, not results, so the trees pool them all.
        not_accuracy = set(HARDWARE_FEATURES) | set(_NOT_ACCURACY)
        accuracy_trees = tuple(i for i, n in enumerate(names)
                               if not n.startswith(("fw_", "fwm_")) and n not in not_accuracy)
        accuracy_bands = tuple(i for i in accuracy_trees if names[i] not in _NOT_BANDS)
        # Speed and memory: where a rate lies in its optimizer's range changes neither.
        speed_trees = tuple(i for i, n in enumerate(names) if n not in _NOT_SPEED)
        return (AccuracySurrogate(reference_columns=(names.index("landmark_logreg"),
                                                     names.index("landmark_1nn")),
                                  n_test_column=names.index("log_n_test"),
                                  classes_column=names.index("log_num_classes"),
                                  workload_columns=tuple(names.index(n) for n, _, _ in WORKLOAD_FEATURES),
                                  model_columns=tuple(
                                      tuple(i for i, n in enumerate(names) if n.startswith("fwm_") and n.endswith(f"|{m}"))
                                      for m in sorted({m for _, m in encoder.framework_models_})),
                                  transfer=self.transfer,
                                  tree_columns=accuracy_trees, band_columns=accuracy_bands,
                                  max_iter=self.max_iter, **kw),
                TrainTimeSurrogate(work_column=encoder.work_column, cost_columns=cost,
                                   group_columns=groups, subgroup_columns=subgroups,
                                   max_iter=self.time_residual_iter, tree_columns=speed_trees, **kw),
                MemorySurrogate(size_columns=tuple(names.index(n) for n in SIZE_INPUTS),
                                group_columns=groups,
                                layout_copy_columns=tuple(
                                    i for i in groups
                                    if getattr(BACKENDS.get(names[i][3:]), "copies_for_layout", False)),
                                max_iter=self.max_iter,
                                tree_columns=speed_trees, **kw))

    def fit(self, records: Iterable[Any]) -> PerformanceModel:
        """Fit on measurement records (:class:`Measurement` or dicts); failed ones are ignored."""
        if self.n_jobs is not None:
            check_int("n_jobs", self.n_jobs, 1, 10_000)
        data = usable_records(records)
        if len(data) < 4:
            raise ParameterError(
                f"The 'records' parameter must hold at least 4 successful measurements. "
                f"Got {len(data)} instead."
            )
        rows = [record_row(d) for d in data]
        self.encoder_ = FeatureEncoder().fit(rows)
        X = self.encoder_.transform(rows)
        self.accuracy_, self.train_time_, self.memory_ = self._estimators(self.encoder_)
        # Intervals calibrated by holding out whole workloads: what a new workload will see.
        groups = [workload_label(d) for d in data]
        # ``dltune kb calibrate`` measures speed: its runs are knowledge-base configurations with
        # the same seed, whose accuracy is on record already. Counted again, they would weigh
        # those configurations twice in the accuracy model (and a calibration would change which
        # configuration is recommended, not only how long it takes).
        calibration = [(d.get("kb") or {}).get("suite") == "calibration" for d in data]
        # Likewise a knowledge-base run in a new process measured again after its backend's
        # memory changed (FRESH_REVISIONS: the same configuration and seed as a fresh run on
        # record, measured for its memory): counted for accuracy, the 204 of TensorFlow and
        # MXNet moved the accuracy model's pick on the 1,200-sample 32x32x3 LeNet to a run that
        # measured 22.7 % (regret 77 points, 0 before).
        again = remeasured(data)
        scored = [i for i, c in enumerate(calibration) if not c and i not in again]
        scored = scored if len(scored) >= 4 else list(range(len(data)))
        accuracy = ([data[i]["metrics"]["test_accuracy"] for i in scored], [groups[i] for i in scored])
        child = self._start_accuracy_fit(X[scored], *accuracy)
        from threadpoolctl import threadpool_limits

        # One thread, as in the child (more spin beside it), so that the fit is the same to the
        # last bit in one process or two; on data this small it is no slower.
        with threadpool_limits(1):
            try:
                self._fit_rest(data, rows, X, groups, calibration)
            except BaseException:
                if child is not None:
                    child.close()
                raise
            fitted = child.result(self.accuracy_) if child is not None else None
            if fitted is None:  # in one process, or the child failed: here
                self.accuracy_.fit(X[scored], *accuracy)
        self.n_records_ = len(data)
        import sklearn

        # Another scikit-learn can grow other trees from the same records.
        self.fitted_with_ = {"scikit-learn": sklearn.__version__, "numpy": np.__version__}
        return self

    def _start_accuracy_fit(self, X: np.ndarray, y: list[float], groups: list[str]):
        """The accuracy surrogate's fit started in a second process (``n_jobs``), or None."""
        from dltune.config import usable_cores

        jobs = self.n_jobs if self.n_jobs is not None else (
            2 if usable_cores() >= 2 and len(y) >= CHILD_FIT_MIN_RECORDS else 1)
        if jobs < 2:
            return None
        from dltune.surrogate._child import start_child_fit

        return start_child_fit(self.get_params(), self.encoder_.to_state(), X, np.asarray(y), np.asarray(groups))

    def _fit_rest(self, data: list[dict[str, Any]], rows: list[dict[str, Any]], X: np.ndarray,
                  groups: list[str], calibration: list[bool]) -> None:
        """Everything but the accuracy surrogate: training time, memory, machines, references."""
        # A run stopped early (diverged, pruned) trained fewer epochs than configured: its time
        # is that of the epochs it ran.
        ran = [epochs_ran(d, row) for d, row in zip(data, rows, strict=True)]
        X_time = X if all(a is b for a, b in zip(ran, rows, strict=True)) else self.encoder_.transform(ran)
        seconds = np.array([d["metrics"]["train_time_s"] for d in data], dtype=np.float64)
        machines = [machine_key(d.get("hardware") or {}) for d in data]
        frameworks = [d["config"]["framework"] for d in data]
        models = [row["meta"].get("model") for row in rows]
        threads = [intra_threads(d["config"], d.get("hardware") or {}) for d in data]
        # A machine that measured knowledge-base runs and was calibrated too: its calibration
        # says how fast it runs now (a virtual machine's host can change), not more of the same.
        measured = Counter(m for m, c in zip(machines, calibration, strict=True) if not c)
        now = [i for i, (m, c) in enumerate(zip(machines, calibration, strict=True))
               if c and measured[m] >= MIN_MACHINE_RECORDS]
        timed = sorted(set(range(len(data))) - set(now))

        def take(values, rows):
            return [values[i] for i in rows]

        # Counted without those calibration runs: they are not the knowledge base's runs.
        self.reference_machine_ = reference_machine(take(machines, timed))
        # What another machine's factor for a framework compares with: the reference machine's
        # runs of it. A framework only other machines ran has a factor against the cost model's
        # extrapolation, not a speed ratio (recommend's reason says so).
        self.reference_frameworks_ = sorted({frameworks[i] for i in timed
                                             if machines[i] == self.reference_machine_})
        counts = Counter(take(machines, timed))
        others = {m for m, n in counts.items() if m != self.reference_machine_ and n >= MIN_MACHINE_RECORDS}
        self.machine_speed_ = self._fit_per_machine(
            self.train_time_, X_time[timed], seconds[timed], take(groups, timed), take(machines, timed),
            take(frameworks, timed), take(models, timed), take(threads, timed), others,
            MIN_MACHINE_FRAMEWORK_RECORDS, refit=False, transfer=self.coverage)
        self._fit_machine_time(X_time[timed], seconds[timed], take(groups, timed), take(machines, timed),
                               take(frameworks, timed), others)
        self._fit_machine_now(X_time, seconds, data, groups, machines, frameworks, models, threads, now)
        # Peak memory from runs in a new worker process where there are enough: a reused
        # worker's resident memory is the high-water mark of every run before it. Runs of a
        # backend that held more memory then than it does now are left out (memory_as_now).
        current = [i for i in range(len(data)) if memory_as_now(data[i])] or list(range(len(data)))
        fresh = [i for i in current if rows[i]["fresh"]]
        memory_rows = fresh if len(fresh) >= MIN_FRESH_RECORDS else current
        # The memory model's own reference machine: the one whose memory rows cover the most
        # frameworks (then: the most rows). The others' factors are measured against a model
        # of its rows, so it must have measured every framework: since TensorFlow's older runs
        # are left out, only the machine that measured them again has TensorFlow's memory.
        covered = Counter(machines[i] for i in memory_rows)
        kinds: dict[str, set[str]] = {}
        for i in memory_rows:
            kinds.setdefault(machines[i], set()).add(frameworks[i])
        self.memory_reference_machine_ = max(
            covered, key=lambda m: (len(kinds[m]) if covered[m] >= MIN_FRESH_RECORDS else 0, covered[m]))
        memory_others = {m for m, n in counts.items()
                         if m != self.memory_reference_machine_ and n >= MIN_MACHINE_RECORDS}
        self.machine_memory_ = self._fit_per_machine(
            self.memory_, X[memory_rows], np.array([data[i]["metrics"]["peak_rss_mb"] for i in memory_rows]),
            [groups[i] for i in memory_rows], [machines[i] for i in memory_rows],
            [frameworks[i] for i in memory_rows], [models[i] for i in memory_rows],
            [threads[i] for i in memory_rows], memory_others, 2, spread=True)
        self.n_memory_records_ = len(memory_rows)
        self._fit_references(data)

    def _fit_machine_time(self, X: np.ndarray, y: np.ndarray, groups: list[str], machines: list[str],
                          frameworks: list[str], others: set[str]) -> None:
        """A training-time model of its own for each machine in ``others`` with
        ``machine_workloads`` or more workloads of one framework (``machine_time_``, with what it
        covers in ``machine_time_info_``).

        A factor per framework and model cannot say how a machine's speed varies between
        workloads: the 2-vCPU AVX2 VM that measured part of the knowledge base ran most of its
        workloads 2-3x as long as the AVX-512 build machine predicted, and a 600-sample 16x16x3
        cifar_quick in Theano in 0.4x. With enough workloads of its own, the cost model fitted
        on that machine's runs alone learns its costs term by term. Its frameworks with fewer
        workloads there keep the reference model and the factor.
        """
        self.machine_time_: dict[str, TrainTimeSurrogate] = {}
        self.machine_time_info_: dict[str, dict[str, Any]] = {}
        for m in sorted(others):
            on = [i for i, mm in enumerate(machines) if mm == m]
            covered = sorted(fw for fw in {frameworks[i] for i in on}
                             if len({groups[i] for i in on if frameworks[i] == fw}) >= self.machine_workloads)
            if not covered:
                continue
            rows = [i for i in on if frameworks[i] in covered]
            est = self._estimators(self.encoder_)[1]
            est.fit(X[rows], y[rows], [groups[i] for i in rows])
            self.machine_time_[m] = est
            self.machine_time_info_[m] = {"frameworks": covered, "records": len(rows),
                                          "workloads": len({groups[i] for i in rows})}

    def _fit_machine_now(self, X: np.ndarray, y: np.ndarray, data: list[dict[str, Any]],
                         groups: list[str], machines: list[str], frameworks: list[str],
                         models: list[str | None], threads: list[int | None], now: list[int]) -> None:
        """Factors for the machines the knowledge base measured that were calibrated too
        (``machine_now_``, log, per framework as :meth:`_fit_per_machine`'s; what they rest on
        in ``machine_now_info_``): the median over their calibration runs (rows ``now``) of how
        much longer each ran than the same machine ran it before.

        The calibration suite runs the knowledge base's first configurations, so a machine that
        measured them has the very same run on record (same workload and configuration, in a
        new worker process or a reused one alike): the ratio of the two times needs no model.
        A run without that twin is compared with the prediction from the machine's
        knowledge-base runs, less the prediction's median error on that machine's runs of the
        same workload and framework where it has some (as :meth:`_machine_factors` does for
        other machines).

        The same CPU can run the same runs at other speeds on other days: on 2026-12-04 a
        2-vCPU AVX-512 AMD EPYC VM of the same identity as the build machine ran 1.4-1.6x as
        long as the knowledge base's runs of 2026-12-02 (``benchmarks/kb_speed_drift.py``), and
        ``recommend --verify`` measured outside the interval. A calibration there says so, and
        ``recommend`` then scales that machine's times (and intervals) by it.

        That holds for a calibration made on this machine (in the cache, ``"here"`` in
        ``machine_now_info_``). One shipped in the package (``kb.shipped``) was made on another
        machine of the same kind on another day: machines of that kind have then run at the
        knowledge base's speed and at the calibration's, and which one a machine runs at today
        is unknown. Its factor is then half the calibration's (in log: the geometric middle)
        and the interval widens by that half too (per framework, ``"~<framework>"``), so it
        reaches both speeds; the calibration's own ratios are kept in
        ``machine_now_info_[m]["ratio"]``. A calibration in the cache
        supersedes a shipped one of the same machine.
        """
        self.machine_now_: dict[str, dict[str, float]] = {}
        self.machine_now_info_: dict[str, dict[str, Any]] = {}
        calibrated = {machines[i] for i in now}
        if not calibrated:
            return
        # The calibrated machines' other runs of the calibration's workloads and frameworks (the
        # runs a calibration run is compared with), then the calibration runs.
        now_set = set(now)
        wanted = {(machines[i], groups[i], frameworks[i]) for i in now}
        before = [i for i in range(len(machines))
                  if i not in now_set and (machines[i], groups[i], frameworks[i]) in wanted]
        rows = before + list(now)
        point = self.train_time_.predict(X[rows])
        self._machine_times(X[rows], [machines[i] for i in rows], [frameworks[i] for i in rows],
                            [models[i] for i in rows], [threads[i] for i in rows], point)
        with np.errstate(divide="ignore", invalid="ignore"):
            error = np.log(y[rows]) - np.log(point)
        error_before, error_now = error[:len(before)], error[len(before):]

        def key(i: int) -> tuple[str, str, str, bool]:
            # The same run: machine, workload, configuration, and whether its worker was new
            # (a new process pays warm-ups a reused one has behind it).
            return (machines[i], groups[i], json.dumps(data[i]["config"], sort_keys=True),
                    ran_in_new_process(data[i]))

        twins: dict[tuple[str, str, str, bool], list[float]] = {}
        for i in before:
            if y[i] > 0:
                twins.setdefault(key(i), []).append(float(np.log(y[i])))
        same = {}  # (machine, workload, framework) -> the model's errors on the machine's runs
        for i, e in zip(before, error_before, strict=True):
            if np.isfinite(e):
                same.setdefault((machines[i], groups[i], frameworks[i]), []).append(e)
        log_ratio = np.empty(len(now))
        for k, (i, e) in enumerate(zip(now, error_now, strict=True)):
            then = twins.get(key(i))
            if then:  # as long as the same run took then (their median if it ran more than once)
                log_ratio[k] = np.log(y[i]) - np.median(then)
            else:
                log_ratio[k] = e - np.median(same.get((machines[i], groups[i], frameworks[i]), [0.0]))
        machines_a, frameworks_a = np.array([machines[i] for i in now]), np.array([frameworks[i] for i in now])
        models_a = np.array([str(models[i]) for i in now])
        threads_a = np.array([threads[i] or 0 for i in now])
        shipped = np.array([bool((data[i].get("kb") or {}).get("shipped")) for i in now])
        for m in sorted(calibrated):
            on = (machines_a == m) & np.isfinite(log_ratio)
            # This machine's own calibration (in the cache) says how fast it runs now; one
            # shipped in the package, how fast another machine of its kind ran on another day.
            from_here = bool((on & ~shipped).any())
            on &= ~shipped if from_here else shipped
            # Runs with more threads than its knowledge-base runs used: a factor of their own
            # (from this machine's calibration only; a shipped one's are left out).
            top = max((threads[i] or 0 for i in range(len(machines)) if machines[i] == m and i not in now_set),
                      default=0)
            beyond = on & (threads_a > top)
            on &= ~beyond
            if not on.any():
                continue
            entry = _median_factors(log_ratio, on, frameworks_a, MIN_MACHINE_FRAMEWORK_RECORDS)
            # How far its runs scatter around their factor ("~", log; the interval's share of
            # them): one factor per framework does not fit every workload and configuration.
            own = np.array([machine_factor(entry, str(fw), None) for fw in frameworks_a[on]])
            entry["~"] = float(np.quantile(np.abs(log_ratio[on] - own), self.coverage))
            if from_here:
                entry |= _thread_deltas(log_ratio, beyond, entry, frameworks_a, models_a, threads_a, top)
            dates = [str(data[now[k]].get("started_at") or "") for k in np.flatnonzero(on)]
            info = {"runs": int(on.sum()), "measured_to": max(dates)[:10] or None, "here": from_here}
            if not from_here:
                # Machines of this kind have run at the knowledge base's speed and at the
                # calibration's: which one a machine of that kind runs at today is unknown, so
                # its times are scaled halfway (in log) and the interval reaches both.
                # Each framework's interval by its own half (``"~<framework>"``; ``"~"`` with the
                # machine's over all, for the frameworks that use it).
                scatter = entry.pop("~")
                info["ratio"] = {k: math.exp(v) for k, v in entry.items()}
                entry = ({k: v / 2 for k, v in entry.items()}
                         | {f"~{k}" if k != "*" else "~": scatter + abs(v) / 2 for k, v in entry.items()})
            self.machine_now_[m] = entry
            self.machine_now_info_[m] = info

    def _machine_times(self, X: np.ndarray, machines: Sequence[str], frameworks: Sequence[str],
                       models: Sequence[str | None], threads: Sequence[int | None],
                       *times: np.ndarray) -> None:
        """Turn the main model's training times of these rows (the point, and the interval's
        ends when given) into their machines', in place: scaled by each machine's factor (the
        ends also widened by how far one of its workloads' ratio strays from the others', its
        ``"~"``), or its own model's where it has one."""
        if self.machine_speed_:
            factor = _factors(self.machine_speed_, machines, frameworks, models, threads)
            for t in times:
                t *= factor
            if len(times) == 3:
                stray = np.exp([self.machine_speed_[m].get("~", 0.0) if m in self.machine_speed_ else 0.0
                                for m in machines])
                low, high = times[1], times[2]
                low /= stray
                high *= stray
        for m, est in self.machine_time_.items():  # machines with a time model of their own
            covered = self.machine_time_info_[m]["frameworks"]
            own = np.array([mm == m and f in covered for mm, f in zip(machines, frameworks, strict=True)])
            if own.any():
                # The point only, or the point and both ends of the interval.
                for t, own_t in zip(times, est.predict_interval(X[own]), strict=False):
                    t[own] = own_t

    def machines_alike(self, hardware: dict[str, Any]) -> list[str]:
        """The measured machines ``hardware`` may be where its :func:`machine_key` was never
        measured: those of the same CPU, cores and memory, whatever their BLAS kernels (none
        where its key was measured, or no machine of that CPU was)."""
        key = machine_key(hardware)
        known = {machine_key(h) for h in self.hardware_}
        if key in known:
            return []
        base = machine_key(hardware, kernels=False)
        return sorted(m for m in known if m == base or m.startswith(base + "|"))

    def machine_of(self, hardware: dict[str, Any]) -> str:
        """``hardware``'s :func:`machine_key`; where the knowledge base knows no machine with
        those BLAS kernels (or the description does not say which: a hand-written one), the
        measured machine of the same CPU, cores and memory: the reference machine if it is one,
        else one with a time model of its own, else the first (sorted). (:meth:`hedge_machines`
        spans them all.)"""
        alike = self.machines_alike(hardware)
        if not alike:
            return machine_key(hardware)
        if self.reference_machine_ in alike:
            return self.reference_machine_
        return next((m for m in alike if m in self.machine_time_), alike[0])

    def time_source(self, hardware: dict[str, Any], framework: str) -> dict[str, Any] | None:
        """Where training times for ``framework`` on ``hardware`` come from when it is a machine
        with a time model of its own (its ``workloads`` and ``records``); None otherwise."""
        self._check_fitted()
        info = self.machine_time_info_.get(self.machine_of(hardware))
        return info if info and framework in info["frameworks"] else None

    @classmethod
    def _fit_per_machine(cls, est, X: np.ndarray, y: np.ndarray, groups: list[str],
                         machines: list[str], frameworks: list[str], models: list[str | None],
                         threads: list[int | None], others: set[str], min_framework: int,
                         spread: bool = False, refit: bool = True,
                         transfer: float | None = None) -> dict[str, dict[str, float]]:
        """Fit ``est`` and return the factors of the machines in ``others`` (log, per framework).

        The features say nothing about which machine ran a run, so records of another machine
        (``dltune kb calibrate``, the user's ``bench`` / ``tune`` runs) would only blur a model
        fitted on the knowledge base's. Each machine in ``others`` (those other than the one
        most records come from, with at least :data:`MIN_MACHINE_RECORDS` records) gets a
        factor per framework: the median of measured over predicted of that framework's rows
        there (with fewer than ``min_framework``, the machine's median over all its rows), each
        less the median of the same over the other machines' rows of its workload and framework;
        and a factor per framework x model where the machine has :data:`MIN_MACHINE_MODEL_RECORDS`
        rows of that pair from two or more workloads (a machine whose knowledge-base runs were
        measured there, not only a calibration).
        The factors are measured against ``est`` fitted on the other machines' rows alone, then
        ``est`` is refitted on every row, this machine's divided by their factor. Predictions
        for that machine are multiplied by its factor. With ``refit=False`` ``est`` stays the fit
        on the other machines' rows. Training time: the machine's speed (the intervals stay the
        knowledge base's: calibration measures 60 runs), not refitted: a machine is faster on
        some workloads than on others of the same framework and model (the AVX2 VM ran the
        800-sample 32x32x3 cifar_quick 3-6x as long as the AVX-512 build machine, its 600-sample
        16x16x3 one in 0.3-0.6x of what its framework factors predicted), so its rows divided
        by one factor would blur the cost model:
        refitted on the 8 workloads that VM measured, the build machine's 14 were predicted
        with a MAPE of 17.9 % instead of 16.7 %. Peak memory
        (new-process runs, one per framework and thread setting in a calibration): what its
        libraries and page cache add; with ``spread``, how far that machine's rows fall outside
        ``est``'s interval times their factor (:func:`_outside`: the split-conformal quantile,
        all of them with few rows) is kept (``"~"``, log) and widens its intervals each way.
        Until FORMAT_VERSION 20 it was their largest deviation from the factor, inside the
        interval or not: on the build machine's 187 new-process runs that was 1.87x each way
        (MXNet's), and its held-out workloads' memory intervals held 97 % of their runs at 4.9x
        wide (median high / low) instead of 82 % at 1.4x. With
        ``transfer`` (a quantile, for training time): how far a machine's ratio on one workload
        (per framework) lies from the factor its other workloads give, that quantile of it
        (``"~"``, log; machines with runs of two or more workloads). A calibration runs three workloads, and
        one workload's speed ratio strays from another's (on a 16-core Xeon 0.82-1.13 around
        the others': ``dltune kb validate``'s calibration table), which a factor fitted on all
        of them hides.
        """
        base = [i for i, m in enumerate(machines) if m not in others]
        if not others or len(base) < 4:
            est.fit(X, y, groups)
            return {}
        # Measured against a fit on the other machines alone: a fit that saw this machine's rows
        # would have moved towards them and hide part of the factor.
        est.fit(X[base], y[base], [groups[i] for i in base])
        factors = cls._machine_factors(est, X, y, groups, machines, frameworks, models, threads, others,
                                       min_framework, spread, transfer)
        if refit:
            est.fit(X, y / _factors(factors, machines, frameworks, models, threads), groups)
        return factors

    @staticmethod
    def _machine_factors(est, X: np.ndarray, y: np.ndarray, groups: list[str], machines: list[str],
                         frameworks: list[str], models: list[str | None], threads: list[int | None],
                         others: set[str], min_framework: int, spread: bool,
                         transfer: float | None = None) -> dict[str, dict[str, float]]:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.log(y) - np.log(est.predict(X))
        machines_a, frameworks_a, groups_a = np.array(machines), np.array(frameworks), np.array(groups)
        models_a = np.array([str(m) for m in models])
        threads_a = np.array([n if n is not None else 0 for n in threads])
        # Less the model's own error on the same workload and framework on the other machines
        # (the knowledge base's): a calibration run of a workload the model under-predicts
        # everywhere says nothing about the machine.
        base = ~np.isin(machines_a, sorted(others)) & np.isfinite(log_ratio)
        # The most threads the reference machine's runs used: what the cost model extrapolates
        # beyond. A machine's runs with more get a factor of their own (_thread_deltas).
        top = int(threads_a[base].max()) if base.any() else 0
        for g, fw in {(g, f) for g, f, m in zip(groups, frameworks, machines, strict=True) if m in others}:
            sel = base & (groups_a == g) & (frameworks_a == fw)
            if sel.any():
                log_ratio = np.where((groups_a == g) & (frameworks_a == fw) & ~base,
                                     log_ratio - np.median(log_ratio[sel]), log_ratio)
        out = {}
        for m in sorted(others):
            on = (machines_a == m) & np.isfinite(log_ratio)
            if not on.any():
                continue
            beyond = on & (threads_a > top)
            if (on & ~beyond).any():
                on = on & ~beyond
            else:  # only runs beyond: one factor, as before there were thread factors
                beyond = np.zeros_like(on)
            entry = _median_factors(log_ratio, on, frameworks_a, min_framework)
            for fw in sorted(set(frameworks_a[on])):
                sel = on & (frameworks_a == fw)
                for model in sorted(set(models_a[sel])):
                    pair = sel & (models_a == model)
                    if pair.sum() >= MIN_MACHINE_MODEL_RECORDS and len(set(groups_a[pair])) >= 2:
                        entry[f"{fw}/{model}"] = float(np.median(log_ratio[pair]))
            if spread:  # how far the machine's rows fall outside the interval ("~", log)
                entry["~"] = _outside(est, X[on], y[on], np.array([
                    machine_factor(entry, str(fw), model)
                    for fw, model in zip(frameworks_a[on], models_a[on], strict=True)]))
            workloads = sorted(set(groups_a[on])) if transfer is not None else []
            if len(workloads) >= 2:
                # Each workload's ratio (per framework: its runs' median; their scatter around
                # it is the reference model's, in its interval already) against the factor of
                # the machine's other workloads.
                strays = []
                for g in workloads:
                    rest = _median_factors(log_ratio, on & (groups_a != g), frameworks_a, min_framework)
                    for fw in sorted(set(frameworks_a[on & (groups_a == g)])):
                        held = on & (groups_a == g) & (frameworks_a == fw)
                        strays.append(abs(float(np.median(log_ratio[held])) - machine_factor(rest, str(fw), None)))
                entry["~"] = float(np.quantile(strays, transfer))
            entry |= _thread_deltas(log_ratio, beyond, entry, frameworks_a, models_a, threads_a, top)
            out[m] = entry
        return out

    def calibrated_machines(self) -> list[str]:
        """The machines whose speed the model knows: the knowledge base's and each calibrated one."""
        self._check_fitted()
        return [self.reference_machine_, *sorted(self.machine_speed_)]

    def _fit_references(self, data: list[dict[str, Any]]) -> None:
        workloads: dict[str, dict[str, Any]] = {}
        for d in data:
            label = workload_label(d)
            w = d["workload"]
            entry = workloads.setdefault(label, {"name": display_name(w),
                                                 "dataset": w.get("dataset"),
                                                 "dataset_params": w.get("dataset_params") or {},
                                                 "fingerprint": w.get("fingerprint"),
                                                 "model": w.get("model") or w["meta"].get("model"),
                                                 "meta": w["meta"], "records": 0})
            entry["records"] += 1
        self.workloads_ = list(workloads.values())
        vectors = np.array([workload_vector(w["meta"])[_NOVELTY_IDX] for w in self.workloads_])
        spread = np.nanstd(vectors, axis=0) if len(vectors) > 1 else np.ones(vectors.shape[1])
        self.workload_scale_ = np.where(np.isfinite(spread) & (spread > 0.05), spread, 0.05)
        self.workload_center_ = np.nanmean(vectors, axis=0)
        # How far each measured workload lies from the nearest other of its model.
        loo = [d for i, v in enumerate(vectors)
               if np.isfinite(d := self._distances(v, skip=i, model=self.workloads_[i]["model"]).min())]
        loo = loo or [1.0]
        self.ood_threshold_ = float(max(1.0, 1.25 * max(loo)))
        hardware: dict[str, dict[str, Any]] = {}
        for d in data:
            hw = d.get("hardware") or {}
            hardware.setdefault(f"{machine_key(hw)}|{hw.get('usable_cores')}", {
                "target": hw.get("target"), "cpu_model": hw.get("cpu_model"),
                "usable_cores": hw.get("usable_cores"), "logical_cores": hw.get("logical_cores"),
                "memory_gb": hw.get("memory_gb"), "gpus": len(hw.get("gpus") or ()),
                "cpu_flags": sorted(hw.get("cpu_flags") or ()), "blas_kernels": blas_kernels(hw),
            })
        self.hardware_ = list(hardware.values())
        configs = [d["config"] for d in data]
        self.config_ranges_ = {
            "epochs": [min(c["epochs"] for c in configs), max(c["epochs"] for c in configs)],
            "batch_size": [min(c["batch_size"] for c in configs), max(c["batch_size"] for c in configs)],
            "learning_rate": [min(c["learning_rate"] for c in configs),
                              max(c["learning_rate"] for c in configs)],
        }
        self.frameworks_ = sorted({c["framework"] for c in configs})
        runs: dict[str, list] = {}
        for d in data:
            entry = runs.setdefault(d["config"]["framework"], [0, set()])
            entry[0] += 1
            entry[1].add(workload_label(d))
        self.framework_runs_ = {fw: {"runs": n, "workloads": len(w)} for fw, (n, w) in sorted(runs.items())}
        self._fit_measured(data)
        # The most intra-op threads any run used, per machine and over all ("*").
        self.threads_measured_: dict[str, int] = {}
        for d in data:
            n = intra_threads(d["config"], d.get("hardware") or {})
            if n is not None:
                for key in (machine_key(d.get("hardware") or {}), "*"):
                    self.threads_measured_[key] = max(n, self.threads_measured_.get(key, 0))

    def _distances(self, vector: np.ndarray, skip: int | None = None, model: str | None = None) -> np.ndarray:
        """Standardised distances of ``vector`` to the measured workloads; with ``model``, those
        of another model are infinitely far where ``model`` was measured (:meth:`model_measured`):
        a workload's size, shape and landmarks say little about how another model trains on it."""
        cached = getattr(self, "_workload_vectors", None)
        if cached is None or cached[0] is not self.workloads_:  # once per fit or load
            cached = self._workload_vectors = (
                self.workloads_, np.array([workload_vector(w["meta"])[_NOVELTY_IDX] for w in self.workloads_]))
        diff = (cached[1] - vector[None, :]) / self.workload_scale_[None, :]
        diff = np.where(np.isfinite(diff), diff, 3.0)  # a feature unknown on one side: far
        dist = np.sqrt(np.mean(diff**2, axis=1))
        dist[~self._of_model(model)] = np.inf
        if skip is not None:
            dist[skip] = np.inf
        return dist

    def predictable_frameworks(self) -> list[str]:
        """The frameworks with enough runs for their training time to be predicted:
        :data:`MIN_FRAMEWORK_RUNS` on :data:`MIN_FRAMEWORK_WORKLOADS` workloads, or half the
        workloads and a tenth of the runs of the most measured framework."""
        self._check_fitted()
        counts = self.framework_runs_
        most_runs = max(c["runs"] for c in counts.values())
        most_workloads = max(c["workloads"] for c in counts.values())
        return [fw for fw in self.frameworks_
                if (counts[fw]["runs"] >= MIN_FRAMEWORK_RUNS and counts[fw]["workloads"] >= MIN_FRAMEWORK_WORKLOADS)
                or (2 * counts[fw]["workloads"] >= most_workloads and 10 * counts[fw]["runs"] >= most_runs)]

    def model_measured(self, model: str | None) -> bool:
        """Whether the knowledge base trained model preset ``model`` (None: unknown, taken as yes)."""
        return model is None or any(w.get("model") == model for w in self.workloads_)

    def _of_model(self, model: str | None) -> np.ndarray:
        """Which measured workloads speak for ``model``: its own where it was measured, else
        (a model never measured, or none given) all of them."""
        same = np.array([w.get("model") == model for w in self.workloads_], dtype=bool)
        return same if model is not None and same.any() else np.ones(len(self.workloads_), dtype=bool)

    def _check_fitted(self) -> None:
        if not hasattr(self, "encoder_"):
            raise NotFittedError(
                "This PerformanceModel instance is not fitted yet. Call 'fit' with records first."
            )

    def predict(self, rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        """Per row: ``accuracy``, ``train_time_s``, ``peak_rss_mb`` and their ``_low`` / ``_high``."""
        self._check_fitted()
        unknown = {r["config"]["framework"] for r in rows} - set(self.encoder_.frameworks_)
        if unknown:
            raise ParameterError(
                f"The 'framework' parameter must be one the knowledge base has measured "
                f"({', '.join(self.encoder_.frameworks_)}). Got {sorted(unknown)} instead."
            )
        X = self.encoder_.transform(rows)
        out: dict[str, np.ndarray] = {}
        for key, est in (("accuracy", self.accuracy_), ("train_time_s", self.train_time_),
                         ("peak_rss_mb", self.memory_)):
            point, low, high = est.predict_interval(X)
            out[key], out[f"{key}_low"], out[f"{key}_high"] = point, low, high
        if self.machine_speed_ or self.machine_memory_ or self.machine_time_ or self.machine_now_:
            keys: dict[int, str] = {}  # candidates share one hardware dict: one key each
            for r in rows:
                if id(r["hardware"]) not in keys:
                    keys[id(r["hardware"])] = self.machine_of(r["hardware"])
            machines = [keys[id(r["hardware"])] for r in rows]
            frameworks = [r["config"]["framework"] for r in rows]
            models = [r["meta"].get("model") for r in rows]
            threads = [intra_threads(r["config"], r["hardware"]) for r in rows]
            self._machine_times(X, machines, frameworks, models, threads, out["train_time_s"],
                                out["train_time_s_low"], out["train_time_s_high"])
            # Memory: what the machine's own runs scatter around their factor. Time on a
            # calibrated knowledge-base machine: how fast it runs now, and its runs' scatter
            # (for a shipped calibration, the way to the other speed too).
            for metric, factors in (("peak_rss_mb", self.machine_memory_), ("train_time_s", self.machine_now_)):
                if factors:
                    factor = _factors(factors, machines, frameworks, models, threads)
                    widen = np.exp([factors[m].get(f"~{fw}", factors[m].get("~", 0.0)) if m in factors else 0.0
                                    for m, fw in zip(machines, frameworks, strict=True)])
                    out[metric] = out[metric] * factor
                    out[f"{metric}_low"] = out[f"{metric}_low"] * factor / widen
                    out[f"{metric}_high"] = out[f"{metric}_high"] * factor * widen
        return out

    def nearest_workloads(self, meta: dict[str, Any], k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` measured workloads most like ``meta``, with their standardized distance: of
        its model (``meta["model"]``) where the knowledge base trained it, else of any."""
        self._check_fitted()
        dist = self._distances(workload_vector(meta)[_NOVELTY_IDX], model=meta.get("model"))
        order = [i for i in np.argsort(dist)[:k] if np.isfinite(dist[i])]
        return [(self.workloads_[i]["name"], round(float(dist[i]), 3)) for i in order]

    def data_size_ratio(self, meta: dict[str, Any]) -> tuple[float, float, float] | None:
        """How many times the largest measured data set ``meta``'s is (training and test samples
        x input values), with both sizes; None where either is unknown."""
        self._check_fitted()
        size = _data_values(meta)
        measured = [v for w in self.workloads_ if (v := _data_values(w["meta"]))]
        if not size or not measured:
            return None
        return size / max(measured), size, max(measured)

    def _data_size_reason(self, meta: dict[str, Any]) -> tuple[float, str] | None:
        ratio = self.data_size_ratio(meta)
        if ratio is None or ratio[0] <= DATA_SIZE_OOD:
            return None
        return ratio[0], (f"the data set is {ratio[0]:.3g}x the largest measured ({ratio[1]:,.0f} training "
                          f"and test input values against {ratio[2]:,.0f}): training time and memory are "
                          f"extrapolated by their cost models")

    def _unlike(self, meta: dict[str, Any], k: int) -> tuple[list[tuple[str, float]], bool, float]:
        """The ``k`` nearest workloads of ``meta``, whether its model was never measured, and how
        many times wider its intervals get for the workload (1.0: like the measured ones): ``1 +
        d / t`` beyond the threshold ``t``, ``1 + max(d, t) / t`` for a model never measured."""
        nearest = self.nearest_workloads(meta, k=k)
        new_model = not self.model_measured(meta.get("model"))
        if not nearest or not (new_model or nearest[0][1] > self.ood_threshold_):
            return nearest, new_model, 1.0
        return nearest, new_model, 1.0 + max(nearest[0][1], self.ood_threshold_ if new_model else 0.0) / self.ood_threshold_

    def consensus_accuracy_band(self, rows: Sequence[dict[str, Any]],
                                meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the ends of its configuration's accuracy interval averaged over the measured
        workloads of ``meta``'s model (over all of them, for a model never measured or not
        given): ``(low, high)``, the accuracy each configuration is predicted to reach at least,
        and at most, across them, whatever the workload asked about.

        The accuracy interval's trees see neither the framework nor the hardware, so rows that
        differ only there share one prediction per workload: each distinct one is predicted once. The ends
        are the quantile ensembles' (``predict_band``): ``predict`` also stretches an interval
        to hold its point, where the point falls outside, and the point costs most (its order
        model ranks every workload's rows: 6 s for 18 workloads' 1,456 candidates).
        """
        self._check_fitted()
        # The columns the interval's quantile ensembles split on.
        seen = self.accuracy_._band_X(self.encoder_.transform(rows))
        _, first, inverse = np.unique(seen, axis=0, return_index=True, return_inverse=True)
        others = [w for w, keep in zip(self.workloads_, self._of_model(meta.get("model")), strict=True) if keep]
        swapped = [dict(rows[i], meta=w["meta"]) for w in others for i in first]
        band = self.accuracy_.predict_band(self.encoder_.transform(swapped))
        low, high = (end.reshape(len(others), len(first)).mean(axis=0)[inverse.ravel()] for end in band)
        return low, high

    def ranking_accuracy(self, rows: Sequence[dict[str, Any]], meta: dict[str, Any], low: np.ndarray
                         ) -> tuple[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None]:
        """What the picks rank ``rows`` by, the share of it that is ``low`` (the low ends as
        learnt for ``meta``), and the consensus band it was mixed with (None where it was not).

        Where ``meta`` is like the measured workloads of its model, ``low`` itself (share 1).
        Where it is unlike them (:meth:`novelty`), its own low ends are an extrapolation: they
        are mixed with the consensus of the measured workloads of its model
        (:meth:`consensus_accuracy_band`'s low ends), ``low`` weighing ``1 / u``, with ``u`` the
        factor its intervals are widened by for the workload (``1 + d / t``). Leave-one-workload-out on the
        shipped knowledge base, the one held-out workload flagged out of distribution (the
        1,500-sample 8x8x1 cifar_quick, ``u`` 2.11) had its pick measure 30.7 points below its
        best run, 11.7 with the consensus (docs/recommendation.md, Validation). The band is
        what :meth:`widen` stretches such a workload's accuracy intervals to reach.
        """
        _, _, unlike = self._unlike(meta, k=1)
        if unlike <= 1.0:
            return low, 1.0, None
        share = 1.0 / unlike
        band = self.consensus_accuracy_band(rows, meta)
        return share * low + (1.0 - share) * band[0], share, band

    def novelty(self, meta: dict[str, Any], hardware: dict[str, Any]) -> tuple[bool, list[str], list[tuple[str, float]]]:
        """Whether a workload / hardware lies outside the knowledge base: (flag, reasons, nearest)."""
        nearest, new_model, unlike = self._unlike(meta, k=3)
        reasons = []
        if new_model:
            measured = sorted({str(w.get("model")) for w in self.workloads_})
            reasons.append(f"model {meta['model']!r} was never measured (measured: {', '.join(measured)}): "
                           "its accuracy is predicted from other models' runs")
        elif unlike > 1.0:
            reasons.append(
                f"workload is unlike every measured one of its model (distance {nearest[0][1]:.2f} to "
                f"{nearest[0][0]}; measured workloads lie within {self.ood_threshold_:.2f} of the "
                "nearest other of their model)"
            )
        larger = self._data_size_reason(meta)
        if larger:
            reasons.append(larger[1])
        reasons.extend(self._hardware_reasons(hardware))
        return bool(reasons), reasons, nearest

    def widen(self, pred: dict[str, np.ndarray], meta: dict[str, Any], hardware: dict[str, Any],
              consensus: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], list[str]]:
        """``pred``'s intervals widened for how far ``meta`` / ``hardware`` lie from the
        knowledge base, with a note per widening (none when both are like what was measured).

        The intervals were calibrated on measured workloads and hardware; outside them they
        would claim a confidence the data cannot give. A workload at distance ``d`` (from the
        nearest measured workload of its model) beyond the out-of-distribution threshold ``t``
        gets every interval's width multiplied by ``1 + d / t``, a model never measured by
        ``1 + max(d, t) / t``; a data set ``r`` > :data:`DATA_SIZE_OOD` times the largest measured gets
        the training-time and memory intervals' widths (in log space) multiplied by
        ``1 + ln(r)`` instead where that is more (their cost models extrapolate in size, with
        coefficients fitted on smaller data sets); hardware unlike the measured gets the training-time interval widened by
        a factor :data:`HARDWARE_TIME_FACTOR` each way per reason (another CPU, core count or a
        GPU can change throughput several-fold, and no measurement says in which direction)
        and the memory interval by :data:`HARDWARE_MEMORY_FACTOR` per reason (more cores run
        more threads, each with its buffers; a GPU machine's CUDA build of a framework maps
        more libraries). For an unlike workload, ``consensus`` (the band
        :meth:`ranking_accuracy` returns) stretches each accuracy interval further to reach it:
        its own stretched interval stays around its own extrapolated point, while the picks rank
        by the consensus too (the new 200-sample 8x8x1 LeNet at difficulty 0.9: its own interval
        reached 25.9-31.3 %, its pick measured 29.0-35.2 % in 4 runs, 3 of them above). Accuracy
        does not depend on the hardware. (Thread counts beyond the
        measured: :meth:`hedge_threads`.) Always, without a note: the memory interval's high end
        reaches at least :data:`INSTALLATION_MEMORY_FACTOR` times its point, for the user's
        installation of the frameworks, whose mapped library pages differ from the knowledge
        base's.
        """
        self._check_fitted()
        out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in pred.items()}
        notes = []
        _, new_model, unlike = self._unlike(meta, k=1)
        if unlike > 1.0:
            for key, log_space in (("accuracy", False), ("train_time_s", True), ("peak_rss_mb", True)):
                _stretch(out, key, unlike, log_space)
            out["accuracy_low"] = np.clip(out["accuracy_low"], 0.0, 1.0)
            out["accuracy_high"] = np.clip(out["accuracy_high"], 0.0, 1.0)
            notes.append(f"intervals {unlike:.1f}x wider: " + ("its model was never measured" if new_model
                                                              else "the workload is unlike every measured one of its model"))
            if consensus is not None:
                out["accuracy_low"] = np.minimum(out["accuracy_low"], consensus[0])
                out["accuracy_high"] = np.maximum(out["accuracy_high"], consensus[1])
                notes.append("accuracy intervals reach the configuration's interval averaged over the measured "
                             + ("workloads" if new_model else "workloads of its model"))
        larger = self._data_size_reason(meta)
        # The distance counts the data's size too: a data set both larger and unlike gets the
        # larger of the two stretches, not their product.
        if larger and 1.0 + math.log(larger[0]) > unlike:
            stretch = (1.0 + math.log(larger[0])) / unlike
            for key in ("train_time_s", "peak_rss_mb"):
                _stretch(out, key, stretch, True)
            notes.append(f"training-time and memory intervals {unlike * stretch:.1f}x wider: the data "
                         f"set is {larger[0]:.3g}x the largest measured")
        # Another installation of the same frameworks (the user's): its mapped library pages.
        out["peak_rss_mb_high"] = np.maximum(out["peak_rss_mb_high"],
                                             out["peak_rss_mb"] * INSTALLATION_MEMORY_FACTOR)
        hardware_reasons = len(self._hardware_reasons(hardware))
        if hardware_reasons:
            factor = HARDWARE_TIME_FACTOR ** hardware_reasons
            memory = HARDWARE_MEMORY_FACTOR ** hardware_reasons
            out["train_time_s_low"] = out["train_time_s_low"] / factor
            out["train_time_s_high"] = out["train_time_s_high"] * factor
            out["peak_rss_mb_low"] = out["peak_rss_mb_low"] / memory
            out["peak_rss_mb_high"] = out["peak_rss_mb_high"] * memory
            notes.append(f"training-time interval {factor:g}x wider each way and memory "
                         f"{memory:.3g}x: the hardware is unlike the measured")
        return out, notes

    def threads_top(self, hardware: dict[str, Any]) -> int | None:
        """The most intra-op threads measured on ``hardware``'s machine (its own runs where it
        has some, else any run), or None where its core count is flagged already."""
        self._check_fitted()
        top = self.threads_measured_.get(self.machine_of(hardware), self.threads_measured_.get("*"))
        return None if top is None or self._cores_outside(hardware) else int(top)

    def threads_reason(self, threads: int, hardware: dict[str, Any]) -> str | None:
        """Why ``threads`` intra-op threads on ``hardware`` lie beyond the measured, or None
        (see :meth:`hedge_threads`)."""
        top = self.threads_top(hardware)
        if top is None or threads <= top:
            return None
        return (f"{threads} threads is beyond the {top} this machine's runs used at most: its "
                f"training time lies between the {top}-thread prediction and the cost model's "
                f"extrapolation (`dltune bench --threads {threads}` measures it)")

    def hedge_threads(self, pred: dict[str, np.ndarray], rows: Sequence[dict[str, Any]],
                      hardware: dict[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
        """Training times of ``rows`` with more threads than ``hardware``'s machine was measured
        at, hedged between what those threads can gain: nothing, or what the cost model says.

        The cost model learns how time falls with threads from the thread counts the runs used
        (1 and 2 for the knowledge base and ``dltune kb calibrate`` on 2 cores) and extrapolates
        beyond. (A machine calibrated on more cores ran all of them too: its times there are
        scaled by what they gained, :func:`thread_delta`, and not hedged.)
        On a 16-core Xeon (2026-12-04, digits LeNet, calibrated at 1 and 2 threads) it
        predicted 4 / 8 / 16 threads 1.2 / 1.4 / 1.5x too fast; no gain beyond 2 threads
        would have been 1.2 / 1.3 / 1.4x too slow. Such a row's point becomes the geometric
        middle of the two predictions (the same configuration at the measured threads, and
        the extrapolation) and its interval reaches both intervals' far ends. Its memory and
        accuracy are left as predicted. Returns the new predictions and a note (none when no
        row lies beyond).
        """
        top = self.threads_top(hardware)
        threads = [intra_threads(r["config"], r["hardware"]) for r in rows]
        beyond = np.array([top is not None and n is not None and n > top for n in threads], dtype=bool)
        if not beyond.any():
            return pred, []
        at_top = self.predict([
            dict(rows[i], hardware=dict(rows[i]["hardware"], usable_cores=hardware.get("usable_cores")),
                 config=dict(rows[i]["config"], threads={"intra_op": top, "inter_op": 1, "blas": top,
                                                         "cores": None}))
            for i in np.flatnonzero(beyond)])
        out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in pred.items()}
        ext = {k: out[f"train_time_s{k}"][beyond] for k in ("", "_low", "_high")}
        out["train_time_s"][beyond] = np.sqrt(ext[""] * at_top["train_time_s"])
        out["train_time_s_low"][beyond] = np.minimum(ext["_low"], at_top["train_time_s_low"])
        out["train_time_s_high"][beyond] = np.maximum(ext["_high"], at_top["train_time_s_high"])
        return out, [f"training time of {int(beyond.sum())} configurations with more than {top} "
                     f"threads: between the {top}-thread prediction and the extrapolation"]

    def hedge_machines(self, pred: dict[str, np.ndarray], rows: Sequence[dict[str, Any]],
                       hardware: dict[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
        """Training times and memory of ``rows`` on ``hardware`` spanned over every measured
        machine it may be (:meth:`machines_alike`), where there are two or more: the point is
        their geometric mean, the interval reaches all of theirs. Two VMs that both report
        "AMD EPYC" with AVX-512 ran the same runs 1.47x apart, told apart only by the kernels
        OpenBLAS picked (:func:`blas_kernels`); a description that names none, or names kernels
        never measured, cannot say which of them it is. Returns the predictions and a note
        (none where the machine is measured, or only one is alike)."""
        alike = self.machines_alike(hardware)
        if len(alike) < 2:
            return pred, []
        kernels = {machine_key(h): h.get("blas_kernels") for h in self.hardware_}
        spans = []
        for m in alike:
            as_m: dict[int, dict[str, Any]] = {}  # rows share their hardware dicts: one copy each
            spans.append(self.predict([dict(r, hardware=as_m.setdefault(
                id(r["hardware"]), dict(r["hardware"], blas=[], blas_kernels=kernels[m]))) for r in rows]))
        out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in pred.items()}
        for key in ("train_time_s", "peak_rss_mb"):
            out[key] = np.exp(np.mean([np.log(p[key]) for p in spans], axis=0))
            out[f"{key}_low"] = np.min([p[f"{key}_low"] for p in spans], axis=0)
            out[f"{key}_high"] = np.max([p[f"{key}_high"] for p in spans], axis=0)
        named = blas_kernels(hardware)
        why = (f"its BLAS kernels ({named}) were never measured" if named else
               "the description names no BLAS kernels (`dltune hardware --json` on that machine lists them)")
        return out, [f"training time and memory span the {len(alike)} measured machines of this CPU "
                     f"(their BLAS kernels: {', '.join(kernels[m] or 'none' for m in alike)}): {why}"]

    def _cores_outside(self, hardware: dict[str, Any]) -> str | None:
        cores = [h["usable_cores"] for h in self.hardware_ if h.get("usable_cores")]
        usable = hardware.get("usable_cores", hardware.get("logical_cores"))
        if cores and usable is not None and not (min(cores) <= usable <= max(cores)):
            return f"{usable} usable cores is outside the measured {min(cores)}..{max(cores)}"
        return None

    def _hardware_reasons(self, hardware: dict[str, Any]) -> list[str]:
        calibrated = set(self.calibrated_machines())
        measured = [h for h in self.hardware_ if machine_key(h) in calibrated]
        models = sorted({cpu_identity(h) for h in measured})
        reasons = []
        if cpu_identity(hardware) not in models:
            same_name = any(str(h["cpu_model"]) == str(hardware.get("cpu_model")) for h in measured)
            hint = ("; the description gives no cpu_flags, and the same model string differs in "
                    "speed by instruction set: `dltune hardware --json` on that machine lists them"
                    if same_name and not hardware.get("cpu_flags") else "")
            reasons.append(f"CPU {cpu_identity(hardware)!r} was never measured (measured: {', '.join(models)}; "
                           f"`dltune kb calibrate` measures this machine in a few minutes{hint})")
        cores = self._cores_outside(hardware)
        if cores:
            reasons.append(cores)
        if len(hardware.get("gpus") or ()) and not any(h["gpus"] for h in self.hardware_):
            reasons.append("the knowledge base has no GPU measurements")
        vec = hardware_vector(hardware)
        mems = [h["memory_gb"] for h in self.hardware_ if h.get("memory_gb")]
        if mems and math.isfinite(vec[2]) and not (0.5 * min(mems) <= math.exp(vec[2]) <= 2 * max(mems)):
            reasons.append(f"{math.exp(vec[2]):.0f} GB memory is far from the measured {min(mems):.0f}..{max(mems):.0f} GB")
        return reasons

    def _fit_measured(self, data: list[dict[str, Any]]) -> None:
        """Each workload's measured configurations: their mean accuracy over distinct seeds (a
        run measured again with its seed, e.g. by ``dltune kb calibrate``, counts once), and
        the workload's seed noise (the scale of :class:`~dltune.measure._noise.SeedNoise`) where
        it has :data:`MIN_NOISE_PAIRS` repeat pairs that tell, at least one test sample's worth
        of accuracy (1 / n_test)."""
        by_workload: dict[str, dict[str, dict[str, Any]]] = {}
        n_test: dict[str, float] = {}
        for d in data:
            w = d["workload"]
            key = workload_key(w.get("fingerprint"), w.get("model") or w["meta"].get("model"))
            n_test[key] = float(w["meta"].get("n_test") or 0)
            entry = by_workload.setdefault(key, {}).setdefault(measured_key(d["config"]), {
                "config": {k: v for k, v in d["config"].items() if k not in ("seed", "threads", "timeout_s")},
                "seeds": {}})
            entry["seeds"].setdefault(str(d["config"].get("seed")), float(d["metrics"]["test_accuracy"]))
        self.measured_: dict[str, dict[str, Any]] = {}
        for key, configs in by_workload.items():
            floor = 1.0 / n_test[key] if n_test[key] > 0 else 0.0
            pairs = [a[:2] for c in configs.values() if len(a := list(c["seeds"].values())) >= 2]
            self.measured_[key] = {"sigma": noise_scale(pairs, floor), "floor": floor, "configs": [
                {"config": c["config"], "accuracy": float(np.mean(list(c["seeds"].values()))),
                 "runs": len(c["seeds"])} for c in configs.values()]}
        sigmas = [m["sigma"] for m in self.measured_.values() if m["sigma"] is not None]
        # Without repeats anywhere: 0.06 sqrt(p (1 - p)), about the median of the shipped ones (0.063).
        self.measured_sigma_ = float(np.median(sigmas)) if sigmas else 0.06

    def measured_runs(self, fingerprint: str | None, model: str | None) -> tuple[list[dict[str, Any]], SeedNoise]:
        """The configurations measured on a workload (its data set's fingerprint and model):
        each ``{"config", "accuracy", "runs"}`` (the mean accuracy over ``runs`` distinct
        seeds), and the seed noise of one run (:class:`SeedNoise`: the workload's own scale
        where it has enough repeat pairs, else that of its nearest measured workloads,
        :meth:`_nearest_sigma`)."""
        self._check_fitted()
        entry = self.measured_.get(workload_key(fingerprint, model))
        if not entry:
            return [], SeedNoise(self.measured_sigma_, 0.0)
        if isinstance(entry["configs"], bytes):  # as loaded: each workload's parsed when asked for
            entry["configs"] = json.loads(entry["configs"].decode())
        scale = entry["sigma"] if entry["sigma"] is not None else self._nearest_sigma(fingerprint, model)
        return entry["configs"], SeedNoise(scale, entry["floor"])

    def has_own_seed_noise(self, fingerprint: str | None, model: str | None) -> bool:
        """Whether the workload's seed noise (:meth:`measured_runs`) is its own: it has at least
        :data:`MIN_NOISE_PAIRS` configurations measured with two seeds whose mean is more than
        a test sample from 0 and 100 % (:func:`~dltune.measure._noise.noise_scale`)."""
        self._check_fitted()
        entry = self.measured_.get(workload_key(fingerprint, model))
        return bool(entry) and entry["sigma"] is not None

    def _nearest_sigma(self, fingerprint: str | None, model: str | None) -> float:
        """The seed noise of a workload without repeats of its own: the median of its
        :data:`NOISE_NEIGHBOURS` nearest measured workloads' of its model that have them (as
        :meth:`nearest` measures), else of all that have them."""
        index = next((i for i, w in enumerate(self.workloads_)
                      if w.get("fingerprint") == fingerprint and w.get("model") == model), None)
        if index is None:
            return self.measured_sigma_
        sigmas = np.array([(self.measured_.get(workload_key(w.get("fingerprint"), w.get("model"))) or {}).get("sigma")
                           for w in self.workloads_], dtype=float)
        dist = self._distances(workload_vector(self.workloads_[index]["meta"])[_NOVELTY_IDX], skip=index, model=model)
        known = np.flatnonzero(np.isfinite(dist) & np.isfinite(sigmas))
        if not len(known):
            return self.measured_sigma_
        nearest = known[np.argsort(dist[known], kind="stable")[:NOISE_NEIGHBOURS]]
        return float(np.median(sigmas[nearest]))

    def measured_interval(self, accuracy: np.ndarray, runs: np.ndarray, noise: SeedNoise | float) -> tuple[np.ndarray, np.ndarray]:
        """The interval (at the model's ``coverage``) of one more run of a configuration whose
        ``runs`` runs measured ``accuracy`` on average, given seed noise ``noise`` per run (a
        :class:`SeedNoise`, or one sigma for every accuracy)."""
        from statistics import NormalDist

        accuracy = np.asarray(accuracy, dtype=float)
        sigma = noise.at(accuracy) if isinstance(noise, SeedNoise) else float(noise)
        half = NormalDist().inv_cdf(0.5 + self.coverage / 2) * sigma * np.sqrt(1.0 + 1.0 / np.asarray(runs, dtype=float))
        return np.clip(accuracy - half, 0.0, 1.0), np.clip(accuracy + half, 0.0, 1.0)

    def workload_meta(self, fingerprint: str) -> dict[str, Any] | None:
        """The meta-features recorded for a measured data set (saves recomputing landmarks)."""
        self._check_fitted()
        for w in self.workloads_:
            if w["fingerprint"] == fingerprint:
                return dict(w["meta"])
        return None

    def _named_workload(self, dataset: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
        self._check_fitted()
        return next((w for w in self.workloads_ if w.get("dataset") == dataset
                     and (w.get("dataset_params") or {}) == (params or {})), None)

    def named_dataset_fingerprint(self, dataset: str, params: dict[str, Any] | None = None) -> str | None:
        """The fingerprint of data set ``dataset`` loaded with ``params``, if measured."""
        w = self._named_workload(dataset, params)
        return None if w is None else w.get("fingerprint")

    def named_dataset_meta(self, dataset: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The meta-features recorded for data set ``dataset`` loaded with ``params``, if measured."""
        w = self._named_workload(dataset, params)
        return None if w is None else dict(w["meta"])

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
            # (all 50 of the shipped knowledge base in one JSON took 48 ms to parse).
            "measured": {k: {"sigma": m["sigma"], "floor": m["floor"]} for k, m in self.measured_.items()},
            "measured_sigma": self.measured_sigma_,
            "workload_center": self.workload_center_.tolist(), "ood_threshold": self.ood_threshold_,
            "hardware": self.hardware_, "config_ranges": self.config_ranges_,
            "frameworks": self.frameworks_, "framework_runs": self.framework_runs_,
            "n_records": self.n_records_,
            "n_memory_records": self.n_memory_records_,
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
        tmp = path.with_name(path.name + ".tmp.npz")
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
            model.accuracy_, model.train_time_, model.memory_ = model._estimators(model.encoder_)
            model.accuracy_.load_arrays(arrays, "acc.")
            model.train_time_.load_arrays(arrays, "time.")
            model.memory_.load_arrays(arrays, "mem.")
            model.machine_time_, model.machine_time_info_ = {}, {}
            for i, info in enumerate(state["machine_time"]):
                info = dict(info)
                machine = info.pop("machine")
                model.machine_time_[machine] = model._estimators(model.encoder_)[1].load_arrays(
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

    def get_params(self, deep: bool = True) -> dict[str, Any]:  # noqa: ARG002
        return {"coverage": self.coverage, "max_iter": self.max_iter,
                "time_residual_iter": self.time_residual_iter, "calibrate": self.calibrate,
                "random_state": self.random_state, "machine_workloads": self.machine_workloads,
                "transfer": self.transfer, "n_jobs": self.n_jobs}
