"""``dltune.tune``: an Optuna search per workload x framework x hardware target that trains."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dltune._errors import ParameterError
from dltune._log import quiet_optuna
from dltune._validation import check_bool, check_float, check_int
from dltune.config import TrainConfig, usable_cores
from dltune.config._goals import refuse_renamed
from dltune.measure._storage import checked_storage_url
from dltune.tuning._objective import check_constraints, check_objectives
from dltune.tuning._result import StudyResult, TuneResult, study_result
from dltune.tuning._space import SearchSpace, as_space
from dltune.tuning._storage import mask_url, open_storage
from dltune.tuning._study import (
    StudySpec,
    build_pruner,
    build_sampler,
    check_pruner,
    check_sampler,
    create_or_load,
    study_name,
)
from dltune.tuning._study_measurements import _compare, _measure_preset, _repeat_best, preset_for
from dltune.tuning._thread_phase import check_search, run_thread_phase, search_spaces
from dltune.tuning._worker import _run_here, _run_workers, job_core_sets, prestart_worker

__all__ = ["tune"]


def _frameworks(frameworks: str | Iterable[str] | None) -> list[str]:
    from dltune._bench import interpreter_for
    from dltune.backends._registry import BACKENDS, default_framework_names

    if frameworks is None:
        frameworks = default_framework_names()
        if not frameworks:
            from dltune._errors import BackendUnavailableError

            raise BackendUnavailableError("No default framework (torch, tensorflow) is installed "
                                          "here: name the frameworks to tune.")
    names = [f.strip() for f in frameworks.split(",")] if isinstance(frameworks, str) else list(frameworks)
    if not names or len(set(names)) != len(names):
        raise ParameterError(
            f"The 'frameworks' parameter must name distinct backends. Got {names!r} instead."
        )
    for name in names:
        if name not in BACKENDS:
            raise ParameterError(
                f"The 'frameworks' parameter must hold names from {{{', '.join(BACKENDS)}}}. "
                f"Got {name!r} instead."
            )
        interpreter_for(name)
    return names


def _hardware(hardware: Any) -> Any:
    """This machine's target: None (all usable cores), an int (cores), or a Hardware / dict."""
    from dltune.hardware import Hardware

    if hardware is None:
        return Hardware.detect()
    if isinstance(hardware, int) and not isinstance(hardware, bool):
        return Hardware.detect(cores=hardware)
    described = hardware if isinstance(hardware, Hardware) else Hardware.from_dict(hardware)
    cores = described.usable_cores if described.usable_cores < usable_cores() else None
    here = Hardware.detect(cores=cores)
    if here.fingerprint != described.fingerprint:
        raise ParameterError(
            f"The 'hardware' parameter describes {described.target} ({described.fingerprint}), "
            f"but tune measures on this machine ({here.target}, {here.fingerprint}). Pass None, "
            "a core count, or this machine's Hardware."
        )
    return here


def _enqueue(study: Any, space: SearchSpace, configs: Iterable[Any],
             frameworks: Sequence[str] = ()) -> int:
    """Queue configurations as WAITING trials (sampled dimensions only); returns how many.

    A configuration's ``framework`` field is ignored (the study's framework trains it), except
    in a study across ``frameworks``, where it is the ``framework`` parameter when among them.
    """
    n = 0
    for item in configs:
        if hasattr(item, "config") and not isinstance(item, Mapping):
            item = item.config
        data = item.to_dict() if isinstance(item, TrainConfig) else dict(item)
        params = space.params_for(data)
        if len(frameworks) > 1 and data.get("framework") in frameworks:
            params["framework"] = data["framework"]
        if params:
            study.enqueue_trial(params, user_attrs={"enqueued": True}, skip_if_exists=True)
            n += 1
    return n


