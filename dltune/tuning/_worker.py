"""Running a study's trials: in this process, in local ``dltune worker`` processes, or as a
worker that joins a study ``tune`` created (:func:`run_worker`)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune._log import Progress, quiet_optuna
from dltune._storage_url import resolve_storage
from dltune._validation import check_float, check_int
from dltune.config._goals import refuse_renamed
from dltune.tuning._objective import TrialRunner, _startup_environment
from dltune.tuning._result import study_result
from dltune.tuning._storage import (
    SQLiteWriters,
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
    load_study_spec,
)
from dltune.tuning._thread_phase import run_thread_phase

__all__ = ["PHASES", "run_worker"]


def max_runs_for(trials: int) -> int:
    """Trials one process may run for a target of ``trials`` complete ones."""
    return 3 * trials + 10


def resume_seed(seed: int | None, n_trials: int) -> int | None:
    """The sampler seed of a process that joins a study at progress ``n_trials``
    (:func:`study_progress`).

    A sampler rebuilt from the study's own seed would propose its first configurations again
    after a resume; derived from the study's progress, it continues instead (an empty study
    keeps ``seed``, so a fresh seeded search stays reproducible).
    """
    if seed is None or n_trials == 0:
        return seed
    return (seed + 104_729 * n_trials) % 2**32


def study_progress(study: Any) -> int:
    """The study's trials, a queued one counted once and one that started twice: a process
    that started a trial (then was killed) leaves the next one a larger number, so the two
    never share a :func:`resume_seed`, even when its trial was queued before it started."""
    from optuna.trial import TrialState

    return sum(1 if t.state == TrialState.WAITING else 2 for t in study.get_trials(deepcopy=False))


def _continue_sampler(study: Any, spec: StudySpec) -> None:
    """Give ``study`` a sampler seeded by :func:`resume_seed` (named samplers only: a sampler
    object given to ``tune`` is the caller's to seed)."""
    from dltune.tuning._study import SAMPLERS

    n = study_progress(study)
    if spec.seed is not None and n and spec.sampler in SAMPLERS:
        study.sampler = build_sampler(spec.sampler, resume_seed(spec.seed, n))


def _bar(study: Any, total: int, desc: str, enabled: bool) -> Progress | None:
    if not enabled:
        return None
    return Progress(total, desc, "trial", initial=min(total, counts(study).get("COMPLETE", 0)))


def _run_here(study: Any, storage: Any, spec: StudySpec, trials: int, time_budget_s: float | None,
              pool: Any, progress: bool) -> int:
    from dltune.tuning._loop import run_trials

    _continue_sampler(study, spec)
    runner = TrialRunner(spec.workload, spec.framework, spec.space, spec.base, spec.objectives,
                         spec.constraints, prune=spec.pruner not in ("none", "NopPruner"),
                         storage=storage, pool=pool)
    bar = _bar(study, trials, spec.framework, progress)

    def on_trial(trial: Any) -> None:
        if bar is not None:
            done = min(trials, counts(study).get("COMPLETE", 0))
            bar.update(done - bar.n)
            bar.set_postfix_str(f"last: #{trial.number} {trial.state.name.lower()}")

    try:
        with SQLiteWriters(storage.url):
            return run_trials(study, runner, trials, storage=storage, time_budget_s=time_budget_s,
                              on_trial=on_trial, max_runs=max_runs_for(trials))
    finally:
        if bar is not None:
            bar.close()


def prestart_worker(pool: Any, workload: Any, space: Any, base: Any) -> None:
    """Start, in the background, the warm worker that the trials of ``space`` take from
    ``pool``, for a space whose thread and start-up dimensions are all fixed (every trial's
    run has the key :func:`dltune._bench.measure` asks for here); it imports its framework and
    loads the data meanwhile (:meth:`dltune.runtime.WorkerPool.prestart`)."""
    from dltune._bench import worker_key
    from dltune.runtime._arrays import export_arrays

    config, knobs = space.to_config({n: d.value for n, d in space.dimensions.items() if d.fixed}, base)
    with _startup_environment(knobs):  # as TrialRunner runs a trial
        interpreter, env = worker_key(config)
    pool.prestart(interpreter, env, {"backend": config.framework, "threads": config.threads.to_dict(),
                                     "data_dir": str(export_arrays(workload.dataset)),
                                     "fingerprint": workload.dataset.fingerprint()})


def job_core_sets(jobs: int, cores_per_job: int) -> list[list[int]]:
    """Disjoint sets of this process's usable cores, ``cores_per_job`` each, one per job.

    Raises ParameterError when ``jobs`` such sets do not fit: parallel trials that shared a
    core would time each other, not the configuration.
    """
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    most = len(allowed) // cores_per_job
    if not 1 <= jobs <= most:
        raise ParameterError(
            f"The 'jobs' parameter must be an int in [1, {most}] (trials of {cores_per_job} "
            f"core(s) each on the {len(allowed)} usable cores). Got {jobs!r} instead."
        )
    return [allowed[i * cores_per_job:(i + 1) * cores_per_job] for i in range(jobs)]


def _run_workers(study: Any, url: str, n_trials: int, workers: int, timeout: float | None,
                 progress: bool, framework: str, core_sets: list[list[int]] | None = None) -> None:
    """Start ``workers`` local ``dltune worker`` processes on the study and wait for them;
    with ``core_sets``, worker ``i`` (and every run it starts) is pinned to ``core_sets[i]``."""
    from dltune._storage_url import _scrub

    env = dict(os.environ)
    env["DLTUNE_STORAGE"] = url  # the password travels in the environment, never in argv
    logs = Path(tempfile.mkdtemp(prefix="dltune-workers-"))
    procs = []
    for i in range(workers):
        # The thread phase runs in this process after them (tune's run_thread_phase).
        cmd = [sys.executable, "-m", "dltune", "worker", "--study", study.study_name, "--phase",
               "hyper", "--trials", str(n_trials), "--seed-offset", str(i), "--quiet"]
        if timeout is not None:
            cmd += ["--time-budget", str(timeout)]
        log = open(logs / f"worker-{i}.log", "wb")
        # A child inherits its parent's affinity: the worker's runs stay on its core set.
        pin = None if core_sets is None else functools.partial(os.sched_setaffinity, 0, core_sets[i])
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       preexec_fn=pin), log))
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


