"""Where studies live: storage URLs, password masking, heartbeats, and who may add a trial.

Policy for dead workers: every storage dltune opens records a heartbeat for each running trial
(every ``heartbeat_interval`` seconds, from a thread of the process running the trial). A
RUNNING trial whose heartbeat is older than ``grace_period`` seconds belongs to a process that
died (SIGKILL, power loss): the next process to look at the study marks it FAIL and re-queues
its parameters as a WAITING trial (once), so the search loses nothing. The reason is kept in
the study's user attribute ``stale_trial:<number>`` (a finished trial takes no more
attributes). Nothing stays RUNNING forever as long as any process touches the study again.

Exactly-N semantics: a process adds a trial only while it holds the study's *reservation lock*
and only while COMPLETE + RUNNING trials number fewer than the target, so any number of
processes together never complete more than the target (a PostgreSQL advisory lock; a lock file
next to a SQLite database; a process-local lock for in-memory storage).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune._storage_url import (  # re-exported: dltune.tuning's storage API
    DEFAULT_STORAGE,
    _scrub,
    check_sqlite_file,
    check_url,
    default_storage_url,
    driver_url,
    mask_url,
    require_database,
    sqlite_path,
)
from dltune._validation import make_folder

__all__ = [
    "DEFAULT_STORAGE",
    "StorageError",
    "SQLiteWriters",
    "default_storage_url",
    "mask_url",
    "open_storage",
    "require_database",
    "reservation_lock",
    "sqlite_path",
]

HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 60


class StorageError(DltuneError, RuntimeError):
    """A storage could not be opened or used; the message never holds a password."""


def quiet_optuna() -> None:
    """Optuna's per-trial INFO lines off: the commands draw progress bars and tables instead."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


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

    url = check_url(url or default_storage_url())
    path = sqlite_path(url)
    if path is not None:
        # Made, not checked for writing: a reader (report, recommend) may open a read-only file.
        make_folder(path.parent, f"The 'storage' parameter must be a file path whose folder can be "
                                 f"made. Got {str(path)!r}")
        if path.exists():  # as every reader checks it (require_database)
            check_sqlite_file(path)
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


# -- the reservation lock --------------------------------------------------------------------

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


def _lock_key(study_name: str) -> int:
    """A signed 64-bit key for PostgreSQL advisory locks."""
    return int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def reservation_lock(storage: Any, study_name: str) -> Iterator[None]:
    """Hold the study-wide lock under which a process counts trials and adds one."""
    url = getattr(storage, "url", "")
    path = sqlite_path(url) if url else None
    if url.lower().startswith(("postgresql", "postgres")):
        import sqlalchemy

        with storage.engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": _lock_key(study_name)})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": _lock_key(study_name)})
        return
    if url.lower().startswith("mysql"):
        import sqlalchemy

        name = "dltune-" + hashlib.sha256(study_name.encode()).hexdigest()[:40]
        with storage.engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT GET_LOCK(:n, -1)"), {"n": name})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:n)"), {"n": name})
        return
    if path is not None:
        lock_path = path.with_name(path.name + ".lock")
        with open(lock_path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        return
    with _local_guard:
        lock = _local_locks.setdefault(study_name, threading.Lock())
    with lock:
        yield


# -- several processes on one SQLite file ----------------------------------------------------


class SQLiteWriters:
    """Registers this process as a writer of a SQLite file; warns when others write it too.

    SQLite serialises writers with a file lock: several processes work, but they wait for each
    other and may time out. Registration is a pid file in ``<db>.writers/``; dead pids are
    ignored, so a killed process never leaves a false warning behind for long.
    """

    def __init__(self, url: str, *, expected: int = 1) -> None:
        self.path = sqlite_path(url)
        self.expected = expected
        self._mine: Path | None = None

    def _others(self, folder: Path) -> list[int]:
        pids = []
        for entry in folder.glob("*.pid"):
            try:
                pid = int(entry.stem)
            except ValueError:
                continue
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                entry.unlink(missing_ok=True)
                continue
            except PermissionError:
                pass
            pids.append(pid)
        return pids

    def __enter__(self) -> SQLiteWriters:
        if self.path is None:
            return self
        folder = self.path.with_name(self.path.name + ".writers")
        folder.mkdir(parents=True, exist_ok=True)
        self._mine = folder / f"{os.getpid()}.pid"
        self._mine.write_text(str(os.getpid()))
        others = self._others(folder)
        if len(others) + 1 > self.expected:
            warnings.warn(
                f"{len(others) + 1} processes are writing the SQLite file {self.path.name} at "
                "once (pids " + ", ".join(str(p) for p in [os.getpid(), *others]) + "). SQLite "
                "serialises writers, so they wait on each other and may time out; use a "
                "PostgreSQL storage (--storage postgresql://...) for several workers.",
                UserWarning,
                stacklevel=2,
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mine is not None:
            self._mine.unlink(missing_ok=True)
            self._mine = None
