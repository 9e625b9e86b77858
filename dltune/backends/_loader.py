"""Loading a backend's Trainer class (worker side only: it imports the framework)."""

from __future__ import annotations

import importlib

from dltune._errors import BackendUnavailableError
from dltune.backends._registry import BACKENDS

__all__ = ["load_trainer_class"]


def load_trainer_class(name: str):
    """Import backend ``name``'s module and return its Trainer class (worker side only)."""
    info = BACKENDS[name]
    try:
        module = importlib.import_module(info.module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == info.framework:
            raise BackendUnavailableError(
                f"Backend '{name}' needs {info.distribution}, which is not installed in "
                f"this interpreter. Install it with: {info.install_hint}"
            ) from exc
        raise
    return module.TRAINER
