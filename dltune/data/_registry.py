"""The registry of named data sets and :func:`load_dataset`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune._paths import data_dir
from dltune._validation import check_bool, check_int
from dltune.data import _synthetic
from dltune.data._dataset import Dataset, normalise
from dltune.data._split import stratified_holdout, stratified_subset

__all__ = ["DATASETS", "DataSource", "available_datasets", "load_dataset"]

_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

# The share of a bundled data set held out for testing (stratified, by ``seed``).
_BUNDLED_TEST_FRACTION = 0.2


@dataclass(frozen=True)
class DataSource:
    """A named data set: its loader (train and test arrays, canonical layout) and modality."""

    loader: Callable[..., _Arrays]
    modality: str


def _subset(arrays: _Arrays, n_train: int | None, n_test: int | None, seed: int) -> _Arrays:
    x_train, y_train, x_test, y_test = arrays
    if n_train is not None:
        check_int("n_train", n_train, 10, len(y_train))
    if n_test is not None:
        check_int("n_test", n_test, 10, len(y_test))
    tr = stratified_subset(y_train, n_train, seed)
    te = stratified_subset(y_test, n_test, seed + 1)
    return x_train[tr], y_train[tr], x_test[te], y_test[te]


def _holdout(x: np.ndarray, y: np.ndarray, n_train: int | None, n_test: int | None, seed: int) -> _Arrays:
    seed = check_int("seed", seed, 0, 2**32 - 1)
    train, test = stratified_holdout(y, _BUNDLED_TEST_FRACTION, seed)
    return _subset((x[train], y[train], x[test], y[test]), n_train, n_test, seed)


def _digits(n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> _Arrays:
    """scikit-learn's 1,797 8x8 digits; a fixed stratified 80/20 split (by ``seed``)."""
    from dltune.data._bundled import read_digits

    images, y = read_digits()
    return _holdout((images / 16.0).astype(np.float32)[:, None], y, n_train, n_test, seed)


def _bundled_table(name: str) -> Callable[..., _Arrays]:
    def load(n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> _Arrays:
        from dltune.data._bundled import read_bundled

        x, y = read_bundled(name)
        return _holdout(x.astype(np.float32), y, n_train, n_test, seed)

    load.__doc__ = f"scikit-learn's bundled {name} table; a fixed stratified 80/20 split (by ``seed``)."
    return load


def _file_set(name: str) -> Callable[..., _Arrays]:
    def load(
        n_train: int | None = None,
        n_test: int | None = None,
        seed: int = 0,
        download: bool = False,
        verify: bool = True,
    ) -> _Arrays:
        from dltune.data import _files

        check_bool("download", download)
        check_bool("verify", verify)
        folder = data_dir() / name
        if name == "cifar10":
            arrays = _files.load_cifar10(folder, download, verify)
        else:
            arrays = _files.load_idx_set(name, folder, download, verify)
        x_train, y_train, x_test, y_test = _subset(arrays, n_train, n_test, check_int("seed", seed, 0, None))
        return x_train / np.float32(255), y_train, x_test / np.float32(255), y_test

    load.__doc__ = f"The official {name} files, read from ``data_dir()/{name}/``."
    return load


def _imdb(n_train: int | None = None, n_test: int | None = None, seed: int = 0, vocab_size: int = 10_000,
          max_length: int = 200, download: bool = False, verify: bool = True) -> _Arrays:
    """IMDB reviews as token ids from Keras's ``imdb.npz`` in ``data_dir()/imdb/``: the
    ``vocab_size`` most frequent ids (rarer words are out-of-vocabulary), cut or padded in front
    to ``max_length``."""
    from dltune.data._imdb import load_imdb

    check_bool("download", download)
    check_bool("verify", verify)
    arrays = load_imdb(data_dir() / "imdb", download, verify, check_int("vocab_size", vocab_size, 4, 10_000_000),
                       check_int("max_length", max_length, 1, 100_000))
    return _subset(arrays, n_train, n_test, check_int("seed", seed, 0, None))


@functools.wraps(_synthetic.make_synthetic_sequence)
def _synthetic_sequence(**params: Any) -> _Arrays:
    x_train, y_train, x_test, y_test = _synthetic.make_synthetic_sequence(**params)
    return x_train.transpose(0, 2, 1), y_train, x_test.transpose(0, 2, 1), y_test  # (N, F, T)


DATASETS: dict[str, DataSource] = {
    "digits": DataSource(_digits, "image"),
    "synthetic": DataSource(_synthetic.make_synthetic, "image"),
    "mnist": DataSource(_file_set("mnist"), "image"),
    "fashion_mnist": DataSource(_file_set("fashion_mnist"), "image"),
    "cifar10": DataSource(_file_set("cifar10"), "image"),
    "breast_cancer": DataSource(_bundled_table("breast_cancer"), "tabular"),
    "wine": DataSource(_bundled_table("wine"), "tabular"),
    "iris": DataSource(_bundled_table("iris"), "tabular"),
    "synthetic_tabular": DataSource(_synthetic.make_synthetic_tabular, "tabular"),
    "imdb": DataSource(_imdb, "tokens"),
    "synthetic_tokens": DataSource(_synthetic.make_synthetic_tokens, "tokens"),
    "synthetic_sequence": DataSource(_synthetic_sequence, "sequence"),
}

# Parameters that change how files are fetched, not which data is loaded.
_NOT_IDENTITY = {"download", "verify"}
_cache: dict[tuple, Dataset] = {}


def available_datasets() -> list[str]:
    return list(DATASETS)


def load_dataset(name: str, **params: Any) -> Dataset:
    """Load data set ``name`` (see :func:`available_datasets`), normalised, cached in-process.

    Args:
        name: one of :func:`available_datasets` (:data:`DATASETS` gives each one's modality).
        params: the loader's parameters, e.g. ``n_train=500`` (all), ``difficulty=0.7``
            (synthetic ones), ``download=True`` (file sets).
    """
    if name not in DATASETS:
        raise ParameterError(
            f"The 'workload' parameter must be one of {{{', '.join(map(repr, DATASETS))}}}. "
            f"Got {name!r} instead."
        )
    source = DATASETS[name]
    signature = inspect.signature(source.loader)
    unknown = sorted(set(params) - set(signature.parameters))
    if unknown:
        raise ParameterError(
            f"Data set '{name}' takes the parameters {{{', '.join(signature.parameters)}}}. "
            f"Got {unknown[0]!r} instead."
        )
    identity = {k: v for k, v in params.items() if k not in _NOT_IDENTITY}
    # The data folder is part of the key: the same name may be read from another folder.
    key = (name, str(data_dir()), tuple(sorted((k, repr(v)) for k, v in identity.items())))
    if key not in _cache:
        x_train, y_train, x_test, y_test = source.loader(**params)
        x_train, x_test = normalise(x_train, x_test, source.modality)
        classes = int(max(y_train.max(), y_test.max())) + 1
        # A token set's vocabulary is its loader's, not the largest id a subset happens to hold.
        bound = signature.bind_partial(**params)
        bound.apply_defaults()
        vocab = int(bound.arguments.get("vocab_size", 0)) if source.modality == "tokens" else 0
        _cache[key] = Dataset(name, x_train, y_train, x_test, y_test, params=identity, num_classes=classes,
                              modality=source.modality, vocab_size=vocab)
    return _cache[key]
