"""Isolated worker processes that run trainings with their thread settings applied first."""

from __future__ import annotations

from dltune.runtime._pool import (
    Worker,
    WorkerFailure,
    WorkerPool,
    default_pool,
    package_root,
    worker_environment,
)

__all__ = [
    "Worker",
    "WorkerFailure",
    "WorkerPool",
    "default_pool",
    "package_root",
    "worker_environment",
]
