"""Where dltune keeps its files: cache, data sets, legacy runtime, compiled caches."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "data_dir", "user_cache_dir"]


def cache_dir() -> Path:
    """dltune's cache folder: ``$DLTUNE_CACHE``, else the user cache dir (``~/.cache/dltune``)."""
    env = os.environ.get("DLTUNE_CACHE")
    if env:
        return Path(env).expanduser()
    return user_cache_dir()


def user_cache_dir() -> Path:
    """The user's dltune cache folder, whatever ``$DLTUNE_CACHE`` says: ``$XDG_CACHE_HOME/dltune``,
    else ``~/.cache/dltune``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "dltune"


def data_dir() -> Path:
    """Where data set files are read from: ``$DLTUNE_DATA``, else ``cache_dir()/data``."""
    env = os.environ.get("DLTUNE_DATA")
    return Path(env).expanduser() if env else cache_dir() / "data"
