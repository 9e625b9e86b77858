"""``dltune.benchmark``: train configurations in isolated, monitored workers; return records."""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from dltune._errors import BackendUnavailableError, ParameterError, RunFailedError
from dltune._log import Progress
from dltune._storage_url import resolve_storage
from dltune._workload import Workload, as_workload
from dltune.backends._registry import BACKENDS
from dltune.config import TrainConfig, usable_cores
from dltune.measure._record import Measurement, now_iso
from dltune.measure._store import BENCH_PREFIX, StudyStore

__all__ = ["benchmark", "check_device", "measure", "interpreter_for", "worker_extra_env"]

_hardware_cache: dict[int | None, dict[str, Any]] = {}

def hardware_record(cores: int | None) -> dict[str, Any]:
    """The ``hardware`` part of a record for a run restricted to ``cores`` CPUs."""
    if cores not in _hardware_cache:
        from dltune.hardware import Hardware

        hw = Hardware.detect(cores=cores)
        _hardware_cache[cores] = {**hw.to_dict(), "fingerprint": hw.fingerprint, "target": hw.target}
    return _hardware_cache[cores]


def interpreter_for(framework: str) -> str:
    """The Python that runs ``framework``'s worker; raises if the framework is not installed."""
    info = BACKENDS[framework]
    if info.location == "legacy":
        from dltune.envs import runtime_interpreter

        return runtime_interpreter(framework)
    if importlib.util.find_spec(info.framework) is None:
        raise BackendUnavailableError(
            f"Backend '{framework}' needs {info.distribution}, which is not installed. "
            f"Install it with: {info.install_hint}"
        )
    return sys.executable


def worker_extra_env(framework: str) -> dict[str, str]:
    """Framework-specific start-up variables (Theano's flags, MXNet's engine).

    The framework's name is one of them, so each framework gets workers of its own: a torch
    run never shares a process (its resident memory, its thread pools) with TensorFlow.
    """
    env: dict[str, str] = {"DLTUNE_WORKER_FRAMEWORK": framework}
    if framework == "theano":
        from dltune.envs import theano_flags

        env["THEANO_FLAGS"] = theano_flags()
    elif framework == "mxnet":
        from dltune.envs import mxnet_env

        env.update(mxnet_env())
    return env


def measure(
    workload: Workload,
    config: TrainConfig,
    *,
    pool=None,
    on_epoch: Callable[[dict[str, Any]], bool | None] | None = None,
    fault: str | None = None,
) -> Measurement:
    """Train ``config`` on ``workload`` once in a worker; failures become failed records."""
    from dltune.measure._sampler import ResourceSampler
    from dltune.runtime import WorkerFailure, default_pool, worker_environment
    from dltune.runtime._arrays import export_arrays

    pool = pool or default_pool()
    started = now_iso()
    cores = config.threads.cores
    record = Measurement(
        status="failed",
        workload=workload.to_record(),
        config=config.to_dict(),
        hardware=hardware_record(cores),
        started_at=started,
    )
    interpreter = interpreter_for(config.framework)
    env = worker_environment(config.threads.environment(), worker_extra_env(config.framework), interpreter)
    if fault:
        # Test-only: the worker honours a fault request only when the parent enabled them.
        if os.environ.get("DLTUNE_ENABLE_FAULTS") != "1":
            raise ParameterError(
                "The 'fault' parameter is a test hook, honoured only with DLTUNE_ENABLE_FAULTS=1. "
                f"Got {fault!r} without it."
            )
        env["DLTUNE_ENABLE_FAULTS"] = "1"
    request = {
        "backend": config.framework,
        "spec": workload.model.to_dict(),
        "config": config.to_dict(),
        "threads": config.threads.to_dict(),
        "data_dir": str(export_arrays(workload.dataset)),
        "fingerprint": workload.dataset.fingerprint(),
        "epoch_ack": on_epoch is not None,
        "fault": fault,
    }
    worker = None
    healthy = False
    try:
        worker = pool.acquire(interpreter, env)
        # The machine's load as the run starts (others' work): a report flags runs measured
        # under a load above the usable cores.
        load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        with ResourceSampler(worker.pid) as sampler:

            def on_event(message: dict[str, Any]) -> bool | None:
                kind = message.get("event")
                if kind in ("train_begin", "train_end"):
                    sampler.set_training(kind == "train_begin")
                elif kind == "epoch" and on_epoch is not None:
                    return on_epoch(message)
                return None

            result = worker.run(request, config.timeout_s, on_event)
        healthy = True
        record.versions = result.pop("versions")
        n_cores = cores or usable_cores()
        result.update(sampler.summary(n_cores))
        result["cpu_fraction_mean"] = result["cpu_percent_mean"] / (100.0 * n_cores)
        result["load_1m"] = None if load_1m is None else round(load_1m, 2)
        record.metrics = result
        record.status = "ok"
    except WorkerFailure as exc:
        record.error = {
            "kind": exc.kind,
            "message": exc.reason,
            "stderr_tail": exc.stderr_tail[-1500:],
            "traceback": exc.traceback[-3000:],
        }
    finally:
        if worker is not None:
            pool.release(worker, healthy)
    record.finished_at = now_iso()
    return record


