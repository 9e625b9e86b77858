"""Framework-neutral model specifications and presets."""

from __future__ import annotations

from dltune.models._presets import (
    MODEL_PRESETS,
    ModelPreset,
    available_models,
    build_model,
    model_family,
    model_features,
)
from dltune.models._spec import (
    GRU,
    LSTM,
    Activation,
    AvgPool1D,
    AvgPool2D,
    BatchNorm,
    Conv1D,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool2D,
    Layer,
    MaxPool1D,
    MaxPool2D,
    ModelSpec,
    Residual,
    SpecError,
)
from dltune.models._spec_file import load_spec

__all__ = [
    "MODEL_PRESETS",
    "Activation",
    "AvgPool1D",
    "AvgPool2D",
    "BatchNorm",
    "Conv1D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GRU",
    "GlobalAvgPool2D",
    "LSTM",
    "Layer",
    "MaxPool1D",
    "MaxPool2D",
    "ModelPreset",
    "ModelSpec",
    "Residual",
    "SpecError",
    "available_models",
    "build_model",
    "load_spec",
    "model_family",
    "model_features",
]
