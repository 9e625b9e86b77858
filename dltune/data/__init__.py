"""Data sets by name, normalised once so that every backend sees the same arrays.

``digits`` (scikit-learn's bundled 8x8 handwritten digits) works offline; ``synthetic``
generates image classification data for scaling studies; ``mnist``, ``fashion_mnist`` and
``cifar10`` read the standard distributed files from :func:`dltune._paths.data_dir` and verify
their SHA-256 sums.
"""

from __future__ import annotations

from dltune.data._dataset import Dataset, from_arrays, holdout_split
from dltune.data._kind import dataset_kind
from dltune.data._registry import DATASETS, available_datasets, load_dataset

__all__ = ["DATASETS", "Dataset", "available_datasets", "dataset_kind", "from_arrays", "holdout_split",
           "load_dataset"]
