"""The worker pool's memory budget, with stand-in workers (no process is started)."""

from __future__ import annotations

import pytest

from dltune.runtime import WorkerPool


class _FakeWorker:
    started: list[dict[str, str]] = []

    def __init__(self, interpreter: str, env: dict[str, str]) -> None:
        self.interpreter, self.env, self.pid, self.closed = interpreter, env, 1, False
        _FakeWorker.started.append(env)

    @property
    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr("dltune.runtime._pool.Worker", _FakeWorker)
    monkeypatch.setattr("dltune.runtime._pool._rss", lambda pid: 300)
    _FakeWorker.started = []
    return WorkerPool()


def _envs(pool: WorkerPool) -> list[str]:
    return [dict(key[1])["E"] for key in pool._workers]


def test_idle_workers_stay_warm_while_they_fit_half_the_free_memory(pool, monkeypatch):
    monkeypatch.setattr("dltune.runtime._pool._available", lambda: 2000)
    for name in "abcd":
        pool.release(pool.acquire("py", {"E": name}), healthy=True)
    # idle 900 + the next 300 <= 0.5 * (2000 + 900): four of 300 each fit, a fifth does not
    assert _envs(pool) == ["a", "b", "c", "d"]
    pool.release(pool.acquire("py", {"E": "b"}), healthy=True)  # reused, now most recent
    assert len(_FakeWorker.started) == 4 and _envs(pool) == ["a", "c", "d", "b"]
    monkeypatch.setattr("dltune.runtime._pool._available", lambda: 1300)
    pool.release(pool.acquire("py", {"E": "e"}), healthy=True)
    # less free memory: the least recently used go until the new worker fits
    assert _envs(pool) == ["d", "b", "e"]


def test_max_workers_still_caps_the_count(pool, monkeypatch):
    monkeypatch.setattr("dltune.runtime._pool._available", lambda: 10**12)
    pool.max_workers = 2
    for name in "abc":
        pool.release(pool.acquire("py", {"E": name}), healthy=True)
    assert _envs(pool) == ["b", "c"]


def test_an_unhealthy_or_spinning_worker_is_not_kept(pool, monkeypatch):
    monkeypatch.setattr("dltune.runtime._pool._available", lambda: 10**12)
    pool.release(pool.acquire("py", {"E": "a"}), healthy=False)
    pool.release(pool.acquire("py", {"E": "b", "OMP_WAIT_POLICY": "active"}), healthy=True)
    assert _envs(pool) == []


def test_a_prestarted_worker_serves_the_next_acquire_of_its_key(pool, monkeypatch):
    """prestart starts the worker in a thread and sends it the setup op; an acquire of the same
    key, even one made while the start is under way, takes that worker instead of a second."""
    import threading

    monkeypatch.setattr("dltune.runtime._pool._available", lambda: 10**12)
    release_start = threading.Event()
    setups = []

    def run(self, request, timeout):
        release_start.wait(10)
        setups.append(request)
        return {}

    monkeypatch.setattr(_FakeWorker, "run", run, raising=False)
    pool.prestart("py", {"E": "a"}, {"backend": "numpy"})
    pool.prestart("py", {"E": "a"}, {"backend": "numpy"})  # already starting: nothing more
    got: list = []
    taker = threading.Thread(target=lambda: got.append(pool.acquire("py", {"E": "a"})))
    taker.start()
    release_start.set()
    taker.join(10)
    assert setups == [{"backend": "numpy", "op": "setup"}]
    assert len(_FakeWorker.started) == 1 and got and got[0].env == {"E": "a"}
    pool.prestart("py", {"E": "b", "OMP_WAIT_POLICY": "active"})  # would spin while it waits
    pool.close()
    assert len(_FakeWorker.started) == 1


def test_a_prestart_that_fails_is_dropped(pool, monkeypatch):
    def run(self, request, timeout):
        raise RuntimeError("no such framework")

    monkeypatch.setattr(_FakeWorker, "run", run, raising=False)
    pool.prestart("py", {"E": "a"}, {"backend": "numpy"})
    worker = pool.acquire("py", {"E": "a"})  # a fresh one, the failed one closed
    assert len(_FakeWorker.started) == 2 and not worker.closed
    assert pool._workers == {} and pool._starting == {}


def test_closing_the_pool_kills_a_worker_still_setting_up(pool, monkeypatch):
    """A caller that fails before its first run closes the pool without waiting for the
    prestarted worker's framework import."""
    import threading
    import time

    killed = threading.Event()

    def run(self, request, timeout):
        if killed.wait(10):
            raise RuntimeError("killed")
        return {}

    monkeypatch.setattr(_FakeWorker, "run", run, raising=False)
    monkeypatch.setattr(_FakeWorker, "kill", lambda self: killed.set(), raising=False)
    pool.prestart("py", {"E": "a"}, {"backend": "numpy"})
    deadline = time.monotonic() + 10
    while not pool._booting and time.monotonic() < deadline:
        time.sleep(0.01)
    pool.close()
    assert killed.is_set() and pool._workers == {} and pool._starting == {}
