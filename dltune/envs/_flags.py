"""Start-up settings of the legacy frameworks, as environment variables for their worker.

Both frameworks read these once, on import, so the worker's environment must carry them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from dltune._paths import cache_dir
from dltune._validation import check_bool, check_choice, check_int

if TYPE_CHECKING:
    from dltune.envs._legacy import LegacyRuntime

__all__ = ["MXNET_ENGINES", "mxnet_env", "pytensor_flags", "theano_env", "theano_flags"]

#: MXNet's execution engines: the default runs operators on a pool of
#: ``MXNET_CPU_WORKER_NTHREADS`` engine threads; NaiveEngine runs them one at a time, in order.
MXNET_ENGINES = ("ThreadedEnginePerDevice", "ThreadedEngine", "NaiveEngine")
_MAX_THREADS = 1024


def _escape(value: str) -> str:
    """Quote a value for THEANO_FLAGS, which Theano splits on commas with posix shlex rules."""
    for char in ("\\", ",", "'", '"'):
        value = value.replace(char, "\\" + char)
    return value


def _blas_ldflags(blas_dir: Path | None) -> str:
    """Linker flags for the OpenBLAS in ``blas_dir``, else "" (Theano's numpy-based fallback).

    Theano 1.0.5 finds no BLAS by itself (its probe reads ``blas_opt_info`` from numpy's
    distutils config, which numpy 1.23 no longer has), and an unset flag makes its import fail.
    """
    if blas_dir is None or any(c.isspace() for c in str(blas_dir)):
        # Theano splits ldflags on whitespace: a path with a space cannot be passed.
        return ""
    folder = str(blas_dir)
    return f"-L{folder} -lopenblas -Wl,-rpath,{folder}"


def theano_flags(
    cache_root: str | os.PathLike[str] | None = None,
    *,
    runtime: LegacyRuntime | None = None,
    openmp: bool = False,
) -> str:
    """The ``THEANO_FLAGS`` value for a Theano worker.

    Args:
        cache_root: folder holding the compile cache ``theano/`` (default: ``cache_dir()``).
        runtime: the legacy runtime whose OpenBLAS Theano links (default: the default one);
            without one Theano uses its numpy-based BLAS fallback.
        openmp: let Theano's elementwise and convolution ops use OpenMP
            (``OMP_NUM_THREADS`` threads). Changing it recompiles those ops once.
    """
    from dltune.envs._legacy import LegacyRuntime

    openmp = check_bool("openmp", openmp)
    root = Path(cache_root).expanduser() if cache_root is not None else cache_dir()
    runtime = runtime if runtime is not None else LegacyRuntime()
    # Theano 1.0.5 spells sections with a dot: "blas__ldflags" is PyTensor's form and is ignored.
    flags = {
        "blas.ldflags": _blas_ldflags(runtime.blas_dir),
        "base_compiledir": str(root / "theano"),
        "floatX": "float32",
        "device": "cpu",
        "openmp": str(openmp),
    }
    return ",".join(f"{key}={_escape(value)}" for key, value in flags.items())


def pytensor_flags(cache_root: str | os.PathLike[str] | None = None) -> str:
    """The ``PYTENSOR_FLAGS`` value for a PyTensor worker.

    The compile cache goes under ``cache_root`` (default: ``cache_dir()``) so that it is
    paid once per machine. ``mode=CVM`` (C ops run by the C virtual machine) replaces
    PyTensor 3's default Numba mode, whose JIT took over 3 CPU-minutes to compile a LeNet
    training step here (the C modules take about a minute once, then load from the cache).
    ``blas__ldflags`` is empty on purpose: a pip-installed PyTensor finds no linkable BLAS
    (numpy's and scipy's wheels rename their symbols), and without one its C matrix products
    call numpy's, i.e. numpy's OpenBLAS.
    """
    root = Path(cache_root).expanduser() if cache_root is not None else cache_dir()
    flags = {
        "base_compiledir": str(root / "pytensor"),
        "floatX": "float32",
        "device": "cpu",
        "mode": "CVM",
        "blas__ldflags": "",
    }
    return ",".join(f"{key}={_escape(value)}" for key, value in flags.items())


def _thread_vars(threads: int) -> dict[str, str]:
    n = str(check_int("threads", threads, 1, _MAX_THREADS))
    return {"OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n, "MKL_NUM_THREADS": n}


def theano_env(
    threads: int | None = None,
    cache_root: str | os.PathLike[str] | None = None,
    *,
    runtime: LegacyRuntime | None = None,
    openmp: bool = False,
) -> dict[str, str]:
    """Environment variables for a Theano worker: ``THEANO_FLAGS`` and, if given, thread counts.

    ``threads`` sets the OpenMP / OpenBLAS / MKL thread counts (OpenBLAS serves Theano's
    matrix products and convolutions; OpenMP only its ops compiled with ``openmp=True``).
    """
    env = {"THEANO_FLAGS": theano_flags(cache_root, runtime=runtime, openmp=openmp)}
    if threads is not None:
        env.update(_thread_vars(threads))
    return env


def mxnet_env(
    threads: int | None = None,
    *,
    worker_threads: int | None = None,
    engine: str = "ThreadedEnginePerDevice",
) -> dict[str, str]:
    """Environment variables for an MXNet worker.

    Args:
        threads: OpenMP threads per operator (intra-op), also OpenBLAS / MKL threads.
            Unset, MXNet uses half the processors it sees.
        worker_threads: engine threads running independent operators concurrently
            (``MXNET_CPU_WORKER_NTHREADS``, inter-op; MXNet's default is 1).
        engine: one of :data:`MXNET_ENGINES`.
    """
    env = {"MXNET_ENGINE_TYPE": check_choice("engine", engine, MXNET_ENGINES)}
    if threads is not None:
        env.update(_thread_vars(threads))
    if worker_threads is not None:
        n = check_int("worker_threads", worker_threads, 1, _MAX_THREADS)
        env["MXNET_CPU_WORKER_NTHREADS"] = str(n)
    return env
