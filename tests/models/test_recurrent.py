"""LSTM and GRU: shapes, the one parameter layout, initial values, FLOPs, serialisation and
the errors a wrong spec gets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune.models import GRU, LSTM, Dense, Embedding, Flatten, ModelSpec, SpecError


def test_lstm_and_gru_shapes_and_parameter_layout():
    spec = ModelSpec("s", (3, 4), 2, (LSTM(5, return_sequences=True), GRU(6), Dense(2)))
    assert spec.shapes() == [(3, 4), (5, 4), (6,), (2,)]
    # LSTM: (in, 4U) kernel, (U, 4U) recurrent kernel, one bias; GRU: two biases of 3U.
    assert spec.param_shapes() == [(3, 20), (5, 20), (20,), (5, 18), (6, 18), (18,), (18,), (6, 2), (2,)]
    assert spec.param_count == 4 * 5 * (3 + 5 + 1) + 3 * 6 * (5 + 6 + 2) + 6 * 2 + 2
    # Per step: the matrix products (2 FLOPs a multiply-add), the biases, 8 per unit element-wise.
    lstm_step = 2 * 20 * (3 + 5) + 20 + 8 * 5
    gru_step = 2 * 18 * (5 + 6) + 2 * 18 + 8 * 6
    assert spec.flops_per_sample == 4 * lstm_step + 4 * gru_step + 2 * 6 * 2


def test_recurrent_layers_follow_an_embedding_and_feed_a_flatten():
    spec = ModelSpec("t", (7,), 3, (Embedding(20, 4), GRU(3, return_sequences=True), Flatten(), Dense(3)))
    assert spec.shapes()[1:4] == [(4, 7), (3, 7), (21,)]
    assert spec.flatten_input_shape() == (3, 7)


def test_initial_weights_glorot_kernels_zero_biases_lstm_forget_gate_one():
    spec = ModelSpec("s", (3, 4), 2, (LSTM(5, return_sequences=True), GRU(6), Dense(2)))
    kernel, recurrent, bias, g_kernel, g_recurrent, g_input_bias, g_recurrent_bias = spec.init_params(1)[:7]
    for weight in (kernel, recurrent, g_kernel, g_recurrent):
        limit = np.sqrt(6.0 / sum(weight.shape))
        assert 0.8 * limit < np.abs(weight).max() <= limit
    np.testing.assert_array_equal(bias, np.r_[np.zeros(5), np.ones(5), np.zeros(10)].astype(np.float32))
    assert not g_input_bias.any() and not g_recurrent_bias.any()
    again = spec.init_params(1)
    assert all((a == b).all() for a, b in zip(spec.init_params(1), again, strict=True))


def test_recurrent_layers_round_trip_and_summarise():
    spec = ModelSpec("s", (3, 4), 2, (LSTM(5, return_sequences=True), GRU(6), Dense(2)))
    assert spec.to_dict()["layers"][0] == {"kind": "lstm", "units": 5, "return_sequences": True}
    again = ModelSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.param_count == spec.param_count
    assert "lstm" in spec.summary() and "gru" in spec.summary()


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: LSTM(0), ParameterError, r"The 'units' parameter must be an int in \[1, inf\). Got 0 instead."),
        (lambda: GRU(4, return_sequences="yes"), ParameterError,
         r"The 'return_sequences' parameter must be a bool. Got 'yes' instead."),
        (lambda: ModelSpec("x", (3, 4, 4), 2, (LSTM(2), Dense(2))), SpecError,
         r"LSTM needs a \(features, steps\) input. Got \(3, 4, 4\)."),
        (lambda: ModelSpec("x", (3, 4), 2, (GRU(2, return_sequences=True), Dense(2))), SpecError,
         "Dense needs a flat input"),
    ],
)
def test_recurrent_layer_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()
