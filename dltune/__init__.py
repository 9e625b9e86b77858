"""dltune: which deep-learning framework, configured how, for this workload on this hardware.

Importing dltune imports no deep-learning framework and none of its heavier dependencies:
the public names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "benchmark": "dltune._bench",
    "Workload": "dltune._workload",
    "TrainConfig": "dltune.config",
    "ThreadConfig": "dltune.config",
    "ModelSpec": "dltune.models",
    "Measurement": "dltune.measure",
    "load_records": "dltune.measure",
    "to_dataframe": "dltune.measure",
    "Hardware": "dltune.hardware",
    "load_dataset": "dltune.data",
    "SearchSpace": "dltune.tuning",
    "tune": "dltune.tuning",
    "recommend": "dltune.recommend",
    "Recommendation": "dltune.recommend",
    "Interval": "dltune._interval",
    "DltuneError": "dltune._errors",
    "ParameterError": "dltune._errors",
    "BackendUnavailableError": "dltune._errors",
    "NotFittedError": "dltune._errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dltune' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
