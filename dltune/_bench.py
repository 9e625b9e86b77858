"""``dltune.benchmark``: train configurations in isolated, monitored workers; return records."""

from __future__ import annotations

import importlib.util
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dltune._errors import BackendUnavailableError, ParameterError, RunFailedError
from dltune._interval import Interval
from dltune._log import Progress
from dltune._storage_url import resolve_storage
from dltune._workload import Workload, as_workload
from dltune.backends._registry import BACKENDS
from dltune.config import TrainConfig, usable_cores
from dltune.measure._record import Measurement, now_iso
from dltune.measure._store import BENCH_PREFIX, StudyStore

__all__ = ["NOISY_TIMING_CV", "benchmark", "check_device", "interpreter_for", "mean_interval",
           "measure", "measure_cell", "timing_cv", "worker_extra_env", "worker_key"]

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


def worker_key(config: TrainConfig) -> tuple[str, dict[str, str]]:
    """The interpreter and environment of the worker that runs ``config`` (a pool's key)."""
    from dltune.runtime import worker_environment

    interpreter = interpreter_for(config.framework)
    return interpreter, worker_environment(config.threads.environment(), worker_extra_env(config.framework),
                                           interpreter)


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
    from dltune.runtime import WorkerFailure, default_pool
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
    interpreter, env = worker_key(config)
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

# A cell (one configuration's runs) whose training times vary more than this (standard
# deviation / mean) is measured once more and, if still above, flagged ``timing_noisy``: its
# time is the machine's noise as much as the configuration's.
NOISY_TIMING_CV = 0.10

# Student's t, 97.5 % quantile, by degrees of freedom: a 95 % interval of a mean of few seeds.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    """Mean, standard deviation and a 95 % interval of the mean (Student's t) of ``values``."""
    n = len(values)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if n > 1 else 0.0
    df = max(n - 1, 1)
    # Past the table, the Cornish-Fisher expansion of t around the normal 1.96 (error < 0.01).
    t = _T975[df - 1] if df <= len(_T975) else 1.96 + 2.373 / df + 2.82 / df**2
    half = t * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "interval": list(Interval(mean, mean - half, mean + half))}


def timing_cv(runs: Sequence[Measurement]) -> float | None:
    """Coefficient of variation of the runs' training times; None with fewer than two."""
    times = [r.metrics["train_time_s"] for r in runs if r.ok and r.metrics.get("train_time_s")]
    if len(times) < 2:
        return None
    return statistics.stdev(times) / statistics.fmean(times)


def _combine(runs: list[Measurement]) -> Measurement:
    """Repeats of one configuration as one record: medians, with each run's figures kept."""
    ok = [r for r in runs if r.ok]
    if not ok:
        return runs[-1]
    base = ok[len(ok) // 2] if len(ok) % 2 else ok[0]
    metrics = dict(base.metrics)
    metrics["repeats"] = [{k: r.metrics.get(k) for k in _HEADLINE} for r in ok]
    seeds = sorted({r.config.get("seed") for r in ok})
    if len(seeds) > 1:  # each seed's median, then their mean, spread and interval
        per_seed = {key: [statistics.median(r.metrics[key] for r in ok if r.config.get("seed") == s)
                          for s in seeds]
                    for key in ("test_accuracy", "train_time_s")}
        metrics["seeds"] = {"seeds": seeds, **{k: mean_interval(v) for k, v in per_seed.items()}}
        for entry, r in zip(metrics["repeats"], ok, strict=True):
            entry["seed"] = r.config.get("seed")
        base.config = runs[0].config  # the configuration asked for: its first seed
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


def measure_cell(
    workload: Workload,
    config: TrainConfig,
    *,
    seeds: int = 1,
    repeats: int = 1,
    pool=None,
    fault: str | None = None,
    on_run: Callable[[], None] | None = None,
) -> Measurement:
    """One configuration's cell: ``seeds`` seeds (``config.seed``, +1, ...) x ``repeats`` runs
    each, as one record (:func:`_combine`; with several seeds ``metrics["seeds"]`` holds the
    mean, spread and interval of accuracy and training time). A cell whose timing spread is
    above :data:`NOISY_TIMING_CV` is measured once more; the steadier measurement is kept, and
    flagged ``timing_noisy`` if still above."""

    def measure_all() -> list[Measurement]:
        nonlocal fault
        runs = []
        for k in range(seeds):
            seeded = config.replace(seed=config.seed + k) if k else config
            for _ in range(repeats):
                runs.append(measure(workload, seeded, pool=pool, fault=fault))
                fault = None
                if on_run is not None:
                    on_run()
        return runs

    runs = measure_all()
    cv = timing_cv(runs)
    rerun = cv is not None and cv > NOISY_TIMING_CV
    if rerun:  # the steadier of the two measurements: the other caught the machine busy
        again = measure_all()
        cv_again = timing_cv(again)
        if cv_again is not None and cv_again < cv:
            runs, cv = again, cv_again
    record = _combine(runs)
    if cv is not None and record.ok:
        record.metrics.update(timing_cv=cv, timing_rerun=rerun, timing_noisy=cv > NOISY_TIMING_CV)
    return record


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
    seeds: int = 1,
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
        repeats: timing repeats per configuration and seed, all with the same seed (they
            measure timing noise only); the record holds medians, min and max.
        seeds: seeds per configuration (``config.seed``, +1, ...): the record's
            ``metrics["seeds"]`` holds the mean, standard deviation and 95 % interval of the
            accuracy and the training time over them (seed noise). A configuration whose
            training times vary by more than :data:`NOISY_TIMING_CV` (coefficient of
            variation) is measured once more; ``metrics["timing_noisy"]`` says if still so.
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
    check_int("seeds", seeds, 1, 1000)
    wl = as_workload(workload, model)
    configs = _as_configs(configs)
    for config in configs:
        config.validate(list(BACKENDS))
        check_device(config)
        interpreter_for(config.framework)
    store = _bench_store(storage, wl.name)  # before any run: a bad storage fails now
    bar = None
    if progress is True:
        bar = Progress(len(configs) * repeats * seeds, "bench", "run")
    records = []
    for config in configs:
        started = time.perf_counter()
        if bar is not None:
            bar.set_postfix_str(config.framework)
        record = measure_cell(wl, config, seeds=seeds, repeats=repeats, pool=pool, fault=fault,
                              on_run=None if bar is None else bar.update)
        fault = None
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
