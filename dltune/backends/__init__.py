"""Trainer backends: one module per framework, all implementing :class:`Trainer`.

Importing this package imports no framework; a backend module imports its framework inside
itself and is only ever loaded in a worker process. Worker-side modules here import only the
standard library, numpy and psutil besides their framework, so they also run in the legacy
runtime's interpreter.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from dltune._errors import BackendUnavailableError

__all__ = ["BACKENDS", "BackendInfo", "available_backend_names", "load_trainer_class"]


@dataclass(frozen=True)
class BackendInfo:
    """What dltune knows about a backend without importing it."""

    name: str
    module: str
    framework: str
    distribution: str
    location: str
    install_hint: str
    supports_gpu: bool
    benchmarkable: bool = True
    # Holds one NHWC copy of a data set of more than one channel for a model that convolves
    # (dltune holds NCHW) beside the worker's arrays: a size the memory surrogate adds as known.
    copies_for_layout: bool = False


BACKENDS: dict[str, BackendInfo] = {
    b.name: b
    for b in (
        BackendInfo("torch", "dltune.backends._torch", "torch", "torch", "main",
                    "pip install 'dltune[torch]'", True),
        BackendInfo("tensorflow", "dltune.backends._tensorflow", "tensorflow", "tensorflow-cpu",
                    "main", "pip install 'dltune[tensorflow]'", True, copies_for_layout=True),
        BackendInfo("mxnet", "dltune.backends._mxnet", "mxnet", "mxnet", "legacy",
                    "dltune env install legacy", False),
        BackendInfo("theano", "dltune.backends._theano", "theano", "theano", "legacy",
                    "dltune env install legacy", False),
        BackendInfo("pytensor", "dltune.backends._pytensor", "pytensor", "pytensor", "main",
                    "pip install 'dltune[pytensor]'", False),
        BackendInfo("numpy", "dltune.backends._numpy", "numpy", "numpy", "main",
                    "pip install numpy", False, benchmarkable=True),
    )
}


def available_backend_names() -> list[str]:
    """All backend names dltune knows (whether or not installed here)."""
    return list(BACKENDS)


def load_trainer_class(name: str):
    """Import backend ``name``'s module and return its Trainer class (worker side only)."""
    info = BACKENDS[name]
    try:
        module = importlib.import_module(info.module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == info.framework:
            raise BackendUnavailableError(
                f"Backend '{name}' needs {info.distribution}, which is not installed in "
                f"this interpreter. Install it with: {info.install_hint}"
            ) from exc
        raise
    return module.TRAINER
