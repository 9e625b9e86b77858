"""Trainer backends: one module per framework, all implementing :class:`Trainer`.

Importing this package imports no framework; a backend module imports its framework inside
itself and is only ever loaded in a worker process. Worker-side modules here import only the
standard library, numpy and psutil besides their framework, so they also run in the legacy
runtime's interpreter.
"""

from __future__ import annotations

from dltune.backends._loader import load_trainer_class
from dltune.backends._registry import BACKENDS, BackendInfo, available_backend_names

__all__ = ["BACKENDS", "BackendInfo", "available_backend_names", "load_trainer_class"]
