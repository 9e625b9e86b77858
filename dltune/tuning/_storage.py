"""Where studies live: storage URLs, password masking, and who may add a trial.

Opening a storage, with dltune's heartbeat and stale-trial policy, is
:func:`dltune.measure._storage.open_storage` (records layer: bench, study and the surrogates'
loader open storages too); it is re-exported here as ``dltune.tuning``'s storage API.

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

from dltune._storage_url import (  # re-exported: dltune.tuning's storage API
    DEFAULT_STORAGE,
    check_url,
    default_storage_url,
    mask_url,
    require_database,
    sqlite_path,
)
from dltune.measure._storage import STALE_REASON, StorageError, open_storage  # re-exported

__all__ = [
    "DEFAULT_STORAGE",
    "STALE_REASON",
    "StorageError",
    "SQLiteWriters",
    "check_url",
    "claim_lock",
    "default_storage_url",
    "mask_url",
    "open_storage",
    "require_database",
    "reservation_lock",
    "sqlite_path",
]


# -- the reservation lock --------------------------------------------------------------------

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


def _lock_key(study_name: str) -> int:
    """A signed 64-bit key for PostgreSQL advisory locks."""
    return int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def reservation_lock(storage: Any, study_name: str) -> Iterator[None]:
    """Hold the study-wide lock under which a process counts trials and adds one."""
    path = sqlite_path(getattr(storage, "url", "") or "")
    with _held(storage, study_name, None if path is None else path.with_name(path.name + ".lock"),
               wait=True):
        yield


@contextlib.contextmanager
def claim_lock(storage: Any, name: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the lock named ``name`` (a unit of work several processes may share, such as one
    trial's thread phase); yields False, without waiting, when another process holds it and
    ``wait`` is False. A process that dies releases it (advisory and file locks both)."""
    path = sqlite_path(getattr(storage, "url", "") or "")
    folder = None if path is None else path.with_name(path.name + ".locks")
    if folder is not None:
        folder.mkdir(exist_ok=True)
    digest = hashlib.sha256(name.encode()).hexdigest()[:24]
    with _held(storage, "claim:" + name, None if folder is None else folder / f"{digest}.lock",
               wait=wait) as got:
        yield got


@contextlib.contextmanager
def _held(storage: Any, name: str, lock_path: Path | None, *, wait: bool) -> Iterator[bool]:
    """A lock named ``name``: a PostgreSQL advisory lock, a MySQL named lock, a file lock at
    ``lock_path`` (SQLite), else a process-local lock (in-memory storage)."""
    url = getattr(storage, "url", "") or ""
    if url.lower().startswith(("postgresql", "postgres", "mysql")):
        import sqlalchemy

        if url.lower().startswith("mysql"):
            key: Any = "dltune-" + hashlib.sha256(name.encode()).hexdigest()[:40]
            take = f"SELECT GET_LOCK(:k, {-1 if wait else 0})"
            release = "SELECT RELEASE_LOCK(:k)"
        else:
            key = _lock_key(name)
            take = "SELECT pg_advisory_lock(:k), true" if wait else "SELECT pg_try_advisory_lock(:k)"
            release = "SELECT pg_advisory_unlock(:k)"
        with storage.engine.connect() as conn:
            row = conn.execute(sqlalchemy.text(take), {"k": key}).fetchone()
            got = bool(row[-1])
            try:
                yield got
            finally:
                if got:
                    conn.execute(sqlalchemy.text(release), {"k": key})
        return
    if lock_path is not None:
        with open(lock_path, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        return
    with _local_guard:
        lock = _local_locks.setdefault(name, threading.Lock())
    got = lock.acquire(blocking=wait)
    try:
        yield got
    finally:
        if got:
            lock.release()


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