PHASES = ("hyper", "threads", "all")


def _load(name: str, storage: Any, url: str) -> Any:
    import optuna

    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise ParameterError(
            f"No study named {name!r} in {mask_url(url)}. Studies there: "
            f"{', '.join(names) if names else 'none'}."
        ) from None


def _check_thread_phase(study: Any, spec: StudySpec, phase: str) -> None:
    """Refuse ``phase`` (threads or all) for a study whose thread phase has nothing to tune."""
    if spec.thread_space is None:
        raise DltuneError(f"Study {study.study_name!r} does not record its thread phase (made by an "
                          "older dltune): run its 'dltune tune' command again, which resumes it "
                          "and records it, or join with --phase hyper.")
    if not spec.thread_space.dimensions or spec.thread_configs < 1:
        raise ParameterError(
            f"The 'phase' parameter must be 'hyper' for study {study.study_name!r}, which has no "
            "thread phase (a joint search, a backend whose accuracy depends on threads, or "
            f"--thread-configs 0). Got {phase!r} instead.")


def _join_thread_phase(storage: Any, study: Any, spec: StudySpec, target: int, pool: Any,
                       deadline: float | None) -> dict[str, Any]:
    """Take part in ``study``'s thread phase as ``tune`` runs it: the trials no other process is
    tuning, each timed here (:func:`~dltune.tuning._thread_phase.run_thread_phase`)."""
    result = study_result(study, spec)
    complete = result.counts.get("COMPLETE", 0)
    if result.best is None:
        raise DltuneError(f"Study {study.study_name!r} has no COMPLETE trial: its thread phase "
                          "times the best ones; run its hyper-parameter trials first (--phase "
                          "hyper or all).")
    if complete < target:
        warnings.warn(f"Study {study.study_name!r} holds {complete} of {target} COMPLETE "
                      "trials: the thread phase times the best of those.", UserWarning, stacklevel=3)
    skipped: list[int] = []
    answers = run_thread_phase(storage, study, result, spec.workload, spec.thread_space,
                               spec.thread_configs, pool, deadline, wait=False, skipped=skipped)
    return {"answers": answers, "skipped": skipped}


