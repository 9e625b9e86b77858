"""Framework-neutral model specifications and presets."""

from __future__ import annotations

from dltune.models._presets import MODEL_PRESETS, available_models, build_model
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    Layer,
    MaxPool2D,
    ModelSpec,
    SpecError,
)

__all__ = [
    "MODEL_PRESETS",
    "Activation",
    "AvgPool2D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPool2D",
    "ModelSpec",
    "SpecError",
    "available_models",
    "build_model",
]
