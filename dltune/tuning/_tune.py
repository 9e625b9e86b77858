"""``dltune.tune``: an Optuna search per workload x framework x hardware target that trains."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune._validation import check_bool, check_float, check_int
from dltune.config import TrainConfig, usable_cores
from dltune.measure import Measurement
from dltune.tuning._objective import TrialRunner, check_constraints, check_objectives
from dltune.tuning._result import StudyResult, TuneResult, summarise_trial
from dltune.tuning._space import SearchSpace, as_space
from dltune.tuning._storage import (
    SQLiteWriters,
    default_storage_url,
    mask_url,
    open_storage,
    require_database,
)
from dltune.tuning._study import (
    PRUNERS,
    StudySpec,
    build_pruner,
    build_sampler,
    counts,
    create_or_load,
    load_study_spec,
    study_name,
)

__all__ = ["preset_for", "run_worker", "tune"]

# Each framework's own published defaults; frameworks without one get Caffe's.
_OWN_PRESET = {"torch": "torch", "tensorflow": "tensorflow", "theano": "theano"}


def preset_for(framework: str, workload: Any, max_epochs: int | None = None) -> tuple[TrainConfig, str]:
    """The framework's default preset on this workload, and a label that says what was capped."""
    name = _OWN_PRESET.get(framework, "caffe")
    dataset = "cifar10" if workload.dataset.input_shape[0] == 3 else "mnist"
    config = TrainConfig.preset(name, dataset, framework=framework)
    label = f"{name}/{dataset}"
    if name != framework:
        label += f" (no {framework} preset)"
    if max_epochs is not None and config.epochs > max_epochs:
        label += f", epochs capped {config.epochs}->{max_epochs}"
        config = config.replace(epochs=max_epochs)
    return config, label


def _frameworks(frameworks: str | Iterable[str]) -> list[str]:
    from dltune._bench import interpreter_for
    from dltune.backends import BACKENDS

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


def _enqueue(study: Any, space: SearchSpace, configs: Iterable[Any]) -> int:
    """Queue configurations as WAITING trials (sampled dimensions only); returns how many.

    A configuration's ``framework`` field is ignored: the study's framework trains it.
    """
    n = 0
    for item in configs:
        if hasattr(item, "config") and not isinstance(item, Mapping):
            item = item.config
        data = item.to_dict() if isinstance(item, TrainConfig) else dict(item)
        params = space.params_for(data)
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


def _stored_measurement(study: Any, key: str, workload: Any, config: TrainConfig, pool: Any,
                        env: Mapping[str, str] | None = None) -> Measurement:
    """The measurement stored on the study under ``key``, else ``config`` measured now (in
    start-up environment ``env``) and, if it ran, stored there, so a resumed run reuses it."""
    from dltune._bench import measure
    from dltune.tuning._objective import _startup_environment

    stored = study.user_attrs.get(key)
    if stored is not None:
        return Measurement.from_dict(stored)
    with _startup_environment(env or {}):
        record = measure(workload, config, pool=pool)
    if record.ok:
        study.set_user_attr(key, record.to_dict())
    return record


def _measure_preset(study: Any, workload: Any, framework: str, base: TrainConfig,
                    preset_epochs: int | None, pool: Any) -> tuple[Measurement, str]:
    """The preset's measurement, stored on the study so that a resumed run reuses it."""
    config, label = preset_for(framework, workload, preset_epochs)
    config = config.replace(seed=base.seed, threads=base.threads, timeout_s=base.timeout_s,
                            device=base.device)
    return _stored_measurement(study, f"preset_measurement:{label}", workload, config, pool), label


def _most_accurate(study: Any, k: int) -> list[Any]:
    """The ``k`` most accurate COMPLETE trials that meet the study's constraints."""
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("test_accuracy") is not None and t.user_attrs.get("config")
            and all(v <= 0 for v in t.constraints.values())]
    return sorted(done, key=lambda t: (-float(t.user_attrs["test_accuracy"]),
                                       float(t.user_attrs.get("train_time_s") or 0.0), t.number))[:k]


