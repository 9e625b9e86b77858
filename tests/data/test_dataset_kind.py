"""dataset_kind: which published presets fit a data set, from its channels alone."""

from __future__ import annotations

from dltune.data import dataset_kind, load_dataset


def test_colour_images_get_cifar10_presets_and_the_rest_mnist_ones():
    assert [dataset_kind(c) for c in (1, 3, 4)] == ["mnist", "cifar10", "mnist"]
    colour = load_dataset("synthetic", n_train=60, n_test=30, height=8, width=8, channels=3, classes=3)
    grey = load_dataset("digits")
    assert dataset_kind(colour.input_shape[0]) == "cifar10"  # whatever the data set's name
    assert dataset_kind(grey.input_shape[0]) == "mnist"
