"""The trial loop every tuning process runs: ``tune`` itself and each ``dltune worker``.

Order per iteration: fail stale trials (dead processes' RUNNING trials), then, under the
study's reservation lock, count COMPLETE and RUNNING trials and ask for a new trial only while
they number fewer than the target; run the trial with a heartbeat thread alive; tell the
result. When the remaining trials are all running elsewhere, wait and look again: one of them
may die and need a replacement.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from dltune._errors import DltuneError
from dltune.tuning._storage import reservation_lock

__all__ = ["TooManyFailuresError", "run_trials"]


class TooManyFailuresError(DltuneError, RuntimeError):
    """Every recent trial failed: the study stops instead of failing forever."""


class _Heartbeat:
    """Records the trial's heartbeat every interval from a thread, like Optuna's optimize()."""

    def __init__(self, storage: Any, trial_id: int) -> None:
        self._storage = storage
        self._trial_id = trial_id
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Heartbeat:
        interval = getattr(self._storage, "heartbeat_interval", None)
        if interval:
            self._thread = threading.Thread(target=self._beat, args=(interval,), daemon=True)
            self._thread.start()
        return self

    def _beat(self, interval: float) -> None:
        while True:
            try:
                self._storage.record_heartbeat(self._trial_id)
            except Exception:  # a missed beat is retried next interval; staleness needs many
                pass
            if self._stop.wait(interval):
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _fail_stale(study: Any) -> None:
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def _reserve(study: Any, storage: Any, target: int) -> tuple[Any, int, int]:
    """Under the lock: a new trial if fewer than ``target`` are complete or running."""
    from optuna.trial import TrialState

    with reservation_lock(storage, study.study_name):
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        complete = sum(t.state == TrialState.COMPLETE for t in trials)
        running = len(trials) - complete
        if complete + running >= target:
            return None, complete, running
        with warnings.catch_warnings():
            # This loop records heartbeats itself (see _Heartbeat), which Optuna cannot know.
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            return study.ask(), complete, running


def run_trials(
    study: Any,
    runner: Callable[[Any], tuple[Any, list[float] | None]],
    target: int,
    *,
    storage: Any,
    time_budget_s: float | None = None,
    on_trial: Callable[[Any], None] | None = None,
    poll_s: float = 1.0,
    max_consecutive_failures: int = 5,
    max_runs: int | None = None,
) -> int:
    """Run trials until the study holds ``target`` COMPLETE trials (or ``time_budget_s`` seconds
    pass: no trial starts after).

    ``max_runs`` bounds the trials this process runs (pruned ones count), so a pruner that
    stops nearly everything cannot keep the loop going forever; reaching it warns.
    Returns the number of trials this process ran.
    """
    from optuna.trial import TrialState

    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    ran = failures = repeated = 0
    last_reason = ""
    while deadline is None or time.monotonic() < deadline:
        if max_runs is not None and ran >= max_runs:
            exhausted = (f"; {repeated} proposed a configuration already measured: the search "
                         f"space may hold fewer than {target}") if repeated else ""
            warnings.warn(
                f"Study {study.study_name!r}: stopped after {ran} trials in this process "
                f"without reaching {target} complete ones (pruned or failed trials do not "
                f"count{exhausted}).",
                UserWarning, stacklevel=2,
            )
            break
        _fail_stale(study)
        trial, complete, running = _reserve(study, storage, target)
        if trial is None:
            if complete >= target:
                break
            time.sleep(poll_s)
            continue
        state, values = TrialState.FAIL, None
        try:
            with _Heartbeat(storage, trial._trial_id):
                state, values = runner(trial)
        except KeyboardInterrupt:
            trial.set_user_attr("fail_reason", "interrupted (Ctrl+C)")
            study.tell(trial, state=TrialState.FAIL)
            raise
        except Exception as exc:  # noqa: BLE001 - a broken trial must not end the study
            trial.set_user_attr("fail_reason", f"{type(exc).__name__}: {exc}")
            trial.set_user_attr("fail_kind", "tuner")
        if state == TrialState.COMPLETE:
            study.tell(trial, values)
        else:
            study.tell(trial, state=state)
        ran += 1
        if state == TrialState.FAIL:
            failures += 1
            last_reason = storage.get_trial(trial._trial_id).user_attrs.get("fail_reason", "")
            if failures >= max_consecutive_failures:
                raise TooManyFailuresError(
                    f"The last {failures} trials of study {study.study_name!r} failed; "
                    f"the last reason: {last_reason}"
                )
        else:
            failures = 0
        if state == TrialState.PRUNED and "duplicate_of" in storage.get_trial(trial._trial_id).user_attrs:
            repeated += 1
        if on_trial is not None:
            on_trial(storage.get_trial(trial._trial_id))
    return ran
