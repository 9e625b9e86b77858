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
        # The framework or a library it is used with (optax beside jax): not dltune's own bug.
        missing = (exc.name or "").split(".")[0]
        if missing and missing != "dltune":
            needs = info.distribution if missing == info.framework else f"{info.distribution} and {missing}"
            raise BackendUnavailableError(
                f"Backend '{name}' needs {needs}, which is not installed in "
                f"this interpreter. Install it with: {info.install_hint}"
            ) from exc
        raise
    return module.TRAINER
