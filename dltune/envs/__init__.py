"""Where each backend runs: dltune's own environment, or the legacy runtime it manages.

MXNet 1.9.1 and Theano 1.0.5 need numpy < 1.24, so they run in a virtual environment dltune
makes (``dltune env install legacy``); this package makes it, reports on every backend
(``dltune env status``), and builds the legacy frameworks' start-up settings. Importing it
imports only the standard library.
"""

from __future__ import annotations

from dltune.envs._flags import MXNET_ENGINES, mxnet_env, pytensor_flags, theano_env, theano_flags
from dltune.envs._legacy import LEGACY_PINS, LegacyRuntime, ProbeResult, clean_environment
from dltune.envs._status import (
    BACKEND_NAMES,
    BackendStatus,
    backend_status,
    install_command,
    runtime_interpreter,
    status_command,
)

__all__ = [
    "BACKEND_NAMES",
    "BackendStatus",
    "LEGACY_PINS",
    "LegacyRuntime",
    "MXNET_ENGINES",
    "ProbeResult",
    "backend_status",
    "clean_environment",
    "install_command",
    "mxnet_env",
    "pytensor_flags",
    "runtime_interpreter",
    "status_command",
    "theano_env",
    "theano_flags",
]