_HEADLINE = ("train_time_s", "test_time_s", "test_accuracy", "cpu_percent_mean",
             "cpu_percent_p95", "cpu_fraction_mean", "peak_rss_mb", "compile_time_s")


def _combine(runs: list[Measurement]) -> Measurement:
    """Repeats of one configuration as one record: medians, with each run's figures kept."""
    ok = [r for r in runs if r.ok]
    if not ok:
        return runs[-1]
    base = ok[len(ok) // 2] if len(ok) % 2 else ok[0]
    metrics = dict(base.metrics)
    metrics["repeats"] = [{k: r.metrics.get(k) for k in _HEADLINE} for r in ok]
    for key in _HEADLINE:
        values = [r.metrics[key] for r in ok if r.metrics.get(key) is not None]
        if values:
            metrics[key] = statistics.median(values)
            metrics[f"{key}_min"] = min(values)
            metrics[f"{key}_max"] = max(values)
    metrics["repeats_failed"] = len(runs) - len(ok)
    base.metrics = metrics
    base.started_at = runs[0].started_at
    return base


def check_device(config: TrainConfig) -> None:
    """Refuse a GPU run of a backend that declares no GPU support (``BackendInfo.supports_gpu``)
    before any run: its worker would train nothing and fail."""
    if config.device != "cpu" and not BACKENDS[config.framework].supports_gpu:
        able = ", ".join(name for name, info in BACKENDS.items() if info.supports_gpu)
        raise ParameterError(
            f"The 'device' parameter must be 'cpu' for framework {config.framework!r} (only {able} "
            f"run on {config.device!r}). Got {config.device!r} instead."
        )


def _as_configs(configs: Any) -> list[TrainConfig]:
    """``configs`` as a list of :class:`TrainConfig`: one, a dict of its fields, or an iterable of
    either (``Recommendation.config`` is one; ``TrainConfig.to_dict()`` gives the dict)."""
    from dltune._validation import as_list_of

    out = as_list_of("configs", configs, TrainConfig, TrainConfig.from_dict)
    if not out:
        raise ParameterError("The 'configs' parameter must hold at least one TrainConfig. Got none.")
    return out


def _bench_store(storage: str | None, workload_name: str):
    """Where ``benchmark`` stores its records (a ``StudyStore`` of ``dltune-bench:<workload>``),
    or None."""
    url = resolve_storage(storage)
    return None if url is None else StudyStore(url, workload_name, prefix=BENCH_PREFIX)


def benchmark(
    workload: Any,
    configs: TrainConfig | dict[str, Any] | Iterable[TrainConfig | dict[str, Any]],
    *,
    repeats: int = 1,
    model: str | None = None,
    progress: bool | Callable[[Measurement], None] = False,
    raise_on_failure: bool = False,
    pool=None,
    fault: str | None = None,
    storage: str | None = "default",
) -> list[Measurement]:
    """Measure each configuration on the workload; one record per configuration.

    Args:
        workload: a :class:`Workload`, a data set name, ``(x_train, y_train, x_test, y_test)``
            or ``(x, y)`` (a stratified 20 % held out: :func:`dltune.data.holdout_split`).
        configs: one or more :class:`TrainConfig` (or dicts of their fields, as
            ``TrainConfig.to_dict()`` writes them).
        repeats: runs per configuration; the record holds medians, min and max.
        model: model preset when ``workload`` is a name or arrays.
        progress: True for progress on stderr (:class:`dltune._log.Progress`), or a callable
            given each record.
        raise_on_failure: raise :class:`RunFailedError` instead of returning failed records.
        fault: test-only fault to inject in the first run (needs ``DLTUNE_ENABLE_FAULTS=1``).
        storage: an Optuna storage URL to store each record in as it is measured, in the study
            ``dltune-bench:<workload>``, where ``recommend`` fits on it: ``"default"`` (the
            default) is ``$DLTUNE_STORAGE``, else ``sqlite:///dltune.db`` in the working
            folder, as for every command and function; None stores nothing.
    """
    from dltune._validation import check_int

    check_int("repeats", repeats, 1, 1000)
    wl = as_workload(workload, model)
    configs = _as_configs(configs)
    for config in configs:
        config.validate(list(BACKENDS))
        check_device(config)
        interpreter_for(config.framework)
    store = _bench_store(storage, wl.name)  # before any run: a bad storage fails now
    bar = None
    if progress is True:
        bar = Progress(len(configs) * repeats, "bench", "run")
    records = []
    for config in configs:
        runs = []
        started = time.perf_counter()
        for _ in range(repeats):
            if bar is not None:
                bar.set_postfix_str(config.framework)
            runs.append(measure(wl, config, pool=pool, fault=fault))
            fault = None
            if bar is not None:
                bar.update()
        record = _combine(runs)
        if store is not None:  # failed runs too: the dashboard shows why (recommend skips them)
            store.add(record, record.id, ["bench"], config.preset_name or config.framework,
                      time.perf_counter() - started)
        if raise_on_failure and not record.ok:
            raise RunFailedError(f"{config.framework}: {record.error['message']}")
        if callable(progress):
            progress(record)
        records.append(record)
    if bar is not None:
        bar.close()
    return records
