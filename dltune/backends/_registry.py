"""The backends' registry: what dltune knows about each backend without importing it (a
domain fact: names, install hints, capabilities)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKENDS", "BackendInfo", "available_backend_names"]


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
