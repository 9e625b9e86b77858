"""Worker processes: started with the run's environment, kept warm, replaced after failures."""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["WorkerFailure", "Worker", "WorkerPool", "default_pool", "package_root"]

_START_TIMEOUT_S = 120.0


def package_root() -> str:
    """The folder that holds the ``dltune`` package, put on the worker's ``PYTHONPATH``."""
    return str(Path(__file__).resolve().parents[2])


class WorkerFailure(Exception):
    """A run did not produce a result: the reason says why (exception, signal, timeout)."""

    def __init__(self, reason: str, kind: str, stderr_tail: str = "", traceback: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.stderr_tail = stderr_tail
        self.traceback = traceback


class Worker:
    """One worker process and its line protocol. Not thread-safe: one request at a time."""

    def __init__(self, interpreter: str, env: dict[str, str]) -> None:
        self.interpreter = interpreter
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [interpreter, "-u", "-m", "dltune.runtime._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        ready = self._read(time.monotonic() + _START_TIMEOUT_S)
        if ready.get("event") != "ready":
            raise self._failure("worker did not start")
        self.pid = int(ready["pid"])
        self.runs = 0

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, limit: int = 2000) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def _failure(self, what: str) -> WorkerFailure:
        code = self.proc.poll()
        if code is None:
            return WorkerFailure(what, "protocol", self.stderr_tail())
        if code < 0:
            name = signal.Signals(-code).name
            kind = "killed" if -code == signal.SIGKILL else "signal"
            hint = " (out of memory, or killed from outside)" if kind == "killed" else ""
            return WorkerFailure(f"{what}: worker killed by {name}{hint}", kind, self.stderr_tail())
        return WorkerFailure(f"{what}: worker exited with status {code}", "exit", self.stderr_tail())

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if not self._selector.select(timeout=min(remaining, 1.0)):
                if self.proc.poll() is not None:
                    raise self._failure("run did not finish")
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self.proc.wait(timeout=5)
                raise self._failure("run did not finish")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _write(self, message: dict[str, Any]) -> None:
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._failure("worker closed its input") from None

    def run(
        self,
        request: dict[str, Any],
        timeout: float,
        on_event: Callable[[dict[str, Any]], bool | None] | None = None,
    ) -> dict[str, Any]:
        """Send one request; return its result, or raise :class:`WorkerFailure`."""
        deadline = time.monotonic() + timeout
        self._write({"op": "run", **request})
        self.runs += 1
        while True:
            try:
                message = self._read(deadline)
            except TimeoutError:
                self.kill()
                raise WorkerFailure(
                    f"run exceeded its timeout of {timeout:g} s", "timeout", self.stderr_tail()
                ) from None
            event = message.get("event")
            if event == "result":
                if message["ok"]:
                    return message["result"]
                err = message["error"]
                raise WorkerFailure(
                    f"{err['type']}: {err['message']}", "exception", self.stderr_tail(),
                    err.get("traceback", ""),
                )
            verdict = on_event(message) if on_event else None
            if event == "epoch" and request.get("epoch_ack"):
                self._write({"continue": verdict is not False})

    def kill(self) -> None:
        if self.alive:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def close(self) -> None:
        # Killed, not asked to exit: a worker holds nothing to save between runs, and a
        # framework's interpreter shutdown (about a second for torch) would delay the caller.
        self.kill()
        self._selector.close()
        self._stderr.close()


def spins_when_idle(env: dict[str, str]) -> bool:
    """Whether a worker started with ``env`` keeps its OpenMP threads spinning between runs.

    ``OMP_WAIT_POLICY=active`` (a start-up knob ``tune`` searches) makes idle OpenMP threads
    busy-wait instead of sleeping: a warm torch worker started with it used 100 % of a core
    while it waited in the pool, and on a 2-core machine that slows every run measured in the
    other workers meanwhile. Such a worker is closed after its run instead of kept warm.
    """
    return (env.get("OMP_WAIT_POLICY", "").strip().lower() == "active"
            or env.get("KMP_BLOCKTIME", "").strip().lower() == "infinite")


def _key(interpreter: str, env: dict[str, str]) -> tuple:
    return (interpreter, tuple(sorted(env.items())))


def _rss(pid: int) -> int:
    """A process's resident memory in bytes (0 once it is gone)."""
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def _available() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


class WorkerPool:
    """Warm workers keyed by interpreter and environment, within a memory budget.

    Idle workers stay warm while their resident memory, with the next worker's (the largest
    seen for its interpreter), fits in ``memory_fraction`` of the memory that would be free
    without them; the least recently used go first. ``max_workers`` caps their number too
    (None: memory alone decides). A worker that failed is discarded, so the next run with the
    same key gets a fresh process; so is one whose threads would spin while it waits
    (:func:`spins_when_idle`). :meth:`prestart` starts a worker in the background, for a run
    that comes later. Thread-safe: ``acquire``, ``release`` and ``prestart`` hold a lock.
    """

    def __init__(self, max_workers: int | None = None, memory_fraction: float = 0.5) -> None:
        self.max_workers = max_workers
        self.memory_fraction = memory_fraction
        self._workers: OrderedDict[tuple, Worker] = OrderedDict()
        self._rss: dict[tuple, int] = {}  # idle workers' resident memory, read at release
        self._largest: dict[str, int] = {}  # per interpreter: the largest worker seen
        self._starting: dict[tuple, threading.Thread] = {}  # prestart's workers, until ready
        self._booting: dict[tuple, Worker] = {}  # those started, importing their framework
        self._lock = threading.Lock()

    def _over_budget(self, interpreter: str) -> bool:
        if self.max_workers is not None and len(self._workers) >= self.max_workers:
            return True
        idle = sum(self._rss.get(key, 0) for key in self._workers)
        need = self._largest.get(interpreter, 0)
        return idle + need > self.memory_fraction * (_available() + idle)

    def prestart(self, interpreter: str, env: dict[str, str], setup: dict[str, Any] | None = None) -> None:
        """Start a worker for ``(interpreter, env)`` in a thread and keep it warm; with ``setup``
        (the worker's op ``setup``: backend, threads, data) it imports its framework meanwhile.

        For work the caller does before its first run (opening a database): an ``acquire`` of
        the same key waits for this worker rather than starting another. Nothing happens when
        such a worker is warm or starting, or would spin while it waits. A start that fails is
        dropped; the run that needs the worker starts its own and reports why.
        """
        key = _key(interpreter, env)
        if spins_when_idle(env):
            return
        with self._lock:
            if key in self._workers or key in self._starting:
                return
            thread = threading.Thread(target=self._start, args=(key, interpreter, env, setup),
                                      daemon=True)
            self._starting[key] = thread
        thread.start()

    def _start(self, key: tuple, interpreter: str, env: dict[str, str],
               setup: dict[str, Any] | None) -> None:
        worker = None
        try:
            worker = Worker(interpreter, env)
            with self._lock:
                self._booting[key] = worker
            if setup is not None:
                worker.run({**setup, "op": "setup"}, _START_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - the run that needs a worker starts its own
            if worker is not None:
                worker.close()
            worker = None
        rss = 0 if worker is None else _rss(worker.pid)
        with self._lock:
            # Parked before the key leaves _starting: an acquire sees one or the other.
            if worker is not None:
                worker.key = key  # type: ignore[attr-defined]
                self._park(worker, rss)
            del self._starting[key]
            self._booting.pop(key, None)

    def _wait_started(self, key: tuple | None = None) -> None:
        """Wait for prestart's workers (``key``'s, or all)."""
        with self._lock:
            threads = list(self._starting.values()) if key is None else [self._starting.get(key)]
        for thread in threads:
            if thread is not None:
                thread.join()

    def acquire(self, interpreter: str, env: dict[str, str]) -> Worker:
        key = _key(interpreter, env)
        self._wait_started(key)
        with self._lock:
            worker = self._workers.pop(key, None)
            self._rss.pop(key, None)
            if worker is not None and not worker.alive:
                worker.close()
                worker = None
            while self._workers and self._over_budget(interpreter):
                oldest_key, oldest = self._workers.popitem(last=False)
                self._rss.pop(oldest_key, None)
                oldest.close()
        if worker is None:
            worker = Worker(interpreter, env)
        worker.key = key  # type: ignore[attr-defined]
        return worker

    def release(self, worker: Worker, healthy: bool) -> None:
        # A spinning worker is closed even when no other one runs next: the pool cannot know
        # at release, and its busy threads would slow every run measured meanwhile.
        if not healthy or not worker.alive or spins_when_idle(dict(worker.key[1])):  # type: ignore[attr-defined]
            worker.close()
            return
        rss = _rss(worker.pid)
        with self._lock:
            self._park(worker, rss)

    def _park(self, worker: Worker, rss: int) -> None:
        """Keep ``worker`` idle and warm (under the lock)."""
        self._workers[worker.key] = worker  # type: ignore[attr-defined]
        self._rss[worker.key] = rss  # type: ignore[attr-defined]
        self._largest[worker.interpreter] = max(rss, self._largest.get(worker.interpreter, 0))

    def close(self) -> None:
        # A worker still importing its framework is killed, not waited for (a caller that
        # failed before its first run closes the pool at once).
        with self._lock:
            booting = list(self._booting.values())
        for worker in booting:
            worker.kill()
        self._wait_started()
        with self._lock:
            workers, self._workers = list(self._workers.values()), OrderedDict()
            self._rss.clear()
        for worker in workers:
            worker.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: WorkerPool | None = None


def default_pool() -> WorkerPool:
    """The process-wide pool, closed at interpreter exit."""
    global _default
    if _default is None:
        _default = WorkerPool(max_workers=4)
        atexit.register(_default.close)
    return _default


def worker_environment(
    thread_env: dict[str, str],
    extra: dict[str, str] | None = None,
    interpreter: str | None = None,
) -> dict[str, str]:
    """The worker's environment: ours, dltune importable, thread variables, quiet frameworks.

    Another interpreter (the legacy runtime's) finds dltune through its own ``.pth`` file and
    must not get this one's ``PYTHONPATH``: where dltune is installed in site-packages, that
    folder would bring numpy 2 along.
    """
    env = dict(os.environ)
    # Changes with every test: kept, it would make each test start (and import) a new worker.
    env.pop("PYTEST_CURRENT_TEST", None)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "MXNET_CPU_WORKER_NTHREADS",
                "DLTUNE_CPU_CORES"):
        env.pop(var, None)
    if interpreter is None or os.path.realpath(interpreter) == os.path.realpath(sys.executable):
        root = package_root()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    else:
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["KERAS_BACKEND"] = "tensorflow"
    env.update(thread_env)
    env.update(extra or {})
    return env


def main_interpreter() -> str:
    return sys.executable
