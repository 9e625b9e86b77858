"""The backends' registry: what dltune knows about each backend without importing it (a
domain fact: names, install hints, capabilities)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

__all__ = ["BACKENDS", "BackendInfo", "available_backend_names", "default_framework_names",
           "framework_label", "is_retired"]


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
    # No release since the framework's last (MXNet 1.9.1, Theano 1.0.5): measured for the
    # comparison, never a default candidate, labelled "retired" wherever listed.
    retired: bool = False
    # Chosen when no frameworks are named: the maintained deep-learning frameworks. PyTensor
    # (Theano's maintained continuation) and the numpy reference are measured when named.
    default: bool = False
    # The revision of what a run of this backend measures, raised when a figure's meaning
    # changes; each record keeps the one it ran at (Measurement.backend_revision). 1: TensorFlow,
    # MXNet and PyTensor train on the worker's arrays instead of a copy (peak memory is lower).
    revision: int = 0


BACKENDS: dict[str, BackendInfo] = {
    b.name: b
    for b in (
        BackendInfo("torch", "dltune.backends._torch", "torch", "torch", "main",
                    "pip install 'dltune[torch]'", True, default=True),
        BackendInfo("tensorflow", "dltune.backends._tensorflow", "tensorflow", "tensorflow-cpu",
                    "main", "pip install 'dltune[tensorflow]'", True, copies_for_layout=True,
                    default=True, revision=1),
        BackendInfo("mxnet", "dltune.backends._mxnet", "mxnet", "mxnet", "legacy",
                    "dltune env install legacy", False, retired=True, revision=1),
        BackendInfo("theano", "dltune.backends._theano", "theano", "theano", "legacy",
                    "dltune env install legacy", False, retired=True),
        BackendInfo("pytensor", "dltune.backends._pytensor", "pytensor", "pytensor", "main",
                    "pip install 'dltune[pytensor]'", False, revision=1),
        BackendInfo("jax", "dltune.backends._jax", "jax", "jax", "main",
                    "pip install 'dltune[jax]'", True),
        BackendInfo("numpy", "dltune.backends._numpy", "numpy", "numpy", "main",
                    "pip install numpy", False, benchmarkable=True),
    )
}


def available_backend_names() -> list[str]:
    """All backend names dltune knows (whether or not installed here)."""
    return list(BACKENDS)


def is_retired(name: str) -> bool:
    """Whether ``name`` is a registered retired framework (listed with the label "retired"); a
    name the registry does not know, from records of another dltune, is not."""
    return name in BACKENDS and BACKENDS[name].retired


def default_framework_names(installed: bool = True) -> list[str]:
    """The frameworks used when none are named: the maintained defaults installed here (with
    ``installed`` False, whether or not installed: for a machine described, not this one)."""
    return [b.name for b in BACKENDS.values()
            if b.default and (not installed or importlib.util.find_spec(b.framework) is not None)]


def framework_label(name: str) -> str:
    """``name``, with " (retired)" for a retired framework (:func:`is_retired`): how every
    listing names it."""
    return f"{name} (retired)" if is_retired(name) else name