def run_worker(
    study: str,
    storage: str | None = "default",
    trials: int | None = None,
    *,
    phase: str | None = None,
    time_budget_s: float | None = None,
    seed_offset: int = 0,
    any_hardware: bool = False,
    progress: bool = False,
    run_timeout_s: float | None = None,
    **renamed: Any,
) -> dict[str, Any]:
    """Join an existing study and run trials until it holds ``trials`` COMPLETE ones.

    ``trials`` is the study's total target (the one ``tune`` stored, by default), so any
    number of workers together stop at exactly that many completed trials. ``storage``:
    ``"default"`` is ``$DLTUNE_STORAGE``, else ``sqlite:///dltune.db``; no new trial starts
    after ``time_budget_s`` seconds. ``run_timeout_s`` kills a trial's run after that many
    seconds (the trial fails with the reason and the worker goes on); None keeps the timeout
    the study's base configuration holds.

    ``phase`` (one of :data:`PHASES`): ``hyper``, the hyper-parameter trials; ``threads``, the
    factorized search's thread phase, as ``tune`` runs it, for the study's best trials that no
    other process is tuning (their timings land in ``<study>:threads``; one such worker per
    machine, since runs side by side time each other); ``all``, the hyper-parameter trials,
    then the thread phase. None: ``threads`` when ``study`` names a thread phase's study
    (``<study>:threads``), else ``hyper``.
    """
    started = time.monotonic()
    refuse_renamed("run_worker", renamed)
    quiet_optuna()
    if phase is not None and phase not in PHASES:
        raise ParameterError(f"The 'phase' parameter must be one of {{{', '.join(PHASES)}}}. "
                             f"Got {phase!r} instead.")
    if time_budget_s is not None:
        check_float("time_budget_s", time_budget_s, 0.0, None, low_open=True)
    if run_timeout_s is not None:
        check_float("run_timeout_s", run_timeout_s, 0.0, None, low_open=True)
    url = resolve_storage(storage)
    if url is None:
        raise ParameterError("The 'storage' parameter of run_worker() must be a database URL or "
                             "'default': the study lives there. Got None instead.")
    url = require_database(url, "a worker joins a study that 'dltune tune' created there")
    storage_obj = open_storage(url)
    loaded = _load(study, storage_obj, url)
    hyper_name = loaded.user_attrs.get("hyper_study")
    if loaded.user_attrs.get("phase") == "threads" and hyper_name:
        if phase not in (None, "threads"):
            raise ParameterError(
                f"The 'phase' parameter must be 'threads' for study {study!r}, a thread phase's "
                f"study (its hyper-parameter study is {hyper_name!r}). Got {phase!r} instead.")
        phase, loaded = "threads", _load(hyper_name, storage_obj, url)
    phase = phase or "hyper"
    spec = load_study_spec(loaded, cores_check=not any_hardware)
    if phase != "hyper":
        _check_thread_phase(loaded, spec, phase)
    target = spec.n_trials if trials is None else check_int("trials", trials, 1, 100000)
    from dltune.runtime import WorkerPool

    summary: dict[str, Any] = {"study": loaded.study_name, "storage": mask_url(url), "phase": phase,
                               "ran": 0, "target": target}
    # The thread phase's candidates each need a warm worker of their own environment.
    with (WorkerPool(max_workers=3) if phase == "hyper" else WorkerPool()) as pool, SQLiteWriters(url):
        if phase != "threads":
            loaded, summary["ran"] = _run_hyper(loaded, storage_obj, spec, target, pool, time_budget_s,
                                                seed_offset, run_timeout_s, progress)
        if phase != "hyper":
            deadline = None if time_budget_s is None else started + time_budget_s
            summary["threads"] = _join_thread_phase(storage_obj, loaded, spec, target, pool, deadline)
    summary["counts"] = counts(loaded)
    return summary


def _run_hyper(loaded: Any, storage: Any, spec: StudySpec, target: int, pool: Any,
               time_budget_s: float | None, seed_offset: int, run_timeout_s: float | None,
               progress: bool) -> tuple[Any, int]:
    """Run hyper-parameter trials of ``loaded`` until it holds ``target`` COMPLETE ones; the
    study (loaded again with this worker's sampler) and the trials run here."""
    import optuna

    from dltune.tuning._loop import run_trials

    if run_timeout_s is not None:
        spec.base = spec.base.replace(timeout_s=float(run_timeout_s))
    seed = None if spec.seed is None else spec.seed + 7919 * int(seed_offset)
    seed = resume_seed(seed, study_progress(loaded))
    loaded = optuna.load_study(
        study_name=loaded.study_name,
        storage=storage,
        sampler=build_sampler(spec.sampler, seed),
        # A pruner object given to tune() is stored by class name; workers rebuild only named ones.
        pruner=build_pruner(spec.pruner if spec.pruner in PRUNERS else "none", len(spec.objectives)),
    )
    runner = TrialRunner(spec.workload, spec.framework, spec.space, spec.base, spec.objectives,
                         spec.constraints, prune=spec.pruner != "none", storage=storage, pool=pool)
    bar = _bar(loaded, target, spec.framework, progress)
    try:
        ran = run_trials(loaded, runner, target, storage=storage, time_budget_s=time_budget_s,
                         max_runs=max_runs_for(target),
                         on_trial=(lambda t: bar.update(min(target, counts(loaded).get("COMPLETE", 0)) - bar.n))
                         if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    return loaded, ran
