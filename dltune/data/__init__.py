"""Data sets by name, normalised once so that every backend sees the same arrays.

Each data set has a modality (:data:`MODALITIES`): ``image``, ``tabular``, ``tokens`` or
``sequence``. Offline: ``digits`` and the tabular ``breast_cancer``, ``wine`` and ``iris``
(scikit-learn's bundled files, read without importing it) and the generated ``synthetic``
(images), ``synthetic_tabular``, ``synthetic_tokens`` and ``synthetic_sequence``; ``mnist``,
``fashion_mnist``, ``cifar10`` and ``imdb`` read the standard distributed files from
:func:`dltune._paths.data_dir` and verify their SHA-256 sums.
"""

from __future__ import annotations

from dltune.data._dataset import Dataset, array_modalities, from_arrays, holdout_split
from dltune.data._kind import MODALITIES, dataset_kind, describe_data, describe_modalities
from dltune.data._registry import DATASETS, DataSource, available_datasets, load_dataset

__all__ = ["DATASETS", "MODALITIES", "DataSource", "Dataset", "array_modalities", "available_datasets",
           "dataset_kind", "describe_data", "describe_modalities", "from_arrays", "holdout_split",
           "load_dataset"]
