"""Storage URLs, password masking, the SQLite multi-writer warning, the reservation lock."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dltune import ParameterError
from dltune._storage_url import _scrub
from dltune.tuning import StorageError, mask_url, open_storage
from dltune.tuning._storage import SQLiteWriters, check_url, reservation_lock, sqlite_path


def test_mask_url_hides_passwords_only():
    assert mask_url("postgresql://bob:pa55@db.example:5432/x") == "postgresql://bob:***@db.example:5432/x"
    assert mask_url("postgresql+psycopg2://bob:p%40ss@h/x") == "postgresql+psycopg2://bob:***@h/x"
    assert mask_url("postgresql://bob@h/x") == "postgresql://bob@h/x"
    assert mask_url("sqlite:///dltune.db") == "sqlite:///dltune.db"
    url = "postgresql://bob:pa55word@h/x"
    assert "pa55word" not in _scrub(f"could not connect to {url}; password pa55word rejected", url)


def test_check_url_and_sqlite_path(tmp_path):
    with pytest.raises(ParameterError, match="must be a database URL"):
        check_url("dltune.db")
    with pytest.raises(ParameterError, match="scheme must be one of"):
        check_url("redis://bob:secret@h/0")
    try:
        check_url("redis://bob:secret@h/0")
    except ParameterError as exc:
        assert "secret" not in str(exc)
    assert sqlite_path(f"sqlite:///{tmp_path}/a.db") == tmp_path / "a.db"
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql://h/x") is None


def test_unreachable_database_error_has_no_password():
    with pytest.raises(StorageError) as info:
        open_storage("postgresql://bob:TopSecret77@127.0.0.1:1/nowhere")
    assert "TopSecret77" not in str(info.value)
    assert "postgresql://bob:***@127.0.0.1:1/nowhere" in str(info.value)


def test_sqlite_storage_has_heartbeat_and_grace(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path}/s.db", heartbeat_interval=2, grace_period=5)
    assert storage.get_heartbeat_interval() == 2
    assert storage.grace_period == 5
    assert open_storage(f"sqlite:///{tmp_path}/s.db", heartbeat=False).get_heartbeat_interval() is None


def test_warns_when_several_processes_write_one_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path}/shared.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from dltune.tuning._storage import SQLiteWriters
            with SQLiteWriters({url!r}):
                print("in", flush=True)
                time.sleep(60)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "in"
        with pytest.warns(UserWarning, match="2 processes are writing the SQLite file shared.db"):
            with SQLiteWriters(url):
                pass
    finally:
        holder.kill()
        holder.wait()
    # the dead writer's registration no longer counts
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SQLiteWriters(url):
            pass


def test_reservation_lock_is_exclusive_across_processes(tmp_path):
    url = f"sqlite:///{tmp_path}/lock.db"
    storage = open_storage(url, heartbeat=False)
    marker = tmp_path / "released"
    other = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import pathlib, time
            from dltune.tuning._storage import open_storage, reservation_lock
            with reservation_lock(open_storage({url!r}, heartbeat=False), "s"):
                print("locked", flush=True)
                time.sleep(1)
                pathlib.Path({str(marker)!r}).write_text("x")
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert other.stdout.readline().strip() == "locked"
        with reservation_lock(storage, "s"):
            assert marker.exists()  # we got the lock only after the other process let it go
    finally:
        other.wait(timeout=30)


def test_in_memory_reservation_lock_serialises_threads():
    storage = object()
    inside, peak = [0], [0]

    def work():
        with reservation_lock(storage, "study"):
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
            time.sleep(0.01)
            inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1
