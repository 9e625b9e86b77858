"""The factorized search's second phase: thread and start-up settings tuned as a timing problem.

Thread and start-up settings change how fast a configuration trains, not what it learns (same
seed, same weights, up to the order of float reductions). So the hyper-parameter trials run at
one fixed setting, in one warm worker, and afterwards the best configurations are timed under a
few candidate settings, each in its own warm worker, on a few epochs, their repeats alternated:

1. the framework's default, then ``n`` intra-op and BLAS threads for ``n`` in the powers of two
   up to the cores and the cores themselves, the cores left over as inter-op threads (at least
   one): independent operators running side by side can beat one operator split across cores;
2. around the fastest: every inter-op thread, then each start-up knob's other values.

Its trials live in a study of their own, ``<hyper-parameter study>:threads``, single-objective
(training time): their accuracies come from capped epochs, so on the hyper-parameter study's
accuracy / time front they would sit as false points, and its sampler models one space.

Several processes (``tune`` and ``dltune worker --phase threads``) share the phase one
hyper-parameter trial at a time: a process times a trial's candidates only while it holds that
trial's claim (:func:`~dltune.tuning._storage.claim_lock`), so no candidate is timed twice at
once and the repeats of one trial's candidates stay alternated in one process.
"""

from __future__ import annotations

import json
import statistics
import time
import warnings
from collections.abc import Mapping
from typing import Any

from dltune.config import TrainConfig
from dltune.tuning._space import _KINDS, SearchSpace

__all__ = ["MAX_EPOCHS", "MIN_GAIN", "REPEATS", "SEARCHES", "candidates_after", "check_search", "first_candidates", "grid_size",
           "run_thread_phase", "search_spaces", "tune_threads"]

#: Timed runs per candidate, alternated across candidates; the median counts.
REPEATS = 3
#: Epochs each timed run trains (fewer when the configuration trains fewer).
MAX_EPOCHS = 2
#: How much faster (a fraction) a setting tried later must be to replace the pick.
MIN_GAIN = 0.03

_PHASE = "threads"


def _powers_up_to(low: int, high: int) -> list[int]:
    values = [n for n in (2**k for k in range(high.bit_length())) if low <= n <= high]
    return sorted({*values, high})


def _nearest(dim: Any, n: int) -> int:
    """``n`` clipped into an integer dimension's range, or its choice nearest to ``n``."""
    if dim.is_range:
        return min(max(n, int(dim.low)), int(dim.high))
    return min(dim.choices, key=lambda c: (abs(c - n), c))


