"""The worker process: runs trainings for the parent, one at a time, over a line protocol.

Started as ``python -m dltune.runtime._worker`` with the thread variables already in its
environment. Imports only the standard library, numpy and psutil before the framework, so the
same file serves the legacy runtime's interpreter.

Protocol: one JSON object per line. The parent writes requests to stdin; the worker writes
events to the file descriptor that was stdout when it started (stdout itself is pointed at
stderr so that framework chatter cannot corrupt the channel):
``ready``; then per request ``train_begin`` / ``train_end`` / ``epoch`` events and one
``result``. With ``epoch_ack`` the worker waits after each ``epoch`` for ``{"continue": bool}``.
Op ``setup`` imports the framework and loads the data ahead of the first run (a pool starts a
worker before its parent needs it); that run still reports the import time.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
import traceback
from typing import Any


def _apply_affinity() -> None:
    cores = os.environ.get("DLTUNE_CPU_CORES")
    if cores and hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, allowed[: int(cores)])


_apply_affinity()

import numpy as np  # noqa: E402

_channel = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

_set_up: dict[str, float] = {}
# Import time paid but not yet reported: the next run of the backend reports it.
_unreported: dict[str, float] = {}
_data_cache: dict[str, tuple[np.ndarray, ...]] = {}


def _send(message: dict[str, Any]) -> None:
    _channel.write(json.dumps(message, default=float) + "\n")
    _channel.flush()


def _load_arrays(folder: str, fingerprint: str) -> tuple[np.ndarray, ...]:
    if fingerprint not in _data_cache:
        from dltune.backends._common import load_npy

        _data_cache.clear()
        # Aligned, so that a framework can share the arrays rather than copy them.
        _data_cache[fingerprint] = tuple(load_npy(os.path.join(folder, f"{part}.npy"))
                                         for part in ("x_train", "y_train", "x_test", "y_test"))
    return _data_cache[fingerprint]


def _inject_fault(kind: str | None) -> None:
    """Test-only faults, honoured only when the parent enabled them in the environment."""
    if not kind or os.environ.get("DLTUNE_ENABLE_FAULTS") != "1":
        return
    if kind == "raise":
        raise RuntimeError("fault injected by test hook")
    if kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "exit":
        os._exit(3)
    if kind == "hang":
        while True:
            time.sleep(1)


def _thread_report(trainer_cls: Any) -> dict[str, Any]:
    report = dict(trainer_cls.thread_info())
    try:
        import psutil

        report["os_threads"] = psutil.Process().num_threads()
    except ImportError:
        pass
    if hasattr(os, "sched_getaffinity"):
        report["cores"] = len(os.sched_getaffinity(0))
    report["env"] = {
        k: os.environ[k]
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                  "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "MXNET_CPU_WORKER_NTHREADS")
        if k in os.environ
    }
    return report


def _trainer_class(request: dict[str, Any]) -> tuple[Any, float]:
    """The backend's Trainer class, set up on first use; and its import time if not reported yet."""
    from dltune.backends._loader import load_trainer_class

    backend = request["backend"]
    if backend not in _set_up:
        t0 = time.perf_counter()
        trainer_cls = load_trainer_class(backend)
        trainer_cls.setup(request.get("threads") or {})
        _set_up[backend] = _unreported[backend] = time.perf_counter() - t0
    return load_trainer_class(backend), _unreported.pop(backend, 0.0)


def _setup(request: dict[str, Any]) -> dict[str, Any]:
    """Op ``setup``: import and set up the backend, load the data; the next run reports the
    import time."""
    _, import_time = _trainer_class(request)
    _unreported[request["backend"]] = import_time
    if request.get("data_dir"):
        _load_arrays(request["data_dir"], request["fingerprint"])
    return {"import_time_s": import_time}


def _steps(request: dict[str, Any]) -> dict[str, Any]:
    """Op ``steps`` (conformance checks): train on the given batches, save the state to ``out``."""
    from dltune.backends._base import run_steps
    from dltune.models._spec import ModelSpec

    trainer_cls, _ = _trainer_class(request)
    data = _load_arrays(request["data_dir"], request["fingerprint"])
    state = run_steps(trainer_cls, ModelSpec.from_dict(request["spec"]), request["config"], data,
                      request["batches"], np.asarray(request["lrs"], dtype=np.float32))
    params = state.pop("params")
    np.savez(request["out"], predictions=state.pop("predictions"),
             **{f"p{i}": p for i, p in enumerate(params)})
    return {**state, "n_params": len(params), "threads": _thread_report(trainer_cls)}


def _run(request: dict[str, Any]) -> dict[str, Any]:
    from dltune.backends._base import run_training
    from dltune.models._spec import ModelSpec

    trainer_cls, import_time = _trainer_class(request)
    _inject_fault(request.get("fault"))
    spec = ModelSpec.from_dict(request["spec"])
    data = _load_arrays(request["data_dir"], request["fingerprint"])
    ack = bool(request.get("epoch_ack"))

    def on_event(kind: str, payload: dict[str, Any]) -> bool:
        _send({"event": kind, **payload})
        if kind == "epoch" and ack:
            reply = json.loads(sys.stdin.readline() or "{}")
            return bool(reply.get("continue", True))
        return True

    metrics = run_training(trainer_cls, spec, request["config"], data, on_event)
    metrics["import_time_s"] = import_time
    metrics["threads"] = _thread_report(trainer_cls)
    metrics["versions"] = {
        "framework": trainer_cls.framework_version(),
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    return metrics


def main() -> None:
    _send({"event": "ready", "pid": os.getpid(), "python": sys.executable})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            handler = {"steps": _steps, "setup": _setup}.get(request.get("op"), _run)
            _send({"event": "result", "ok": True, "result": handler(request)})
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
            _send(
                {
                    "event": "result",
                    "ok": False,
                    "error": {
                        "type": type(exc).__name__,
                        "message": str(exc),
                        "traceback": traceback.format_exc(limit=20),
                    },
                }
            )


if __name__ == "__main__":
    main()
