"""Where dltune keeps its files: cache, data sets, legacy runtime, compiled caches."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cache_dir", "data_dir", "user_cache_dir", "while_unchanged"]

_T = TypeVar("_T")
# What while_unchanged computed, by (function, path), with the file's (modification time, size).
_UNCHANGED: dict[tuple[Any, str], tuple[tuple[int, int], Any]] = {}


def while_unchanged(path: Path, compute: Callable[[Path], _T], missing: _T) -> _T:
    """``compute(path)``, kept and computed again only when the file's modification time or size
    changed; ``missing`` where the file cannot be read. ``compute`` must be a module-level
    function (it is part of the key). For what every ``recommend`` call reads to notice a
    change (the knowledge base's digest, the calibration records) but rarely finds one."""
    try:
        stat = path.stat()
    except OSError:
        return missing
    stamp, key = (stat.st_mtime_ns, stat.st_size), (compute, str(path))
    hit = _UNCHANGED.get(key)
    if hit is None or hit[0] != stamp:
        hit = _UNCHANGED[key] = (stamp, compute(path))
    return hit[1]


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
