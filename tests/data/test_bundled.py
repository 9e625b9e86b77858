"""scikit-learn's bundled data sets, read from its files without importing it, with the arrays
and splits its own loaders and ``train_test_split`` give."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dltune.data import load_dataset
from dltune.data._bundled import BUNDLED_TABLES, read_bundled, read_digits
from dltune.data._split import split_indices, stratified_holdout, stratified_subset


def test_the_files_give_scikit_learns_arrays():
    from sklearn import datasets

    digits = datasets.load_digits()
    images, labels = read_digits()
    assert np.array_equal(images, digits.images) and np.array_equal(labels, digits.target)
    for name in BUNDLED_TABLES:
        x, y = read_bundled(name)
        x_ref, y_ref = getattr(datasets, f"load_{name}")(return_X_y=True)
        assert np.array_equal(x, x_ref) and np.array_equal(y, y_ref), name


@pytest.mark.parametrize("seed", [0, 7])
def test_splits_are_train_test_splits(seed):
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, size=103)
    index = np.arange(len(y))
    for n_train, n_test, stratify in [(60, 43, True), (20, 83, True), (50, 53, False)]:
        ref = train_test_split(index, train_size=n_train, test_size=n_test, random_state=seed,
                               stratify=y if stratify else None)
        got = split_indices(y, n_train, n_test, seed, stratify)
        assert all(np.array_equal(a, b) for a, b in zip(got, ref, strict=True))
    train_ref, test_ref = train_test_split(index, test_size=0.2, random_state=seed, stratify=y)
    train, test = stratified_holdout(y, 0.2, seed)
    assert np.array_equal(train, train_ref) and np.array_equal(test, test_ref)
    # Too few samples per class to stratify: a plain shuffle split, not scikit-learn's ValueError.
    assert len(stratified_subset(np.repeat([0, 1, 2], [1, 5, 5]), 6, seed)) == 6


def test_bundled_sets_load_without_importing_scikit_learn_scipy_or_pandas():
    code = ("import sys; from dltune.data import load_dataset; load_dataset('digits'); "
            "load_dataset('breast_cancer', n_train=100); "
            "print(sorted(m for m in ('sklearn', 'scipy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("name", "n", "features", "classes"), [
    ("breast_cancer", 569, 30, 2), ("wine", 178, 13, 3), ("iris", 150, 4, 3),
])
def test_tabular_sets_are_split_80_20_and_standardised(name, n, features, classes):
    data = load_dataset(name)
    assert (data.modality, data.input_shape, data.num_classes) == ("tabular", (features,), classes)
    assert (len(data.y_train), len(data.y_test)) == (n - int(np.ceil(0.2 * n)), int(np.ceil(0.2 * n)))
    np.testing.assert_allclose(data.x_train.mean(axis=0), 0, atol=1e-4)
    assert set(np.unique(data.y_test)) == set(range(classes))
