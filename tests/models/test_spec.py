"""ModelSpec: shapes, parameter counts, FLOPs, initial weights, serialisation, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dltune.models import ModelSpec
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    MaxPool2D,
    SpecError,
)


def _lenet_28() -> ModelSpec:
    layers = (
        Conv2D(20, 5), MaxPool2D(2, 2), Conv2D(50, 5), MaxPool2D(2, 2), Flatten(),
        Dense(500), Activation("relu"), Dense(10),
    )
    return ModelSpec("lenet", (1, 28, 28), 10, layers)


def test_shapes_and_caffe_lenet_param_count():
    spec = _lenet_28()
    assert spec.shapes() == [
        (1, 28, 28), (20, 24, 24), (20, 12, 12), (50, 8, 8), (50, 4, 4), (800,), (500,), (500,), (10,),
    ]
    # Caffe's MNIST LeNet has 431,080 parameters.
    assert spec.param_count == 20 * 25 + 20 + 50 * 20 * 25 + 50 + 800 * 500 + 500 + 500 * 10 + 10
    assert spec.param_count == 431080
    assert spec.flatten_input_shape() == (50, 4, 4)


def test_flops_count_multiply_adds_twice():
    spec = ModelSpec("d", (1, 2, 2), 3, (Flatten(), Dense(3)))
    assert spec.flops_per_sample == 2 * 4 * 3
    conv = ModelSpec("c", (2, 5, 5), 2, (Conv2D(3, 3), Activation("relu"), Flatten(), Dense(2)))
    expected = 2 * 3 * 3 * 3 * 2 * 9 + 3 * 3 * 3 + 2 * 27 * 2
    assert conv.flops_per_sample == expected


def test_same_padding_keeps_size_and_pool_rounds_down():
    spec = ModelSpec(
        "p", (3, 7, 6), 4,
        (Conv2D(5, 3, padding="same"), MaxPool2D(3, 2), AvgPool2D(2, 1), Flatten(), Dense(4)),
    )
    assert spec.shapes()[1:4] == [(5, 7, 6), (5, 3, 2), (5, 2, 1)]


def test_init_params_glorot_uniform_zero_bias_deterministic():
    spec = _lenet_28()
    a, b = spec.init_params(0), spec.init_params(0)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], spec.init_params(1)[0])
    assert [p.shape for p in a] == spec.param_shapes()
    assert all(p.dtype == np.float32 for p in a)
    conv_limit = np.sqrt(6.0 / (1 * 25 + 20 * 25))
    assert np.abs(a[0]).max() <= conv_limit and np.abs(a[0]).max() > 0.9 * conv_limit
    dense_limit = np.sqrt(6.0 / (800 + 500))
    assert np.abs(a[4]).max() <= dense_limit
    assert not a[1].any() and not a[5].any()


def test_dict_and_json_round_trip():
    spec = ModelSpec(
        "all", (2, 9, 9), 3,
        (Conv2D(4, 3, padding="same"), Activation("tanh"), MaxPool2D(2, 2), AvgPool2D(2, 1),
         Flatten(), Dropout(0.25), Dense(3)),
    )
    again = ModelSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec
    assert again.param_count == spec.param_count


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ModelSpec("x", (1, 4, 4), 10, (Flatten(), Dense(5))), "must output 10 logits"),
        (lambda: ModelSpec("x", (1, 4, 4), 2, (Dense(2),)), "add Flatten first"),
        (lambda: ModelSpec("x", (1, 4, 4), 2, (Conv2D(2, 5), Flatten())), "does not fit"),
        (lambda: ModelSpec("x", (1, 4, 4), 2, (MaxPool2D(5, 1),)), "does not fit"),
        (lambda: Conv2D(2, 3, padding="full"), "'valid' or 'same'"),
        (lambda: Conv2D(2, 4, padding="same"), "odd kernel"),
        (lambda: Activation("gelu"), "must be one of"),
    ],
)
def test_inconsistent_specs_are_rejected(make, message):
    with pytest.raises(SpecError, match=message):
        make()


def test_summary_lists_layers_and_totals():
    text = _lenet_28().summary()
    assert "conv2d" in text and "431,080" in text
