"""The registry of named data sets and :func:`load_dataset`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune._paths import data_dir
from dltune._validation import check_bool, check_int
from dltune.data._dataset import Dataset, normalise, stratified_subset

__all__ = ["DATASETS", "available_datasets", "load_dataset"]

_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _subset(arrays: _Arrays, n_train: int | None, n_test: int | None, seed: int) -> _Arrays:
    x_train, y_train, x_test, y_test = arrays
    if n_train is not None:
        check_int("n_train", n_train, 10, len(y_train))
    if n_test is not None:
        check_int("n_test", n_test, 10, len(y_test))
    tr = stratified_subset(y_train, n_train, seed)
    te = stratified_subset(y_test, n_test, seed + 1)
    return x_train[tr], y_train[tr], x_test[te], y_test[te]


def _digits(n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> _Arrays:
    """scikit-learn's 1,797 8x8 digits; a fixed stratified 80/20 split (by ``seed``)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    seed = check_int("seed", seed, 0, 2**32 - 1)
    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[:, None]
    y = bunch.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=seed, stratify=y
    )
    return _subset((x_train, y_train, x_test, y_test), n_train, n_test, seed)


def _synthetic(**params: Any) -> _Arrays:
    from dltune.data._synthetic import make_synthetic

    return make_synthetic(**params)


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


DATASETS: dict[str, Callable[..., _Arrays]] = {
    "digits": _digits,
    "synthetic": _synthetic,
    "mnist": _file_set("mnist"),
    "fashion_mnist": _file_set("fashion_mnist"),
    "cifar10": _file_set("cifar10"),
}

# Parameters that change how files are fetched, not which data is loaded.
_NOT_IDENTITY = {"download", "verify"}
_cache: dict[tuple, Dataset] = {}


def available_datasets() -> list[str]:
    return list(DATASETS)


def _accepted(loader: Callable[..., Any]) -> list[str]:
    if loader is _synthetic:
        from dltune.data._synthetic import make_synthetic

        loader = make_synthetic
    return [p for p in inspect.signature(loader).parameters]


def load_dataset(name: str, **params: Any) -> Dataset:
    """Load data set ``name`` (see :func:`available_datasets`), normalised, cached in-process.

    Args:
        name: ``digits``, ``synthetic``, ``mnist``, ``fashion_mnist`` or ``cifar10``.
        params: the loader's parameters, e.g. ``n_train=500`` (all), ``difficulty=0.7``
            (synthetic), ``download=True`` (file sets).
    """
    if name not in DATASETS:
        raise ParameterError(
            f"The 'workload' parameter must be one of {{{', '.join(map(repr, DATASETS))}}}. "
            f"Got {name!r} instead."
        )
    loader = DATASETS[name]
    accepted = _accepted(loader)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ParameterError(
            f"Data set '{name}' takes the parameters {{{', '.join(accepted)}}}. Got {unknown[0]!r} instead."
        )
    identity = {k: v for k, v in params.items() if k not in _NOT_IDENTITY}
    # The data folder is part of the key: the same name may be read from another folder.
    key = (name, str(data_dir()), tuple(sorted((k, repr(v)) for k, v in identity.items())))
    if key not in _cache:
        x_train, y_train, x_test, y_test = loader(**params)
        x_train, x_test = normalise(x_train, x_test)
        classes = int(max(y_train.max(), y_test.max())) + 1
        _cache[key] = Dataset(name, x_train, y_train, x_test, y_test, params=identity, num_classes=classes)
    return _cache[key]
