"""Surrogates: scikit-learn-convention estimators that predict accuracy, training time and peak
memory with intervals, fitted on the knowledge base plus the user's own records."""

from __future__ import annotations

from dltune.surrogate._cache import (
    clear_memory_cache,
    default_storage,
    export_shipped_model,
    fitted_model,
    load_storage_records,
    shipped_model_dir,
    shipped_model_key,
)
from dltune.surrogate._estimators import (
    AccuracySurrogate,
    MemorySurrogate,
    QuantileGBMRegressor,
    TrainTimeSurrogate,
)
from dltune.surrogate._features import FeatureEncoder, record_row, total_work
from dltune.surrogate._model import PerformanceModel, usable_records

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
    "load_storage_records",
    "record_row",
    "shipped_model_dir",
    "shipped_model_key",
    "total_work",
    "usable_records",
]
