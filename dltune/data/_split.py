"""Train / test splits drawn exactly as scikit-learn's ``train_test_split`` draws them.

The parent process loads data sets without importing scikit-learn (it costs a second), yet
the splits must stay those of ``train_test_split(..., random_state=seed, stratify=...)``: the
data sets' fingerprints, which the knowledge base is keyed by, depend on them. The tests
compare both draws.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["split_indices", "stratified_holdout", "stratified_subset"]


def _approximate_mode(counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """scikit-learn's ``_approximate_mode``: samples per class, ties broken by ``rng``."""
    continuous = counts / counts.sum() * n_draws
    floored = np.floor(continuous)
    need = int(n_draws - floored.sum())
    if need > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need -= add_now
            if need == 0:
                break
    return floored.astype(int)


def split_indices(y: np.ndarray, n_train: int, n_test: int, seed: int,
                  stratify: bool) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices of ``train_test_split(train_size=n_train, test_size=n_test,
    random_state=seed, stratify=y if stratify else None)``, in its order."""
    rng = np.random.RandomState(seed)
    if not stratify:
        permutation = rng.permutation(len(y))
        return permutation[n_test:n_test + n_train], permutation[:n_test]
    classes, y_indices, counts = np.unique(y, return_inverse=True, return_counts=True)
    class_indices = np.split(np.argsort(y_indices.ravel(), kind="stable"), np.cumsum(counts)[:-1])
    n_i = _approximate_mode(counts, n_train, rng)
    t_i = _approximate_mode(counts - n_i, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for i in range(len(classes)):
        members = class_indices[i].take(rng.permutation(counts[i]), mode="clip")
        train.extend(members[:n_i[i]])
        test.extend(members[n_i[i]:n_i[i] + t_i[i]])
    return rng.permutation(np.asarray(train, dtype=np.intp)), rng.permutation(np.asarray(test, dtype=np.intp))


def _can_stratify(y: np.ndarray, n_train: int, n_test: int) -> bool:
    """Where ``train_test_split`` can stratify: every class twice, each side a sample per class."""
    _, counts = np.unique(y, return_counts=True)  # labels that do not occur do not count
    return counts.min() >= 2 and min(n_train, n_test) >= len(counts)


def stratified_subset(y: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    """Indices of ``n`` samples keeping the class proportions (all, in order, when n is None)."""
    if n is None or n >= len(y):
        return np.arange(len(y))
    keep, _ = split_indices(y, n, len(y) - n, seed, _can_stratify(y, n, len(y) - n))
    return np.sort(keep)


def stratified_holdout(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices of ``train_test_split(test_size=test_fraction, stratify=y,
    random_state=seed)``: how a bundled data set is split."""
    n_test = math.ceil(test_fraction * len(y))
    return split_indices(y, len(y) - n_test, n_test, seed, stratify=True)
