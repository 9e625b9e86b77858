"""Thread and parallel-library settings of a run, and the environment that applies them."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from dltune._validation import check_int

__all__ = ["ThreadConfig", "thread_grid", "usable_cores"]


def usable_cores() -> int:
    """How many CPUs this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def thread_grid(cores: int) -> tuple[int, ...]:
    """The thread counts measured and proposed on a machine with ``cores`` usable cores: 1, 2,
    4, ... up to ``cores``, and ``cores`` itself where it is not a power of two. The one rule
    for every grid of thread counts (calibration, knowledge-base slices, candidates), so that
    the counts recommend proposes are the counts measured."""
    check_int("cores", cores, 1, 1 << 20)
    counts = [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]
    return tuple(counts) if counts[-1] == cores else (*counts, cores)


@dataclass(frozen=True)
class ThreadConfig:
    """Threads a framework may use. ``None`` leaves the framework's own default.

    Attributes:
        intra_op: threads inside one operator (``torch.set_num_threads``, TF intra-op pool,
            XLA's CPU pool for JAX through ``PJRT_NPROC``).
        inter_op: threads running independent operators concurrently.
        blas: OpenMP / MKL / OpenBLAS thread count (``OMP_NUM_THREADS`` and friends); defaults
            to ``intra_op`` when that is set.
        cores: restrict the worker to the first ``cores`` usable CPUs (CPU affinity): a
            hardware target of its own.
    """

    intra_op: int | None = None
    inter_op: int | None = None
    blas: int | None = None
    cores: int | None = None

    def validate(self, max_cores: int | None = None) -> ThreadConfig:
        """Check every count against the usable cores; return ``self``."""
        limit = max_cores if max_cores is not None else usable_cores()
        for name in ("intra_op", "inter_op", "blas", "cores"):
            value = getattr(self, name)
            if value is not None:
                check_int(f"threads.{name}" if name != "intra_op" else "threads", value, 1, limit)
        return self

    @classmethod
    def uniform(cls, n: int | None) -> ThreadConfig:
        """``n`` threads everywhere (intra-op, BLAS) and one inter-op thread; None: defaults."""
        if n is None:
            return cls()
        return cls(intra_op=n, inter_op=1, blas=n)

    @property
    def effective_blas(self) -> int | None:
        return self.blas if self.blas is not None else self.intra_op

    def environment(self) -> dict[str, str]:
        """Variables the worker must see before the framework is imported."""
        env: dict[str, str] = {}
        blas = self.effective_blas
        if blas is not None:
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                env[var] = str(blas)
        if self.intra_op is not None:
            env["TF_NUM_INTRAOP_THREADS"] = str(self.intra_op)
        if self.inter_op is not None:
            env["TF_NUM_INTEROP_THREADS"] = str(self.inter_op)
            # MXNet's engine worker pool runs independent operators concurrently: inter-op.
            env["MXNET_CPU_WORKER_NTHREADS"] = str(self.inter_op)
        if self.cores is not None:
            env["DLTUNE_CPU_CORES"] = str(self.cores)
        return env

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ThreadConfig:
        return cls(**(data or {}))
