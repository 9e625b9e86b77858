"""Surrogates: scikit-learn-convention estimators that predict accuracy, training time and peak
memory with intervals, fitted on the knowledge base plus the user's own records."""

from __future__ import annotations

from typing import Any

from dltune.surrogate._cache import (
    clear_memory_cache,
    default_storage,
    export_shipped_model,
    fitted_model,
    load_storage_measurements,
    shipped_model_dir,
    shipped_model_key,
)
from dltune.surrogate._features import FeatureEncoder, record_row, total_work
from dltune.surrogate._model import PerformanceModel
from dltune.surrogate._records import usable_records

__all__ = [
    "AccuracySurrogate",
    "FeatureEncoder",
    "MemorySurrogate",
    "PerformanceModel",
    "QuantileGBMRegressor",
    "TrainTimeSurrogate",
    "clear_memory_cache",
    "default_storage",
    "export_shipped_model",
    "fitted_model",
    "load_storage_measurements",
    "record_row",
    "shipped_model_dir",
    "shipped_model_key",
    "total_work",
    "usable_records",
]

# The scikit-learn estimators, imported when first asked for: importing scikit-learn's base
# classes takes longer than a recommendation from a saved model, which never needs them.
_ESTIMATORS = ("AccuracySurrogate", "MemorySurrogate", "QuantileGBMRegressor", "TrainTimeSurrogate")


def __getattr__(name: str) -> Any:
    if name in _ESTIMATORS:
        from dltune.surrogate import _estimators

        return getattr(_estimators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