def first_candidates(space: SearchSpace) -> list[dict[str, Any]]:
    """Stage 1: the framework's default (no parameter set), then ``n`` intra-op and BLAS threads
    with the cores left over as inter-op threads."""
    out: list[dict[str, Any]] = [{}]
    dims = {n: space[n] for n in ("intra_op_threads", "blas_threads") if n in space}
    if dims:
        low = max(int(d.low) if d.is_range else min(d.choices) for d in dims.values())
        high = min(int(d.high) if d.is_range else max(d.choices) for d in dims.values())
        for n in _powers_up_to(low, high):
            params: dict[str, Any] = {name: n for name in dims}
            if "inter_op_threads" in space:
                params["inter_op_threads"] = _nearest(space["inter_op_threads"], max(high // n, 1))
            out.append(params)
    return out


def candidates_after(space: SearchSpace, best: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Stage 2 around the fastest setting: its inter-op threads raised, then each knob changed."""
    out: list[dict[str, Any]] = []
    if "inter_op_threads" in space:
        inter = space["inter_op_threads"]
        most = int(inter.high) if inter.is_range else max(inter.choices)
        if best.get("inter_op_threads") != most:
            out.append({**best, "inter_op_threads": most})
    for name in space.dimensions:
        if _KINDS[name].target.startswith("env:"):
            out += [{**best, name: value} for value in space.knob_alternatives(name)]
    return out


def grid_size(space: SearchSpace) -> int:
    """How many settings an exhaustive grid of ``space`` holds (integer ranges enumerated)."""
    size = 1
    for dim in space.dimensions.values():
        size *= (int(dim.high) - int(dim.low) + 1) if dim.is_range else len(dim.choices or (1,))
    return size


def _key(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True)


def threads_study_name(hyper_study: str) -> str:
    return f"{hyper_study}:{_PHASE}"


def _measure_round(workload: Any, runs: list[tuple[TrainConfig, dict[str, str]]], pool: Any) -> list[Any]:
    from dltune._bench import measure
    from dltune.tuning._objective import _startup_environment

    records = []
    for config, env in runs:
        with _startup_environment(env):
            records.append(measure(workload, config, pool=pool))
    return records


def _claim_name(hyper_study: str, trial_number: int) -> str:
    return f"{threads_study_name(hyper_study)}#{trial_number}"


def _fail_abandoned(storage: Any, study: Any, trial_number: int) -> None:
    """FAIL the RUNNING trials of ``trial_number``'s candidates: under its claim, only a
    process that died while timing them can have left them so."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial.user_attrs.get("hyper_trial") == trial_number:
            storage.set_trial_user_attr(trial._trial_id, "fail_reason",
                                        "abandoned: the process timing it ended")
            study.tell(trial.number, state=TrialState.FAIL)


def _time_candidates(storage: Any, study: Any, workload: Any, space: SearchSpace, config: TrainConfig,
                     trial_number: int, candidates: list[dict[str, Any]], done: dict[str, dict[str, Any]],
                     pool: Any) -> None:
    """Time the candidates not in ``done`` (alternating their repeats) and tell each as a trial."""
    from optuna.trial import TrialState

    from dltune.measure._codec import set_record
    from dltune.tuning._storage import reservation_lock

    todo = [p for p in dict((_key(p), p) for p in candidates).values() if _key(p) not in done]
    if not todo:
        return
    trials, runs = [], []
    for params in todo:
        # ask() takes the oldest queued trial: under the lock it is the one queued just before,
        # not a candidate another process queued for its own trial.
        with reservation_lock(storage, study.study_name), warnings.catch_warnings():
            # Nothing fails this study's stale trials by heartbeat: a trial's claim does.
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            study.enqueue_trial(params, user_attrs={"phase": _PHASE, "hyper_trial": trial_number})
            trial = study.ask()
        values = {name: space[name].suggest(trial) for name in params}
        run_config, env = space.to_config(values, config)
        trial.set_user_attr("framework", run_config.framework)
        trial.set_user_attr("config", run_config.to_dict())
        trial.set_user_attr("startup_env", env)
        trials.append(trial)
        runs.append((run_config, env))
    times: list[list[float]] = [[] for _ in todo]
    accuracies: list[list[float]] = [[] for _ in todo]
    last: list[Any] = [None] * len(todo)
    for repeat in range(REPEATS):
        # Rotate the order each round so that no candidate always runs right after another.
        order = [(i + repeat) % len(todo) for i in range(len(todo))]
        for i, record in zip(order, _measure_round(workload, [runs[i] for i in order], pool), strict=True):
            last[i] = record
            if record.ok and record.metrics.get("train_time_s") is not None:
                times[i].append(float(record.metrics["train_time_s"]))
                accuracies[i].append(float(record.metrics.get("test_accuracy") or 0.0))
    for i, (trial, params) in enumerate(zip(trials, todo, strict=True)):
        if last[i] is not None:
            set_record(trial, last[i])
        if not times[i]:
            error = (last[i].error or {}) if last[i] is not None else {}
            trial.set_user_attr("fail_reason", error.get("message", "no timed run"))
            study.tell(trial, state=TrialState.FAIL)
            continue
        median = statistics.median(times[i])
        trial.set_user_attr("train_times_s", times[i])
        trial.set_user_attr("train_time_s", median)
        trial.set_user_attr("test_accuracy", accuracies[i][-1])
        study.tell(trial, [median])
        done[_key(params)] = {"params": params, "train_time_s": median,
                              "test_accuracy": accuracies[i][-1], "trial": trial.number}


def _fastest(done: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The fastest candidate, in the order they were tried (the default first), a later one
    replacing the pick only when at least :data:`MIN_GAIN` faster: a gain within timing noise
    does not move the answer away from the framework's default."""
    pick = None
    for entry in sorted(done.values(), key=lambda d: d["trial"]):
        if pick is None or entry["train_time_s"] < (1 - MIN_GAIN) * pick["train_time_s"]:
            pick = entry
    return pick


def _done(study: Any, trial_number: int, epochs: int) -> dict[str, dict[str, Any]]:
    """Candidates already timed for this configuration (a resumed call reuses them)."""
    from optuna.trial import TrialState

    out = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.user_attrs.get("hyper_trial") == trial_number and (t.user_attrs.get("config") or {}).get("epochs") == epochs:
            out[_key(t.params)] = {"params": dict(t.params), "train_time_s": t.values[0],
                                   "test_accuracy": t.user_attrs.get("test_accuracy"), "trial": t.number}
    return out


def tune_threads(storage: Any, hyper_study: Any, hyper_trial: Any, workload: Any, space: SearchSpace,
                 pool: Any, deadline: float | None = None) -> dict[str, Any] | None:
    """Tune ``space`` (the execution dimensions) for one hyper-parameter trial; None if no
    candidate ran. The answer holds the fastest setting, its threads and start-up environment,
    its speed-up over the framework's default and the accuracy spread across settings. Past
    ``deadline`` (``time.monotonic()``), stage 2 does not start. Where other processes may
    time this study too, the caller holds the trial's claim (:func:`run_thread_phase` does)."""
    import optuna

    config = TrainConfig.from_dict(hyper_trial.user_attrs["config"])
    config = config.replace(epochs=min(config.epochs, MAX_EPOCHS), early_stopping_patience=None)
    name = threads_study_name(hyper_study.study_name)
    study = optuna.create_study(storage=storage, study_name=name, direction="minimize",
                                sampler=optuna.samplers.RandomSampler(), load_if_exists=True)
    if not study.user_attrs:
        study.set_user_attr("phase", _PHASE)
        study.set_user_attr("hyper_study", hyper_study.study_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.set_metric_names(["training time (s), median of timed runs"])
    _fail_abandoned(storage, study, hyper_trial.number)
    done = _done(study, hyper_trial.number, config.epochs)
    stage1 = first_candidates(space)
    _time_candidates(storage, study, workload, space, config, hyper_trial.number, stage1, done, pool)
    if not done:
        return None
    best = _fastest(done)
    if deadline is None or time.monotonic() < deadline:
        _time_candidates(storage, study, workload, space, config, hyper_trial.number,
                         candidates_after(space, best["params"]), done, pool)
    best = _fastest(done)
    tuned, env = space.to_config(best["params"], TrainConfig.from_dict(hyper_trial.user_attrs["config"]))
    default = done.get(_key({}))
    accuracies = [d["test_accuracy"] for d in done.values() if d["test_accuracy"] is not None]
    return {
        "trial": hyper_trial.number,
        "study_name": name,
        "evaluations": len(done),
        "epochs": config.epochs,
        "params": best["params"],
        "threads": tuned.threads.to_dict(),
        "startup_env": env,
        "config": tuned.to_dict(),
        "train_time_s": best["train_time_s"],
        "default_train_time_s": None if default is None else default["train_time_s"],
        "speedup": None if default is None else default["train_time_s"] / best["train_time_s"],
        "accuracy_spread_pts": 100 * (max(accuracies) - min(accuracies)) if accuracies else None,
    }


SEARCHES = ("factorized", "joint")


def check_search(search: Any) -> str:
    """``search`` if it is one of :data:`SEARCHES`; else a ``ParameterError``."""
    from dltune._errors import ParameterError

    if search not in SEARCHES:
        raise ParameterError(f"The 'search' parameter must be one of {{{', '.join(SEARCHES)}}}. "
                             f"Got {search!r} instead.")
    return search


def search_spaces(space: SearchSpace, framework: str, search: str) -> tuple[SearchSpace, SearchSpace]:
    """``(hyper-parameter study's space, thread phase's space)`` for ``search``.

    The joint search, and a backend whose accuracy depends on its threads
    (:data:`~dltune.tuning._space.THREADS_CHANGE_ACCURACY`), search everything in one study.
    """
    from dltune.tuning._space import THREADS_CHANGE_ACCURACY

    if check_search(search) == "joint" or set(framework.split("+")) & THREADS_CHANGE_ACCURACY:
        return space, SearchSpace({}, cores=space.cores, defaults=False)
    return space.split()


def run_thread_phase(storage: Any, study: Any, result: Any, workload: Any, space: SearchSpace,
                     configs: int, pool: Any, deadline: float | None = None, *, wait: bool = True,
                     skipped: list[int] | None = None) -> list[dict[str, Any]]:
    """Tune ``space`` for the ``configs`` best trials of ``result`` (its best trial first, then
    the front's most accurate); one answer per trial that ran (:func:`tune_threads`). Past
    ``deadline`` (``time.monotonic()``, the search's time budget) no trial's tuning starts.

    A trial another process is tuning is waited for (its answer then reuses that process's
    timings) or, with ``wait=False``, left to it and its number appended to ``skipped``."""
    from dltune.tuning._storage import claim_lock

    if not space.dimensions or configs < 1 or result.best is None:
        return []
    ranked = [result.best] + sorted((t for t in result.pareto if t.number != result.best.number),
                                    key=lambda t: -(t.accuracy or 0.0))
    answers = []
    for summary in ranked[:configs]:
        # One study across frameworks: each trial's own framework's knobs.
        own = space.without_knobs(summary.config.get("framework", ""))
        if not own.dimensions or (deadline is not None and time.monotonic() >= deadline):
            continue
        with claim_lock(storage, _claim_name(study.study_name, summary.number), wait=wait) as mine:
            if not mine:
                if skipped is not None:
                    skipped.append(summary.number)
                continue
            answer = tune_threads(storage, study, study.trials[summary.number], workload, own, pool,
                                  deadline)
        if answer is not None:
            answers.append(answer)
    return answers