def _repeat_best(study: Any, workload: Any, k: int, pool: Any) -> list[dict[str, Any]]:
    """Measure the ``k`` most accurate trials again with another seed (theirs + 1).

    A search's best trial is partly luck: the most accurate of many noisy runs. Measured again,
    its accuracy says how much; the pairs give the workload's own seed noise, which
    :func:`dltune.recommend` uses for the configurations measured on it. Each repeat is stored
    on the study (``repeat_measurement:<trial>``), so a resumed call measures only new ones.
    """
    rows = []
    for trial in _most_accurate(study, k):
        config = TrainConfig.from_dict(trial.user_attrs["config"])
        record = _stored_measurement(study, f"repeat_measurement:{trial.number}", workload,
                                     config.replace(seed=config.seed + 1), pool,
                                     trial.user_attrs.get("startup_env"))
        metrics = record.metrics if record.ok else {}
        rows.append({
            "trial": trial.number,
            "seed": record.config.get("seed"),
            "status": record.status,
            "accuracy": trial.user_attrs["test_accuracy"],
            "accuracy_again": metrics.get("test_accuracy"),
            "train_time_s": trial.user_attrs.get("train_time_s"),
            "train_time_again_s": metrics.get("train_time_s"),
            "peak_rss_mb": trial.user_attrs.get("peak_rss_mb"),
            "peak_rss_again_mb": metrics.get("peak_rss_mb"),
        })
    return rows


def _compare(result: StudyResult, preset: Measurement, label: str) -> dict[str, Any] | None:
    acc = preset.metrics.get("test_accuracy") if preset.ok else None
    secs = preset.metrics.get("train_time_s") if preset.ok else None
    front = [t for t in result.pareto if t.accuracy is not None and t.train_time_s is not None]
    if not front:
        return None
    good = [t for t in front if acc is not None and t.accuracy >= acc]
    chosen = min(good, key=lambda t: t.train_time_s) if good else max(front, key=lambda t: t.accuracy)
    return {
        "preset_label": label,
        "preset_status": preset.status,
        "preset_accuracy": acc,
        "preset_train_time_s": secs,
        "preset_epochs": preset.config.get("epochs"),
        "trial": chosen.number,
        "accuracy": chosen.accuracy,
        "train_time_s": chosen.train_time_s,
        "speedup": (secs / chosen.train_time_s) if secs and chosen.train_time_s else None,
        "accuracy_gain_pts": None if acc is None else 100 * (chosen.accuracy - acc),
        "matches_preset": bool(good),
    }


def _study_result(study: Any, spec: StudySpec) -> StudyResult:
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        pareto, best = [], None
    else:
        pareto = sorted((summarise_trial(t) for t in study.best_trials),
                        key=lambda t: (t.train_time_s or 0.0, t.number))
        if spec.objectives[0].name == "accuracy":
            best = max(pareto, key=lambda t: (t.accuracy or 0.0, -(t.train_time_s or 0.0)))
        else:
            best = pareto[0]
    return StudyResult(
        framework=spec.framework,
        study_name=study.study_name,
        objectives=[o.name for o in spec.objectives],
        counts=counts(study),
        pareto=pareto,
        best=best,
    )


