"""Framework-neutral model specifications and presets."""

from __future__ import annotations

from dltune.models._presets import MODEL_PRESETS, available_models, build_model
from dltune.models._spec import (
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
    "GlobalAvgPool2D",
    "Layer",
    "MaxPool1D",
    "MaxPool2D",
    "ModelSpec",
    "Residual",
    "SpecError",
    "available_models",
    "build_model",
]
