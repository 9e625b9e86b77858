"""Data sets handed to workers as ``.npy`` files, written once per data set fingerprint."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from dltune._paths import cache_dir

__all__ = ["export_arrays"]

_PARTS = ("x_train", "y_train", "x_test", "y_test")


def export_arrays(dataset) -> Path:
    """The folder holding ``dataset``'s arrays as .npy files (readable by numpy 1.x and 2.x)."""
    target = cache_dir() / "arrays" / dataset.fingerprint()
    if all((target / f"{p}.npy").exists() for p in _PARTS):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        for part in _PARTS:
            np.save(tmp / f"{part}.npy", np.ascontiguousarray(getattr(dataset, part)))
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
