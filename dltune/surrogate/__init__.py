"""Surrogates: scikit-learn-convention estimators that predict accuracy, training time and peak
memory with intervals, fitted on the knowledge base plus the user's own records."""

from __future__ import annotations

from dltune.surrogate._accuracy import AccuracySurrogate
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
from dltune.surrogate._memory import MemorySurrogate
from dltune.surrogate._model import PerformanceModel
from dltune.surrogate._quantile import QuantileGBMRegressor
from dltune.surrogate._records import usable_records
from dltune.surrogate._train_time import TrainTimeSurrogate

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
