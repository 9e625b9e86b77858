"""Opening an Optuna storage: the URL checked, a clean error, heartbeats and stale trials.

Every storage dltune opens for writing records a heartbeat for each running trial (every
``heartbeat_interval`` seconds, from a thread of the process running the trial). A RUNNING
trial whose heartbeat is older than ``grace_period`` seconds belongs to a process that died
(SIGKILL, power loss): the next process to look at the study marks it FAIL and re-queues its
parameters as a WAITING trial (once), so the search loses nothing. The reason is kept in the
study's user attribute ``stale_trial:<number>`` (a finished trial takes no more attributes).
Nothing stays RUNNING forever as long as any process touches the study again.

Records layer: ``bench``, ``study``, ``tune`` and the surrogates' loader all open storages here.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune._storage_url import (
    _scrub,
    check_sqlite_file,
    check_url,
    default_storage_url,
    driver_url,
    mask_url,
    sqlite_path,
)
from dltune._validation import make_folder

__all__ = ["GRACE_PERIOD_S", "HEARTBEAT_INTERVAL_S", "STALE_REASON", "StorageError", "checked_storage_url",
           "open_storage"]

HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 60


class StorageError(DltuneError, RuntimeError):
    """A storage could not be opened or used; the message never holds a password."""


def checked_storage_url(url: str | None = None) -> str:
    """``url`` (default: :func:`default_storage_url`) as :func:`open_storage` takes it, checked
    before anything connects: a command refuses a bad storage before it writes anything else.
    A SQLite file's folder is made; an existing file must be a SQLite database."""
    url = check_url(url or default_storage_url())
    path = sqlite_path(url)
    if path is not None:
        # Made, not checked for writing: a reader (report, recommend) may open a read-only file.
        make_folder(path.parent, f"The 'storage' parameter must be a file path whose folder can be "
                                 f"made. Got {str(path)!r}")
        if path.exists():  # as every reader checks it (require_database)
            check_sqlite_file(path)
    return url


def open_storage(
    url: str | None = None,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    heartbeat: bool = True,
) -> Any:
    """An Optuna ``RDBStorage`` with dltune's heartbeat and stale-trial policy.

    ``heartbeat_interval`` and ``grace_period`` (seconds) default to ``$DLTUNE_HEARTBEAT_S``
    and ``$DLTUNE_GRACE_S``, else 10 and 60.

    Raises:
        StorageError: the database cannot be reached (the message has no password).
    """
    import optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    url = checked_storage_url(url)
    path = sqlite_path(url)
    kwargs: dict[str, Any] = {}
    if heartbeat_interval is None:
        heartbeat_interval = _env_seconds("DLTUNE_HEARTBEAT_S", HEARTBEAT_INTERVAL_S)
    if grace_period is None:
        grace_period = _env_seconds("DLTUNE_GRACE_S", GRACE_PERIOD_S)
    if heartbeat:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            retry = RetryHeartbeatStaleTrialCallback(max_retry=1)
        kwargs = dict(
            heartbeat_interval=int(heartbeat_interval),
            grace_period=int(grace_period),
            heartbeat_stale_trial_callback=_StaleTrialPolicy(retry),
        )
    engine_kwargs = {"pool_pre_ping": True}
    if path is not None:
        # Several local processes share one file: wait for its lock rather than fail at once.
        engine_kwargs = {"connect_args": {"timeout": 60}}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(driver_url(url), engine_kwargs=engine_kwargs, **kwargs)
    except Exception as exc:  # driver errors vary by database; report one clean line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(f"Cannot open storage {mask_url(url)}: {_scrub(first, url)}") from None


def _env_seconds(name: str, default: int) -> int:
    from dltune._validation import check_int

    text = os.environ.get(name)
    if not text:
        return default
    try:
        return check_int(name, int(text), 1, 86400)
    except ValueError:
        raise ParameterError(f"The '{name}' variable must be an int in [1, 86400]. Got {text!r} instead.") from None


class _StaleTrialPolicy:
    """Records why a stale trial failed, then re-queues its parameters (at most once).

    Optuna has already marked the trial FAIL when this runs, and a finished trial takes no
    more attributes, so the reason goes into the study's attributes, one key per trial.
    """

    def __init__(self, retry: Any) -> None:
        self._retry = retry

    def __call__(self, study: Any, trial: Any) -> None:
        study.set_user_attr(f"stale_trial:{trial.number}", STALE_REASON)
        self._retry(study, trial)


STALE_REASON = "stale: no heartbeat within the grace period (its process died or hung)"
