"""scikit-learn's bundled data files, read without importing scikit-learn.

Importing scikit-learn costs the parent process about a second (and pulls in scipy); its
small data sets are plain CSV files in its package folder, found with ``find_spec`` (which
imports nothing) and parsed here as its loaders parse them.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
from pathlib import Path

import numpy as np

from dltune.data._files import DataFilesMissingError

__all__ = ["BUNDLED_TABLES", "read_bundled"]

#: data set name -> scikit-learn's file (first row: samples, features, class names; then the
#: features and the class of each sample).
BUNDLED_TABLES = {"breast_cancer": "breast_cancer.csv", "iris": "iris.csv", "wine": "wine_data.csv"}


def _data_folder() -> Path:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DataFilesMissingError("The bundled data sets are scikit-learn's files: install scikit-learn.")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """``load_digits()``'s images (N, 8, 8) in [0, 16] (float64) and labels."""
    with gzip.open(_data_folder() / "digits.csv.gz", "rt") as fh:
        table = np.loadtxt(fh, delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def read_bundled(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``load_<name>()``'s features (N, F) as float64 and labels, for a :data:`BUNDLED_TABLES` name."""
    with (_data_folder() / BUNDLED_TABLES[name]).open(newline="") as fh:
        rows = csv.reader(fh)
        n_samples, n_features = (int(v) for v in next(rows)[:2])
        x = np.empty((n_samples, n_features), dtype=np.float64)
        y = np.empty(n_samples, dtype=np.int64)
        for i, row in enumerate(rows):
            x[i] = np.asarray(row[:-1], dtype=np.float64)
            y[i] = int(row[-1])
    return x, y
