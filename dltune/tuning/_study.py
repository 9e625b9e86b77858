"""Studies: one per workload x framework x hardware target, with what a worker needs to join.

Everything a ``dltune worker`` on another machine needs to run trials of a study is stored in
the study's user attributes: the workload (data set name and parameters, model spec, data
fingerprint), the framework, the hardware target and its fingerprint, the search space (and
the thread phase's, with how many trials it tunes), the objectives, constraints, base
configuration, sampler and pruner names and the seed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune.config import TrainConfig
from dltune.tuning._objective import Objective, check_objectives
from dltune.tuning._space import SearchSpace

__all__ = ["StudySpec", "build_pruner", "build_sampler", "check_pruner", "check_sampler", "load_study_spec",
           "study_name"]

SAMPLERS = ("tpe", "random", "nsga2")
PRUNERS = ("median", "none")


def _workload_label(workload: Any) -> str:
    params = dict(getattr(workload.dataset, "params", {}) or {})
    label = workload.dataset.name
    if params:
        label += "[" + ",".join(f"{k}={params[k]}" for k in sorted(params)) + "]"
    return f"{label}-{workload.model.name}"


def study_name(workload: Any, framework: str, target: str, objectives: Sequence[Objective]) -> str:
    """``dltune:<data set>[params]-<model>:<framework>:<hardware target>[:<objectives>]``."""
    name = f"dltune:{_workload_label(workload)}:{framework}:{target}"
    names = [o.name for o in objectives]
    if names != ["accuracy", "train_time"]:
        name += ":" + "+".join(names)
    return name


def check_sampler(name: Any) -> Any:
    """``name`` if it is one of :data:`SAMPLERS` or an Optuna sampler; else a ``ParameterError``."""
    import optuna

    if isinstance(name, optuna.samplers.BaseSampler) or (isinstance(name, str) and name in SAMPLERS):
        return name
    raise ParameterError(
        f"The 'sampler' parameter must be one of {{{', '.join(SAMPLERS)}}} or an Optuna sampler. "
        f"Got {repr(name) if isinstance(name, str) else type(name).__name__} instead."
    )


def check_pruner(name: Any) -> Any:
    """``name`` if it is one of :data:`PRUNERS`, None or an Optuna pruner; else a ``ParameterError``."""
    import optuna

    if name is None or isinstance(name, optuna.pruners.BasePruner) or (isinstance(name, str) and name in PRUNERS):
        return name
    raise ParameterError(
        f"The 'pruner' parameter must be one of {{{', '.join(PRUNERS)}}}, None or an Optuna pruner. "
        f"Got {name!r} instead."
    )


def build_sampler(name: Any, seed: int | None) -> Any:
    """An Optuna sampler from a name (``tpe``, ``random``, ``nsga2``) or a sampler object.

    Constraints need no sampler argument: each trial records its values with
    ``Trial.set_constraint`` (Optuna 5), which TPE and NSGA-II read.
    """
    import optuna

    if not isinstance(check_sampler(name), str):
        return name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
        # Few trials: start modelling after 5 random ones instead of Optuna's 10.
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=5)


def build_pruner(name: Any, n_objectives: int) -> Any:
    """None means the median pruner for single-objective studies and none otherwise."""
    import optuna

    if name is None:
        name = "median" if n_objectives == 1 else "none"
    if not isinstance(check_pruner(name), str):
        return name
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
    return optuna.pruners.NopPruner()


@dataclass
class StudySpec:
    """What defines a study, as stored in its user attributes."""

    workload: Any
    framework: str
    hardware: Any
    space: SearchSpace
    objectives: list[Objective]
    constraints: dict[str, float]
    base: TrainConfig
    sampler: str
    pruner: str
    seed: int | None
    n_trials: int
    # The factorized search's thread phase (dltune.tuning._thread_phase): its space (empty for
    # the joint search; None in a study stored before it was recorded) and how many trials.
    thread_space: SearchSpace | None = None
    thread_configs: int = 0

    def attrs(self) -> dict[str, Any]:
        from dltune import __version__

        return {
            "dltune_version": __version__,
            "workload": {k: v for k, v in self.workload.to_record().items() if k != "meta"},
            "framework": self.framework,
            "hardware": self.hardware.to_dict(),
            "hardware_fingerprint": self.hardware.fingerprint,
            "hardware_target": self.hardware.target,
            "space": self.space.to_dict(),
            "space_cores": self.space.cores,
            "objectives": [o.name for o in self.objectives],
            "constraints": self.constraints,
            "base_config": self.base.to_dict(),
            "sampler": self.sampler,
            "pruner": self.pruner,
            "seed": self.seed,
            "n_trials": self.n_trials,
            "thread_space": None if self.thread_space is None else self.thread_space.to_dict(),
            "thread_configs": self.thread_configs,
        }


def create_or_load(storage: Any, name: str, spec: StudySpec, sampler: Any, pruner: Any) -> Any:
    """Create the study, or load it and check it is the same workload and hardware."""
    import optuna

    directions = [o.direction for o in spec.objectives]
    study = optuna.create_study(storage=storage, study_name=name, directions=directions,
                                sampler=sampler, pruner=pruner, load_if_exists=True)
    attrs = study.user_attrs
    new = spec.attrs()
    if attrs.get("workload") and attrs["workload"].get("fingerprint") != new["workload"]["fingerprint"]:
        raise DltuneError(
            f"Study {name!r} was created on different data (fingerprint "
            f"{attrs['workload'].get('fingerprint')} here {new['workload']['fingerprint']}); "
            "use another storage or delete the study."
        )
    if attrs.get("hardware_fingerprint") not in (None, new["hardware_fingerprint"]):
        raise DltuneError(
            f"Study {name!r} belongs to hardware {attrs['hardware_fingerprint']}, not this "
            f"machine's target {new['hardware_fingerprint']}; each hardware target has its own study."
        )
    if attrs.get("space") not in (None, new["space"]):
        warnings.warn(f"The search space of study {name!r} changed; new trials use the new one.",
                      UserWarning, stacklevel=3)
    for key, value in new.items():
        if attrs.get(key) != value:
            study.set_user_attr(key, value)
    if not attrs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.set_metric_names([o.label for o in spec.objectives])
    return study


def load_study_spec(study: Any, *, cores_check: bool = True) -> StudySpec:
    """Rebuild a study's :class:`StudySpec` from its attributes (what ``dltune worker`` does)."""
    from dltune._workload import Workload
    from dltune.data import load_dataset
    from dltune.hardware import Hardware
    from dltune.models import ModelSpec

    attrs = study.user_attrs
    if "workload" not in attrs or "framework" not in attrs:
        raise DltuneError(
            f"Study {study.study_name!r} was not created by dltune tune (it has no workload "
            "attributes); create it with 'dltune tune' first."
        )
    w = attrs["workload"]
    try:
        data = load_dataset(w["dataset"], **dict(w.get("dataset_params") or {}))
    except ParameterError as exc:
        raise DltuneError(
            f"Study {study.study_name!r}'s data set {w['dataset']!r} cannot be loaded here "
            f"({exc}); workers need a named data set (not in-memory arrays)."
        ) from None
    if data.fingerprint() != w["fingerprint"]:
        raise DltuneError(
            f"The data set {w['dataset']!r} loaded here differs from the study's "
            f"(fingerprint {data.fingerprint()} vs {w['fingerprint']})."
        )
    workload = Workload(data, ModelSpec.from_dict(w["model_spec"]))
    stored = Hardware.from_dict(attrs["hardware"])
    here = Hardware.detect(cores=stored.usable_cores if stored.usable_cores < _logical() else None)
    if cores_check and here.fingerprint != attrs["hardware_fingerprint"]:
        raise DltuneError(
            f"This machine's hardware target ({here.target}, {here.fingerprint}) is not study "
            f"{study.study_name!r}'s ({attrs['hardware_target']}, {attrs['hardware_fingerprint']}); "
            "a study measures one hardware target. Pass --any-hardware to join anyway."
        )
    return StudySpec(
        workload=workload,
        framework=attrs["framework"],
        hardware=here,
        space=SearchSpace(attrs["space"], cores=int(attrs["space_cores"]), defaults=False),
        objectives=check_objectives(attrs["objectives"]),
        constraints=dict(attrs.get("constraints") or {}),
        base=TrainConfig.from_dict(attrs["base_config"]),
        sampler=attrs.get("sampler", "tpe"),
        pruner=attrs.get("pruner", "none"),
        seed=attrs.get("seed"),
        n_trials=int(attrs.get("n_trials", 20)),
        thread_space=None if attrs.get("thread_space") is None else SearchSpace(
            attrs["thread_space"], cores=int(attrs["space_cores"]), defaults=False),
        thread_configs=int(attrs.get("thread_configs", 0)),
    )


def _logical() -> int:
    from dltune.config import usable_cores

    return usable_cores()


def counts(study: Any) -> dict[str, int]:
    """Trials per state name (``COMPLETE``, ``RUNNING``, ``FAIL``, ``PRUNED``, ``WAITING``)."""
    out: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        out[trial.state.name] = out.get(trial.state.name, 0) + 1
    return out
