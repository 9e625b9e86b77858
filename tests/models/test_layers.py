"""The layers beyond the first seven: shapes, parameters and state, initial values, FLOPs,
serialisation and the errors a wrong spec gets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune.models import ModelSpec
from dltune.models._spec import (
    BATCH_NORM_EPSILON,
    BATCH_NORM_MOMENTUM,
    Activation,
    AvgPool1D,
    BatchNorm,
    Conv1D,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool2D,
    MaxPool1D,
    MaxPool2D,
    Residual,
    SpecError,
    layer_from_dict,
)


def _resnet_like() -> ModelSpec:
    return ModelSpec(
        "r", (3, 8, 8), 4,
        (Conv2D(4, 3, padding="same"),
         Residual((Conv2D(4, 3, padding="same"), BatchNorm(), Activation("relu"))),
         Residual((Conv2D(6, 2, stride=2),), shortcut=(Conv2D(6, 1, stride=2),)),
         GlobalAvgPool2D(), BatchNorm(), Dense(4)),
    )


def test_existing_layers_keep_their_initial_weights():
    # The Glorot-uniform draws of the first seven layers, in order from one stream, as before
    # any layer had its own initialisation: shipped measurements were made from these weights.
    spec = ModelSpec("l", (1, 9, 9), 3, (Conv2D(2, 3), MaxPool2D(2, 2), Flatten(), Dense(5), Dense(3)))
    rng = np.random.default_rng([4, 7919])
    expected = []
    for shape in spec.param_shapes():
        if len(shape) == 1:
            expected.append(np.zeros(shape, np.float32))
            continue
        fan_in, fan_out = (shape[1] * 9, shape[0] * 9) if len(shape) == 4 else shape
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        expected.append(rng.uniform(-limit, limit, size=shape).astype(np.float32))
    for got, want in zip(spec.init_params(4), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_batch_norm_scale_shift_are_parameters_running_statistics_are_state():
    spec = ModelSpec("b", (3, 4, 4), 2, (BatchNorm(), Flatten(), BatchNorm(), Dense(2)))
    assert spec.param_shapes() == [(3,), (3,), (48,), (48,), (48, 2), (2,)]
    assert spec.state_shapes() == [(3,), (3,), (48,), (48,)]
    assert spec.param_count == 3 + 3 + 48 + 48 + 96 + 2
    gamma, beta = spec.init_params(0)[:2]
    assert (gamma == 1).all() and (beta == 0).all()
    mean, var = spec.init_state()[:2]
    assert (mean == 0).all() and (var == 1).all()
    assert 0 < BATCH_NORM_MOMENTUM < 1 and 0 < BATCH_NORM_EPSILON < 1e-2
    assert "48 running statistics" not in spec.summary() and "102 running statistics" in spec.summary()


def test_global_pooling_and_1d_layers_shapes():
    spec = ModelSpec("g", (5, 7, 3), 2, (GlobalAvgPool2D(), Dense(2)))
    assert spec.shapes()[1] == (5,) and spec.flops_per_sample == 5 * 7 * 3 + 2 * 5 * 2
    seq = ModelSpec(
        "s", (3, 13), 2,
        (Conv1D(4, 3, padding="same"), MaxPool1D(3, 2), Conv1D(5, 2, stride=2), AvgPool1D(2, 1), Flatten(), Dense(2)),
    )
    assert seq.shapes() == [(3, 13), (4, 13), (4, 6), (5, 3), (5, 2), (10,), (2,)]
    assert seq.param_shapes()[:2] == [(4, 3, 3), (4,)]
    assert seq.conv_outputs_per_sample == 4 * 13 + 5 * 3
    assert seq.flatten_input_shape() == (5, 2)


def test_embedding_maps_token_ids_to_a_channels_first_map():
    spec = ModelSpec("e", (7,), 2, (Embedding(50, 4), Conv1D(3, 3), Flatten(), Dense(2)))
    assert spec.shapes()[1:3] == [(4, 7), (3, 5)]
    assert spec.param_shapes()[0] == (50, 4)
    limit = np.sqrt(6.0 / 54)
    weight = spec.init_params(0)[0]
    assert 0.9 * limit < np.abs(weight).max() <= limit


def test_residual_holds_body_then_shortcut_and_round_trips():
    spec = _resnet_like()
    assert spec.shapes()[1:4] == [(4, 8, 8), (4, 8, 8), (6, 4, 4)]
    assert spec.param_shapes()[2:8] == [(4, 4, 3, 3), (4,), (4,), (4,), (6, 4, 2, 2), (6,)]
    assert spec.param_shapes()[8:10] == [(6, 4, 1, 1), (6,)]
    assert spec.state_shapes() == [(4,), (4,), (6,), (6,)]
    assert [p.shape for p in spec.init_params(1)] == spec.param_shapes()
    again = ModelSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.param_count == spec.param_count
    text = spec.summary()
    assert "residual" in text and "shortcut: identity" in text and "  body:" in text


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Conv1D(0, 3), r"The 'filters' parameter must be an int in \[1, inf\). Got 0 instead."),
        (lambda: Conv1D(2, 3, padding="full"), r"The 'padding' parameter must be one of \{'valid', 'same'\}"),
        (lambda: MaxPool1D(2, 0), r"The 'stride' parameter must be an int in \[1, inf\)"),
        (lambda: Embedding(0, 4), r"The 'vocab_size' parameter must be an int"),
        (lambda: Dropout(1.0), r"The 'rate' parameter must be a float in \[0.0, 1.0\)"),
        (lambda: Residual(()), r"The 'body' parameter must hold at least one layer"),
        (lambda: layer_from_dict({"kind": "transformer"}), r"The 'kind' parameter must be one of \{.*'residual'"),
    ],
)
def test_layer_parameters_are_checked(make, message):
    with pytest.raises(ParameterError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ModelSpec("x", (3, 8, 8), 2, (Residual((Conv2D(4, 3),)), Flatten(), Dense(2))),
         r"body's output \(4, 6, 6\) to its shortcut's \(3, 8, 8\)"),
        (lambda: ModelSpec("x", (7,), 2, (Flatten(), Embedding(5, 2), Flatten(), Dense(2))), "first layer"),
        (lambda: ModelSpec("x", (3, 8), 2, (GlobalAvgPool2D(), Dense(2))), "GlobalAvgPool2D needs"),
        (lambda: ModelSpec("x", (3, 8, 8), 2, (Conv1D(2, 3), Flatten(), Dense(2))), "Conv1D needs"),
        (lambda: ModelSpec("x", (3, 4), 2, (Conv1D(2, 5), Flatten(), Dense(2))), "does not fit"),
    ],
)
def test_inconsistent_specs_are_rejected(make, message):
    with pytest.raises(SpecError, match=message):
        make()
