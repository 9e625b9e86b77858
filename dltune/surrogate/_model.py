"""``PerformanceModel``: accuracy, training time and memory surrogates fitted on records together,
with the knowledge base's workloads and hardware kept for out-of-distribution checks.

The model is composed of one part per concern, each in a module of its own: machines
(``_machines``), their calibration (``_calibration``), out of distribution (``_novelty``), seed
noise (``_seed_noise``) and persistence (``_persist``). The parts share the fitted attributes
this class's ``fit`` sets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dltune._errors import NotFittedError, ParameterError
from dltune._validation import check_int
from dltune.backends._registry import BACKENDS
from dltune.surrogate._accuracy import AccuracyModel
from dltune.surrogate._calibration import (
    MIN_MACHINE_FRAMEWORK_RECORDS,
    MIN_MACHINE_RECORDS,
    MIN_MACHINE_WORKLOADS,
    CalibrationMixin,
)
from dltune.surrogate._features import (
    HARDWARE_FEATURES,
    WORKLOAD_FEATURES,
    FeatureEncoder,
    record_row,
    workload_vector,
)
from dltune.surrogate._machines import (
    MachinesMixin,
    _factors,
    blas_kernels,
    machine_key,
    reference_machine,
)
from dltune.surrogate._memory import (
    SIZE_INPUTS,
    MemoryModel,
    held_data_mb,
    process_floor,
    ungrounded_memory,
)
from dltune.surrogate._novelty import _NOVELTY_IDX, NoveltyMixin
from dltune.surrogate._persist import FORMAT_VERSION, PersistenceMixin
from dltune.surrogate._records import (
    display_name,
    intra_threads,
    is_calibration,
    is_probe,
    remeasured,
    usable_records,
    workload_label,
)
from dltune.surrogate._seed_noise import SeedNoiseMixin
from dltune.surrogate._split import MIN_FRESH_RECORDS, split_records
from dltune.surrogate._train_time import TrainTimeModel

# FORMAT_VERSION: the surrogate cache keys its fits by it (``_cache``).
__all__ = ["FORMAT_VERSION", "PerformanceModel"]

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
# interval's low end, to worse ones (docs/explanation/how-recommend-decides.md#the-surrogates).
_NOT_BANDS = ("log_step_per_sample",)
# Records from which ``PerformanceModel(n_jobs=None)`` fits the accuracy surrogate in a second
# process: starting it (a fresh interpreter importing numpy and scikit-learn) costs about what a
# fit on fewer records takes in all.
CHILD_FIT_MIN_RECORDS = 2000


class PerformanceModel(NoveltyMixin, MachinesMixin, CalibrationMixin, SeedNoiseMixin, PersistenceMixin):
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

    def _estimators(self, encoder: FeatureEncoder, fitting: bool = True):
        """The accuracy, training-time and memory surrogates for ``encoder``'s columns: the
        scikit-learn estimators to fit, or (not ``fitting``) their model classes, which a saved
        model loads into without importing scikit-learn."""
        if fitting:
            from dltune.surrogate._estimators import AccuracySurrogate as accuracy
            from dltune.surrogate._estimators import MemorySurrogate as memory
            from dltune.surrogate._estimators import TrainTimeSurrogate as train_time
        else:
            accuracy, train_time, memory = AccuracyModel, TrainTimeModel, MemoryModel
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
        return (accuracy(reference_columns=(names.index("landmark_logreg"),
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
                train_time(work_column=encoder.work_column, cost_columns=cost,
                                   group_columns=groups, subgroup_columns=subgroups,
                                   max_iter=self.time_residual_iter, tree_columns=speed_trees, **kw),
                memory(size_columns=tuple(names.index(n) for n in SIZE_INPUTS),
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
        calibration = [is_calibration(d) for d in data]
        # The quick calibration's probes (one epoch at one fixed rate) measure speed only.
        probes = [is_probe(d) for d in data]
        # Likewise a knowledge-base run in a new process measured again after its backend's
        # memory changed (FRESH_REVISIONS: the same configuration and seed as a fresh run on
        # record, measured for its memory): counted for accuracy, they would weigh those
        # configurations twice too, and moved a pick to a poor run (docs/explanation/how-recommend-decides.md#validation).
        again = remeasured(data)
        scored = [i for i, c in enumerate(calibration) if not c and not probes[i] and i not in again]
        scored = scored if len(scored) >= 4 else list(range(len(data)))
        accuracy = ([data[i]["metrics"]["test_accuracy"] for i in scored], [groups[i] for i in scored])
        child = self._start_accuracy_fit(X[scored], *accuracy)
        from threadpoolctl import threadpool_limits

        # One thread, as in the child (more spin beside it), so that the fit is the same to the
        # last bit in one process or two; on data this small it is no slower.
        with threadpool_limits(1):
            try:
                self._fit_rest(data, rows, X, groups, calibration, probes)
            except BaseException:
                if child is not None:
                    child.close()
                raise
            fitted = child.result(self.accuracy_) if child is not None else None
            if fitted is None:  # in one process, or the child failed: here
                self.accuracy_.fit(X[scored], *accuracy)
        self.n_records_ = len(data)
        import sklearn

        from dltune.hardware import Hardware
        from dltune.surrogate._machines import blas_kernels

        # Another scikit-learn can grow other trees from the same records; other BLAS kernels
        # round the time model's sums otherwise (the last digits).
        self.fitted_with_ = {"scikit-learn": sklearn.__version__, "numpy": np.__version__,
                             "blas_kernels": blas_kernels(Hardware.detect().to_dict())}
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
                  groups: list[str], calibration: list[bool], probes: list[bool]) -> None:
        """Everything but the accuracy surrogate: training time, memory, machines, references."""
        split = split_records(self.encoder_, data, rows, X, groups, calibration, probes)
        self._fit_estimators(split)
        self._fit_calibrated(split)

    def _fit_estimators(self, split: dict[str, Any]) -> None:
        """The training-time and memory estimators and the machines' factors against them,
        from the knowledge base's runs and the user's (not the calibrations')."""
        groups, machines, frameworks, models, threads, timed = (
            split[k] for k in ("groups", "machines", "frameworks", "models", "threads", "timed"))
        X, X_time, seconds, data = split["X"], split["X_time"], split["seconds"], split["data"]

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
        memory_rows = split["memory_rows"]
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

    def _fit_calibrated(self, split: dict[str, Any]) -> None:
        """What the calibrations teach (the machines' speeds now and their throughputs per layer
        kind), the memory left unmeasured, and the references: no estimator is fitted here, so
        that a quick calibration refits in seconds (:func:`~dltune.surrogate._split.with_probes`)."""
        data, X_time, seconds, machines, frameworks, models, threads = (
            split[k] for k in ("data", "X_time", "seconds", "machines", "frameworks", "models", "threads"))
        self._fit_machine_kinds(X_time, seconds, machines, frameworks, split["probed"], data)
        self._fit_machine_now(X_time, seconds, data, split["groups"], machines, frameworks, models, threads,
                              split["now"])
        learnt, as_now = set(split["memory_rows"]), set(split["current"])
        self.memory_ungrounded_ = ungrounded_memory(
            frameworks, models, [i in learnt for i in range(len(data))],
            [process_floor(data[i]) if i in as_now else None for i in range(len(data))])
        self._fit_references(data, split["probes"])

    def _fit_references(self, data: list[dict[str, Any]], probes: list[bool]) -> None:
        """What the fit saw: workloads, configurations and frameworks (not the probes' one
        epoch at one rate), and machines and thread counts (the probes' too)."""
        every, data = data, [d for d, p in zip(data, probes, strict=True) if not p] or data
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
        for d in every:
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
        for d in every:
            n = intra_threads(d["config"], d.get("hardware") or {})
            if n is not None:
                for key in (machine_key(d.get("hardware") or {}), "*"):
                    self.threads_measured_[key] = max(n, self.threads_measured_.get(key, 0))

    def predictable_frameworks(self, min_runs: int, min_workloads: int) -> list[str]:
        """The frameworks with enough runs for their training time to be predicted: ``min_runs``
        on ``min_workloads`` workloads (the decision's, ``RecommendPolicy.min_framework_runs``
        and ``min_framework_workloads``), or half the workloads and a tenth of the runs of the
        most measured framework.

        A framework's training times come from a cost model of about 16 terms per framework x
        model, which a few runs leave at zero, so that its every candidate would predict next
        to no time and win; a small knowledge base (a test's, or a user's ``--kb``) has fewer
        of everything, hence the share of the most measured framework's."""
        self._check_fitted()
        counts = self.framework_runs_
        most_runs = max(c["runs"] for c in counts.values())
        most_workloads = max(c["workloads"] for c in counts.values())
        return [fw for fw in self.frameworks_
                if (counts[fw]["runs"] >= min_runs and counts[fw]["workloads"] >= min_workloads)
                or (2 * counts[fw]["workloads"] >= most_workloads and 10 * counts[fw]["runs"] >= most_runs)]

    def memory_grounded(self, framework: str, model: str | None = None) -> bool:
        """Whether the memory surrogate learnt ``framework``'s peak memory (training ``model``)
        from enough runs of its own (in a new process, where the fit had enough of those).

        Else its predicted memory is no extrapolation from other frameworks' or models' runs:
        its point and low end are the least its process was measured to hold (or the data set
        it holds, if more), and its high end is infinite: unknown."""
        self._check_fitted()
        return self._memory_floor(framework, model) is None

    def _memory_floor(self, framework: str, model: str | None) -> float | None:
        ungrounded = self.memory_ungrounded_
        return ungrounded.get(framework, ungrounded.get(f"{framework}/{model}"))

    def _check_fitted(self) -> None:
        if not hasattr(self, "encoder_"):
            raise NotFittedError(
                "This PerformanceModel instance is not fitted yet. Call 'fit' with records first."
            )

    def predict(self, rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        """Per row: ``accuracy``, ``train_time_s``, ``peak_rss_mb`` and their ``_low`` / ``_high``
        (the memory of a framework not :meth:`memory_grounded`: its measured least, no high end).

        The surrogates predict row by row, but the accuracy points of one workload's rows are
        then reassigned within it by the order model, an explicit workload-level step
        (``AccuracySurrogate.rank_within_workloads``): a recommendation's candidates are ranked
        by it, so a row's accuracy depends on the rows of its workload predicted with it."""
        self._check_fitted()
        unknown = {r["config"]["framework"] for r in rows} - set(self.encoder_.frameworks_)
        if unknown:
            raise ParameterError(
                f"The 'framework' parameter must be one the knowledge base has measured "
                f"({', '.join(self.encoder_.frameworks_)}). Got {sorted(unknown)} instead."
            )
        X = self.encoder_.transform(rows)
        out: dict[str, np.ndarray] = {}
        for key, predict_interval in (("accuracy", self.accuracy_.predict_interval_within_workloads),
                                      ("train_time_s", self.train_time_.predict_interval),
                                      ("peak_rss_mb", self.memory_.predict_interval)):
            out[key], out[f"{key}_low"], out[f"{key}_high"] = predict_interval(X)
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
        floors = np.array([self._memory_floor(r["config"]["framework"], r["meta"].get("model"))
                           for r in rows], dtype=np.float64)  # grounded (None): nan
        unknown = ~np.isnan(floors)
        if unknown.any():
            # What was measured, not an extrapolation: the least the process held, or the data
            # set it holds (known) where more; no upper end, as no run bounds a new process's.
            low = np.maximum(np.nan_to_num(floors), held_data_mb(
                X, tuple(self.memory_.size_columns), tuple(self.memory_.layout_copy_columns)))
            for key, value in (("", low), ("_low", low), ("_high", np.inf)):
                out[f"peak_rss_mb{key}"] = np.where(unknown, value, out[f"peak_rss_mb{key}"])
        return out

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

    def get_params(self, deep: bool = True) -> dict[str, Any]:  # noqa: ARG002
        return {"coverage": self.coverage, "max_iter": self.max_iter,
                "time_residual_iter": self.time_residual_iter, "calibrate": self.calibrate,
                "random_state": self.random_state, "machine_workloads": self.machine_workloads,
                "transfer": self.transfer, "n_jobs": self.n_jobs}
