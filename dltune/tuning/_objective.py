"""One trial: sample a configuration, measure it in a worker, record everything on the trial."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dltune._errors import ParameterError
from dltune.config import (  # check_constraints: re-exported, the rule recommend follows too
    CONSTRAINTS,
    TrainConfig,
    check_constraints,
    check_objective,
)
from dltune.measure import Measurement
from dltune.measure._codec import decode_record, set_record
from dltune.tuning._space import SearchSpace

__all__ = ["TUNE_CONSTRAINTS", "TUNE_OBJECTIVES", "Objective", "TrialRunner", "check_constraints",
           "check_objectives", "record_from_trial"]

# What tune optimises (recommend's objectives differ: dltune.recommend.RECOMMEND_OBJECTIVES).
# objective name -> (metric in Measurement.metrics, direction, label for the dashboard)
TUNE_OBJECTIVES: dict[str, tuple[str, str, str]] = {
    "accuracy": ("test_accuracy", "maximize", "test accuracy"),
    "train_time": ("train_time_s", "minimize", "training time (s)"),
    "peak_memory": ("peak_rss_mb", "minimize", "peak memory (MB)"),
}
_ALIASES = {"time": "train_time", "memory": "peak_memory"}

# Each constraint key of dltune.config.CONSTRAINTS (recommend's too) -> (metric, sign):
# feasible when sign * (metric - bound) <= 0.
_BOUNDED_METRIC = {"max_train_time_s": ("train_time_s", 1), "max_memory_mb": ("peak_rss_mb", 1),
                   "min_accuracy": ("test_accuracy", -1)}
TUNE_CONSTRAINTS: dict[str, tuple[str, int]] = {key: _BOUNDED_METRIC[key] for key in CONSTRAINTS}


@dataclass(frozen=True)
class Objective:
    name: str
    metric: str
    direction: str
    label: str


def check_objectives(objectives: str | Sequence[str]) -> list[Objective]:
    """Objective names -> :class:`Objective` list; ``balanced`` means accuracy and training
    time, an old name (``both``) is refused with a pointer (:func:`dltune.config.check_objective`)."""
    if isinstance(objectives, str):
        if objectives not in TUNE_OBJECTIVES and objectives not in _ALIASES:
            check_objective(objectives)  # 'balanced', else refused (an old name with a pointer)
        objectives = ["accuracy", "train_time"] if objectives == "balanced" else [objectives]
    names = [_ALIASES.get(o, o) for o in objectives]
    if not names or len(set(names)) != len(names) or any(n not in TUNE_OBJECTIVES for n in names):
        raise ParameterError(
            "The 'objective' parameter must be 'balanced' or distinct names from "
            f"{{{', '.join(TUNE_OBJECTIVES)}}}. Got {list(objectives)!r} instead."
        )
    return [Objective(n, *TUNE_OBJECTIVES[n]) for n in names]


def constraint_values(metrics: Mapping[str, Any], constraints: Mapping[str, float]) -> list[float]:
    """Optuna's constraint values (<= 0 is feasible) for a run's metrics."""
    values = []
    for name, bound in constraints.items():
        metric, sign = TUNE_CONSTRAINTS[name]
        value = metrics.get(metric)
        values.append(float("inf") if value is None else sign * (float(value) - bound))
    return values


def record_from_trial(trial: Any) -> Measurement | None:
    """The :class:`Measurement` a trial stored, or None (a trial from before it finished)."""
    return decode_record(trial.user_attrs)


def _measured_before(trial: Any, config: Mapping[str, Any], env: Mapping[str, str],
                     phase: str) -> Any | None:
    """The study's COMPLETE trial of ``phase`` that ran this configuration and start-up
    environment, or None. A seeded sampler rebuilt after a kill, an enqueued configuration or
    a small categorical space can propose one again; measuring it again adds no information."""
    from optuna.trial import TrialState

    def key(c: Any, e: Any) -> str:  # JSON, as the storage holds them (tuples become lists)
        return json.dumps([c, e or {}], sort_keys=True)

    wanted = key(config, env)
    for other in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        attrs = other.user_attrs
        if attrs.get("phase", phase) == phase and key(attrs.get("config"), attrs.get("startup_env")) == wanted:
            return other
    return None


@contextlib.contextmanager
def _startup_environment(env: Mapping[str, str]) -> Iterator[None]:
    """Set start-up knobs in this process's environment, which the worker inherits, then restore.

    The worker pool keys workers by their whole environment, so a knob value gets a worker
    started with it.
    """
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class TrialRunner:
    """Runs one Optuna trial as one real measurement.

    Returns ``(state, values)`` for ``study.tell``: COMPLETE with the objective values, PRUNED
    when the pruner stopped training or, untrained, when a COMPLETE trial of the study already
    measured the configuration (``duplicate_of`` names it), FAIL (reason in ``fail_reason``)
    when the run failed.
    """

    def __init__(
        self,
        workload: Any,
        framework: str,
        space: SearchSpace,
        base: TrainConfig,
        objectives: Sequence[Objective],
        constraints: Mapping[str, float] | None = None,
        *,
        prune: bool = False,
        storage: Any = None,
        pool: Any = None,
    ) -> None:
        self.workload = workload
        self.framework = framework
        # "torch+tensorflow": one study across frameworks, the framework a categorical parameter.
        self.frameworks = framework.split("+")
        self.space = space
        self.base = base.replace(framework=self.frameworks[0])
        self.objectives = list(objectives)
        self.constraints = dict(constraints or {})
        self.prune = prune and len(self.objectives) == 1 and self.objectives[0].name == "accuracy"
        self.storage = storage
        self.pool = pool
        # A space that still varies threads or start-up knobs is the joint search's.
        self.phase = "joint" if space.split()[1].dimensions else "hyper"

    def __call__(self, trial: Any) -> tuple[Any, list[float] | None]:
        from optuna.trial import TrialState

        from dltune._bench import measure

        framework, space = self.framework, self.space
        if len(self.frameworks) > 1:
            framework = trial.suggest_categorical("framework", self.frameworks)
            space = space.without_knobs(framework)
        values = space.sample(trial)
        config, env = space.to_config(values, self.base.replace(framework=framework))
        config.validate(max_cores=space.cores)
        trial.set_user_attr("framework", framework)
        trial.set_user_attr("phase", self.phase)
        trial.set_user_attr("config", config.to_dict())
        trial.set_user_attr("startup_env", env)
        earlier = _measured_before(trial, config.to_dict(), env, self.phase)
        if earlier is not None:
            # PRUNED, not COMPLETE with the earlier values: the study's COMPLETE trials stay
            # distinct measurements, so its target counts configurations, not replays.
            trial.set_user_attr("duplicate_of", earlier.number)
            trial.set_user_attr("prune_reason", f"the configuration of trial #{earlier.number} "
                                "(COMPLETE), not trained again")
            return TrialState.PRUNED, None

        # The worker waits for each epoch's answer: a curve point nothing prunes on is written
        # from a thread of its own, so that the run never waits for a database commit.
        curve, written = ThreadPoolExecutor(max_workers=1), []

        def on_epoch(message: dict[str, Any]) -> bool:
            step, accuracy = int(message["epoch"]) - 1, float(message["test_accuracy"])
            if len(self.objectives) == 1:
                if self.objectives[0].name != "accuracy":
                    return True
                if self.prune:
                    trial.report(accuracy, step)
                    return not trial.should_prune()
                written.append(curve.submit(trial.report, accuracy, step))
            elif self.storage is not None:
                # Trial.report refuses multi-objective studies; the storage keeps the curve
                # anyway so that the dashboard can draw it. Nothing prunes on it.
                written.append(curve.submit(self.storage.set_trial_intermediate_value,
                                            trial._trial_id, step, accuracy))
            return True

        # Test hook, as in dltune.benchmark: honoured only with DLTUNE_ENABLE_FAULTS=1.
        fault = trial.user_attrs.get("fault") if os.environ.get("DLTUNE_ENABLE_FAULTS") == "1" else None
        try:
            with _startup_environment(env):
                record = measure(self.workload, config, on_epoch=on_epoch, pool=self.pool, fault=fault)
        finally:
            curve.shutdown(wait=True)
        for done in written:
            done.result()  # a point that could not be written fails the trial, as inline
        set_record(trial, record)
        metrics = record.metrics
        trial.set_user_attr("status", record.status)
        if not record.ok:
            error = record.error or {}
            trial.set_user_attr("fail_reason", error.get("message", "unknown failure"))
            trial.set_user_attr("fail_kind", error.get("kind", "unknown"))
            return TrialState.FAIL, None
        for key in ("test_accuracy", "train_time_s", "test_time_s", "peak_rss_mb",
                    "cpu_percent_mean", "epochs_run"):
            if metrics.get(key) is not None:
                trial.set_user_attr(key, metrics[key])
        for name, value in zip(self.constraints, constraint_values(metrics, self.constraints), strict=True):
            trial.set_constraint(name, value)
        if metrics.get("stopped") == "pruned":
            return TrialState.PRUNED, None
        results = [metrics.get(o.metric) for o in self.objectives]
        if any(v is None or v != v for v in results):
            missing = [o.metric for o, v in zip(self.objectives, results, strict=True) if v is None or v != v]
            trial.set_user_attr("fail_reason", f"the run reported no value for {missing}")
            trial.set_user_attr("fail_kind", "no_metric")
            return TrialState.FAIL, None
        return TrialState.COMPLETE, [float(v) for v in results]