def _recommended(workload: Any, hardware: Any, framework: str, storage: str) -> list[TrainConfig]:
    """Configurations dltune.recommend proposes for ``framework`` from the knowledge base and the
    records in ``storage`` (the one tune works in): its pick, then alternatives; none (with a
    warning) for a framework the surrogates cannot predict (too few runs of it)."""
    import warnings

    from dltune._errors import FrameworkNotPredictedError
    from dltune.recommend import recommend

    try:
        rec = recommend(workload, hardware=hardware, frameworks=[framework], storage=storage)
    except FrameworkNotPredictedError as exc:
        warnings.warn(f"No warm start for {framework} (its study starts from the sampler): {exc}",
                      UserWarning, stacklevel=2)
        return []
    return [c for c in rec.configs if c.framework == framework]


def tune(
    workload: Any,
    frameworks: str | Sequence[str] | None = None,
    hardware: Any = None,
    space: Any = None,
    trials: int = 20,
    time_budget_s: float | None = None,
    objective: str | Sequence[str] = "balanced",
    constraints: Mapping[str, float] | None = None,
    sampler: Any = "tpe",
    pruner: Any = None,
    storage: str | None = "default",
    seed: int | None = None,
    *,
    model: str | None = None,
    workers: int = 1,
    jobs: int = 1,
    run_timeout_s: float | None = None,
    warm_start: bool = False,
    enqueue: Iterable[Any] | None = None,
    compare_preset: bool = True,
    preset_epochs: int | None = None,
    repeat_best: int = 0,
    seeds: int = 1,
    base: TrainConfig | None = None,
    progress: bool = False,
    pool: Any = None,
    search: str = "factorized",
    thread_configs: int = 2,
    one_study: bool = False,
    **renamed: Any,
) -> TuneResult:
    """Search configurations per framework with real training runs; return the Pareto fronts.

    One Optuna study per workload x framework x hardware target, named
    ``dltune:<data>-<model>:<framework>:<target>``; calling again with the same arguments
    resumes it and adds only the trials still missing, until ``trials`` are COMPLETE.

    Args:
        workload: a :class:`~dltune.Workload`, a data set name, four arrays ``(x_train,
            y_train, x_test, y_test)`` or a pair ``(x, y)`` (:func:`~dltune.data.holdout_split`).
        frameworks: backend names (a list or ``"torch,tensorflow"``); None: the maintained
            frameworks installed here (:func:`dltune.backends.default_framework_names`).
        hardware: None (this machine), a core count (a CPU-subset target), or this machine's
            :class:`~dltune.Hardware`.
        space: a :class:`SearchSpace`, a mapping, or a YAML / JSON file; defaults otherwise.
        trials: COMPLETE trials each study must hold when tune returns.
        time_budget_s: seconds after which no new trial starts (per framework; the thread
            phase's included); a run is killed after ``base.timeout_s``.
        objective: ``accuracy``, ``time`` or ``balanced`` (accuracy and training time, a
            Pareto front), as :data:`dltune.config.OBJECTIVES`; or a list of ``accuracy``,
            ``train_time``, ``peak_memory`` (more than one: a multi-objective study).
        constraints: ``max_train_time_s``, ``max_memory_mb``, ``min_accuracy`` bounds
            (:data:`dltune.config.CONSTRAINTS`, as recommend takes them), passed to the
            sampler's constraint support; infeasible trials stay off the front.
        sampler: ``tpe``, ``random``, ``nsga2`` or an Optuna sampler.
        pruner: None (median pruning on per-epoch accuracy when the only objective is
            accuracy), ``median``, ``none`` or an Optuna pruner.
        storage: database URL; ``"default"``: ``$DLTUNE_STORAGE``, else
            ``sqlite:///dltune.db`` in the working folder. A study needs one: None is refused.
        seed: seeds the sampler and the training runs (weights, batch order).
        model: model preset when ``workload`` is a name or arrays.
        workers: K > 1 starts K ``dltune worker`` processes per study (use PostgreSQL); the
            thread phase runs here after them (other machines join it with
            ``dltune worker --phase threads``).
        jobs: K > 1 runs K trials at once on this machine, each pinned to its own disjoint
            set of cores (``hardware`` cores each; None: the usable cores // K); K sets that do
            not fit are refused.
        run_timeout_s: kill a trial's run after this many seconds (the trial fails with the
            reason, the search goes on); None: ``base.timeout_s``.
        warm_start: first try the configurations :func:`dltune.recommend` proposes.
        enqueue: configurations (TrainConfig, dicts, or objects with ``.config``) to try first,
            in every framework's study (their ``framework`` field is ignored).
        compare_preset: also measure each framework's own default preset for comparison
            (:func:`dltune.config.default_preset`; resolved before the search starts).
        preset_epochs: cap the preset's epochs (the label then says so).
        repeat_best: measure the K most accurate trials (that meet the constraints) once more
            with another seed (theirs + 1), after the search: how much of their accuracy was
            luck (``StudyResult.repeats``), and the workload's own seed noise for
            :func:`dltune.recommend` (it needs 3 such pairs). Stored on the study; a resumed
            call measures only trials not measured again yet.
        seeds: each of those trials is measured with this many other seeds (theirs + 1, ...):
            their mean, spread and interval of accuracy and time (``StudyResult.repeats``).
        base: settings not searched (seed, timeout_s, lr schedule, ``device``...). With
            ``device="cuda"`` the study's target is ``<hardware target>+cuda`` and the preset
            runs on the GPU too.
        progress: progress per study on stderr (:class:`dltune._log.Progress`).
        search: ``factorized``: the hyper-parameter trials run at the framework's default
            threads (one warm worker), then the thread and start-up dimensions of ``space``
            are timed for the ``thread_configs`` best trials in a study of their own,
            ``<study>:threads`` (:mod:`dltune.tuning._thread_phase`); ``joint``: every
            dimension in one study (named ``...:joint`` when it varies threads).
        thread_configs: how many of the best trials the thread phase tunes (0: none).
        one_study: one study for all ``frameworks`` (named with them joined by ``+``), the
            framework a categorical parameter and each its own start-up knobs: the sampler
            spends trials where a framework is promising, and one Pareto front compares them.
            The result is keyed by that joined name.
    """
    from dltune._storage_url import resolve_storage
    from dltune._workload import as_workload

    refuse_renamed("tune", renamed)
    check_int("trials", trials, 1, 100000)
    check_int("workers", workers, 1, 256)
    check_int("jobs", jobs, 1, 4096)
    if run_timeout_s is not None:
        check_float("run_timeout_s", run_timeout_s, 0.0, None, low_open=True)
    if jobs > 1 and workers > 1:
        raise ParameterError(f"The 'jobs' parameter must be 1 when 'workers' is {workers} "
                             f"(each worker runs one trial at a time). Got {jobs} instead.")
    check_int("repeat_best", repeat_best, 0, 1000)
    check_int("seeds", seeds, 1, 1000)
    check_int("thread_configs", thread_configs, 0, 100)
    check_search(search)
    check_bool("one_study", one_study)
    check_bool("warm_start", warm_start)
    check_bool("compare_preset", compare_preset)
    if time_budget_s is not None:
        check_float("time_budget_s", time_budget_s, 0.0, None, low_open=True)
    if seed is not None:
        check_int("seed", seed, 0, 2**31 - 1)
    if preset_epochs is not None:
        check_int("preset_epochs", preset_epochs, 1, 10000)
    objs = check_objectives(objective)
    cons = check_constraints(constraints)
    names = _frameworks(frameworks)
    url = resolve_storage(storage)
    if url is None:
        raise ParameterError("The 'storage' parameter of tune() must be a database URL or "
                             "'default': its studies live there. Got None instead.")
    wl = as_workload(workload, model)
    # Resolved before any study is made: a preset that cannot be resolved stops the call before any
    # trial, not after the search.
    presets = {fw: preset_for(fw, wl, preset_epochs) for fw in names} if compare_preset else {}
    if jobs > 1 and hardware is None:
        hardware = max(1, usable_cores() // jobs)
    hw = _hardware(hardware)
    core_sets = job_core_sets(jobs, hw.usable_cores) if jobs > 1 else None
    full_space = as_space(space, hw.usable_cores)
    if full_space.cores > hw.usable_cores:
        raise ParameterError(
            f"The search space allows {full_space.cores} cores, but the hardware target has "
            f"{hw.usable_cores}."
        )
    base = base or TrainConfig()
    if seed is not None:
        base = base.replace(seed=seed)
    if run_timeout_s is not None:
        base = base.replace(timeout_s=float(run_timeout_s))
    if hw.usable_cores < usable_cores():
        base = base.replace(threads={**base.threads.to_dict(), "cores": hw.usable_cores})
    if max(workers, jobs) > 1 and not isinstance(sampler, str):
        raise ParameterError("With workers or jobs > 1 the 'sampler' parameter must be a name, "
                             "because each worker process builds its own sampler.")
    if workers > 1 and url.lower().startswith("sqlite"):
        import warnings

        warnings.warn(f"{workers} workers will write one SQLite file ({mask_url(url)}); they "
                      "serialise on its lock. Use PostgreSQL for parallel workers.",
                      UserWarning, stacklevel=2)
    if pruner is None:
        pruner_name = "median" if [o.name for o in objs] == ["accuracy"] else "none"
    else:
        pruner_name = pruner if isinstance(pruner, str) else type(pruner).__name__
    # Checked before the storage is opened: a wrong name must not leave a new database behind.
    check_sampler(sampler)
    check_pruner(pruner)
    quiet_optuna()
    # Refused before a worker starts and exports the data set: nothing is written on a refusal.
    url = checked_storage_url(url)
    storage_obj = None
    if pool is None:
        from dltune.runtime import WorkerPool

        pool = WorkerPool()  # as many warm workers as its memory budget holds
        own_pool = True
    else:
        own_pool = False
    results: dict[str, StudyResult] = {}
    studies: dict[str, Any] = {}
    try:
        for fw in ["+".join(names)] if one_study and len(names) > 1 else names:
            started = time.monotonic()
            fw_space, thread_space = search_spaces(full_space.without_knobs(fw), fw, search)
            if workers == jobs == 1 and "+" not in fw and not fw_space.split()[1].dimensions:
                # The space fixes threads and start-up knobs, so one worker runs every trial: it
                # imports its framework while this process opens the storage and the study.
                prestart_worker(pool, wl, fw_space, base.replace(framework=fw))
            if storage_obj is None:
                storage_obj = open_storage(url)
            spec = StudySpec(wl, fw, hw, fw_space, objs, cons, base.replace(framework=fw.split("+")[0]),
                             sampler if isinstance(sampler, str) else type(sampler).__name__,
                             pruner_name, seed, trials, thread_space, thread_configs)
            # The GPU is a hardware target of its own: its trials never share a study with the
            # same machine's CPU trials.
            target = hw.target if base.device == "cpu" else f"{hw.target}+{base.device}"
            name = study_name(wl, fw, target, objs) + (":joint" if fw_space.split()[1].dimensions else "")
            study = create_or_load(storage_obj, name, spec, build_sampler(sampler, seed),
                                   build_pruner(pruner if pruner is not None else pruner_name, len(objs)))
            queued = list(enqueue or [])
            if warm_start:
                queued = [c for one in fw.split("+") for c in _recommended(wl, hw, one, url)] + queued
            if queued:
                _enqueue(study, fw_space, queued, fw.split("+"))
            if workers == jobs == 1:
                _run_here(study, storage_obj, spec, trials, time_budget_s, pool, progress)
            else:
                _run_workers(study, url, trials, max(workers, jobs), time_budget_s, progress, fw,
                             core_sets)
            result = study_result(study, spec)
            result.threads = run_thread_phase(
                storage_obj, study, result, wl, thread_space, thread_configs, pool,
                None if time_budget_s is None else started + time_budget_s)
            if compare_preset and result.pareto:
                best_fw = result.best.config.get("framework", fw) if result.best else fw
                record, label = _measure_preset(study, wl, presets[best_fw], spec.base, pool)
                result.preset = record
                result.comparison = _compare(result, record, label)
            if repeat_best:
                result.repeats = _repeat_best(study, wl, repeat_best, pool, seeds)
            results[fw], studies[fw] = result, study
    finally:
        if own_pool:
            pool.close()
    return TuneResult(storage=mask_url(url), results=results, studies=studies)