def tune(
    workload: Any,
    frameworks: str | Sequence[str] = ("torch",),
    hardware: Any = None,
    space: Any = None,
    n_trials: int = 20,
    timeout: float | None = None,
    objectives: str | Sequence[str] = ("accuracy", "train_time"),
    constraints: Mapping[str, float] | None = None,
    sampler: Any = "tpe",
    pruner: Any = None,
    storage: str | None = None,
    seed: int | None = None,
    *,
    model: str | None = None,
    workers: int = 1,
    warm_start: bool = False,
    enqueue: Iterable[Any] | None = None,
    compare_preset: bool = True,
    preset_epochs: int | None = None,
    repeat_best: int = 0,
    base: TrainConfig | None = None,
    progress: bool = False,
    pool: Any = None,
) -> TuneResult:
    """Search configurations per framework with real training runs; return the Pareto fronts.

    One Optuna study per workload x framework x hardware target, named
    ``dltune:<data>-<model>:<framework>:<target>``; calling again with the same arguments
    resumes it and adds only the trials still missing, until ``n_trials`` are COMPLETE.

    Args:
        workload: a :class:`~dltune.Workload`, a data set name, four arrays ``(x_train,
            y_train, x_test, y_test)`` or a pair ``(x, y)`` (:func:`~dltune.data.holdout_split`).
        frameworks: backend names (a list or ``"torch,tensorflow"``).
        hardware: None (this machine), a core count (a CPU-subset target), or this machine's
            :class:`~dltune.Hardware`.
        space: a :class:`SearchSpace`, a mapping, or a YAML / JSON file; defaults otherwise.
        n_trials: COMPLETE trials each study must hold when tune returns.
        timeout: seconds after which no new trial starts (per framework).
        objectives: ``accuracy``, ``train_time``, ``peak_memory`` (any of them) or ``both``;
            more than one gives a multi-objective study and a Pareto front.
        constraints: ``max_train_time_s``, ``max_memory_mb``, ``min_accuracy`` bounds, passed
            to the sampler's constraint support; infeasible trials stay off the front.
        sampler: ``tpe``, ``random``, ``nsga2`` or an Optuna sampler.
        pruner: None (median pruning on per-epoch accuracy when the only objective is
            accuracy), ``median``, ``none`` or an Optuna pruner.
        storage: database URL; ``$DLTUNE_STORAGE`` or ``sqlite:///dltune.db`` by default.
        seed: seeds the sampler and the training runs (weights, batch order).
        model: model preset when ``workload`` is a name or arrays.
        workers: K > 1 starts K ``dltune worker`` processes per study (use PostgreSQL).
        warm_start: first try the configurations :func:`dltune.recommend` proposes.
        enqueue: configurations (TrainConfig, dicts, or objects with ``.config``) to try first,
            in every framework's study (their ``framework`` field is ignored).
        compare_preset: also measure each framework's default preset for comparison.
        preset_epochs: cap the preset's epochs (the label then says so).
        repeat_best: measure the K most accurate trials (that meet the constraints) once more
            with another seed (theirs + 1), after the search: how much of their accuracy was
            luck (``StudyResult.repeats``), and the workload's own seed noise for
            :func:`dltune.recommend` (it needs 3 such pairs). Stored on the study; a resumed
            call measures only trials not measured again yet.
        base: settings not searched (seed, timeout_s, lr schedule, ``device``...). With
            ``device="cuda"`` the study's target is ``<hardware target>+cuda`` and the preset
            runs on the GPU too.
        progress: a progress bar per study on stderr.
    """
    from dltune._workload import as_workload

    check_int("n_trials", n_trials, 1, 100000)
    check_int("workers", workers, 1, 256)
    check_int("repeat_best", repeat_best, 0, 1000)
    check_bool("warm_start", warm_start)
    check_bool("compare_preset", compare_preset)
    if timeout is not None:
        check_float("timeout", timeout, 0.0, None, low_open=True)
    if seed is not None:
        check_int("seed", seed, 0, 2**31 - 1)
    if preset_epochs is not None:
        check_int("preset_epochs", preset_epochs, 1, 10000)
    objs = check_objectives(objectives)
    cons = check_constraints(constraints)
    names = _frameworks(frameworks)
    url = storage or default_storage_url()
    wl = as_workload(workload, model)
    hw = _hardware(hardware)
    full_space = as_space(space, hw.usable_cores)
    if full_space.cores > hw.usable_cores:
        raise ParameterError(
            f"The search space allows {full_space.cores} cores, but the hardware target has "
            f"{hw.usable_cores}."
        )
    base = base or TrainConfig()
    if seed is not None:
        base = base.replace(seed=seed)
    if hw.usable_cores < usable_cores():
        base = base.replace(threads={**base.threads.to_dict(), "cores": hw.usable_cores})
    if workers > 1 and not isinstance(sampler, str):
        raise ParameterError("With workers > 1 the 'sampler' parameter must be a name, "
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
    storage_obj = open_storage(url)
    if pool is None:
        from dltune.runtime import WorkerPool

        pool = WorkerPool(max_workers=3)
        own_pool = True
    else:
        own_pool = False
    results: dict[str, StudyResult] = {}
    try:
        for fw in names:
            fw_space = full_space.without_knobs(fw)
            spec = StudySpec(wl, fw, hw, fw_space, objs, cons, base.replace(framework=fw),
                             sampler if isinstance(sampler, str) else type(sampler).__name__,
                             pruner_name, seed, n_trials)
            # The GPU is a hardware target of its own: its trials never share a study with the
            # same machine's CPU trials.
            target = hw.target if base.device == "cpu" else f"{hw.target}+{base.device}"
            name = study_name(wl, fw, target, objs)
            study = create_or_load(storage_obj, name, spec, build_sampler(sampler, seed),
                                   build_pruner(pruner if pruner is not None else pruner_name, len(objs)))
            queued = list(enqueue or [])
            if warm_start:
                queued = _recommended(wl, hw, fw, url) + queued
            if queued:
                _enqueue(study, fw_space, queued)
            if workers == 1:
                _run_here(study, storage_obj, spec, n_trials, timeout, pool, progress)
            else:
                _run_workers(study, url, n_trials, workers, timeout, progress, fw)
            result = _study_result(study, spec)
            if compare_preset and result.pareto:
                record, label = _measure_preset(study, wl, fw, spec.base, preset_epochs, pool)
                result.preset = record
                result.comparison = _compare(result, record, label)
            if repeat_best:
                result.repeats = _repeat_best(study, wl, repeat_best, pool)
            results[fw] = result
    finally:
        if own_pool:
            pool.close()
    return TuneResult(storage=mask_url(url), studies=results)


def max_runs_for(n_trials: int) -> int:
    """Trials one process may run for a target of ``n_trials`` complete ones."""
    return 3 * n_trials + 10


def _bar(study: Any, total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=min(total, counts(study).get("COMPLETE", 0)), desc=desc,
                unit="trial", file=sys.stderr, leave=True)


def _run_here(study: Any, storage: Any, spec: StudySpec, n_trials: int, timeout: float | None,
              pool: Any, progress: bool) -> int:
    from dltune.tuning._loop import run_trials

    runner = TrialRunner(spec.workload, spec.framework, spec.space, spec.base, spec.objectives,
                         spec.constraints, prune=spec.pruner not in ("none", "NopPruner"),
                         storage=storage, pool=pool)
    bar = _bar(study, n_trials, spec.framework, progress)

    def on_trial(trial: Any) -> None:
        if bar is not None:
            done = min(n_trials, counts(study).get("COMPLETE", 0))
            bar.update(done - bar.n)
            bar.set_postfix_str(f"last: #{trial.number} {trial.state.name.lower()}")

    try:
        with SQLiteWriters(storage.url):
            return run_trials(study, runner, n_trials, storage=storage, timeout=timeout,
                              on_trial=on_trial, max_runs=max_runs_for(n_trials))
    finally:
        if bar is not None:
            bar.close()


def _run_workers(study: Any, url: str, n_trials: int, workers: int, timeout: float | None,
                 progress: bool, framework: str) -> None:
    """Start ``workers`` local ``dltune worker`` processes on the study and wait for them."""
    from dltune.tuning._storage import _scrub

    env = dict(os.environ)
    env["DLTUNE_STORAGE"] = url  # the password travels in the environment, never in argv
    logs = Path(tempfile.mkdtemp(prefix="dltune-workers-"))
    procs = []
    for i in range(workers):
        cmd = [sys.executable, "-m", "dltune.cli", "worker", "--study", study.study_name,
               "--n-trials", str(n_trials), "--seed-offset", str(i), "--quiet"]
        if timeout is not None:
            cmd += ["--timeout", str(timeout)]
        log = open(logs / f"worker-{i}.log", "wb")
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    bar = _bar(study, n_trials, f"{framework} x{workers}", progress)
    try:
        while any(p.poll() is None for p, _ in procs):
            if bar is not None:
                bar.update(min(n_trials, counts(study).get("COMPLETE", 0)) - bar.n)
            time.sleep(1.0)
        if bar is not None:
            bar.update(min(n_trials, counts(study).get("COMPLETE", 0)) - bar.n)
    except BaseException:
        for p, _ in procs:
            p.terminate()
        raise
    finally:
        for _, log in procs:
            log.close()
        if bar is not None:
            bar.close()
    failed = [(i, p.returncode) for i, (p, _) in enumerate(procs) if p.returncode != 0]
    if failed:
        i, code = failed[0]
        tail = (logs / f"worker-{i}.log").read_text(errors="replace").strip().splitlines()[-3:]
        raise DltuneError(f"{len(failed)} of {workers} workers failed (worker {i}: exit {code}; "
                          f"logs in {logs}): " + _scrub(" | ".join(tail), url))
    shutil.rmtree(logs, ignore_errors=True)


def run_worker(
    study: str,
    storage: str | None = None,
    n_trials: int | None = None,
    *,
    timeout: float | None = None,
    seed_offset: int = 0,
    any_hardware: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Join an existing study and run trials until it holds ``n_trials`` COMPLETE ones.

    ``n_trials`` is the study's total target (the one ``tune`` stored, by default), so any
    number of workers together stop at exactly that many completed trials.
    """
    import optuna

    url = require_database(storage or default_storage_url(),
                           "a worker joins a study that 'dltune tune' created there")
    storage_obj = open_storage(url)
    try:
        loaded = optuna.load_study(study_name=study, storage=storage_obj)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage_obj)]
        raise ParameterError(
            f"No study named {study!r} in {mask_url(url)}. Studies there: "
            f"{', '.join(names) if names else 'none'}."
        ) from None
    spec = load_study_spec(loaded, cores_check=not any_hardware)
    target = spec.n_trials if n_trials is None else check_int("n_trials", n_trials, 1, 100000)
    seed = None if spec.seed is None else spec.seed + 7919 * int(seed_offset)
    loaded = optuna.load_study(
        study_name=study,
        storage=storage_obj,
        sampler=build_sampler(spec.sampler, seed),
        # A pruner object given to tune() is stored by class name; workers rebuild only named ones.
        pruner=build_pruner(spec.pruner if spec.pruner in PRUNERS else "none", len(spec.objectives)),
    )
    from dltune.runtime import WorkerPool
    from dltune.tuning._loop import run_trials

    with WorkerPool(max_workers=3) as pool, SQLiteWriters(url):
        runner = TrialRunner(spec.workload, spec.framework, spec.space, spec.base, spec.objectives,
                             spec.constraints, prune=spec.pruner != "none", storage=storage_obj,
                             pool=pool)
        bar = _bar(loaded, target, spec.framework, progress)
        try:
            ran = run_trials(loaded, runner, target, storage=storage_obj, timeout=timeout,
                             max_runs=max_runs_for(target),
                             on_trial=(lambda t: bar.update(min(target, counts(loaded).get("COMPLETE", 0)) - bar.n))
                             if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
    return {"study": study, "storage": mask_url(url), "ran": ran, "counts": counts(loaded),
            "target": target}
