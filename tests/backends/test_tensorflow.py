"""TensorFlow-specific checks, in the backend's own interpreter: the epoch runs as one graph,
so dropout masks, the seed and a per-batch learning-rate schedule must all work inside it."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.slow


def test_dropout_seed_and_schedule_inside_the_epoch_graph(seed_and_schedule):
    out = seed_and_schedule("tensorflow", "tf_mnist")  # tf_mnist has Dropout(0.5)
    assert out["again"] == out["first"]  # same seed: same weights, batches and masks
    assert out["other_seed"] != out["first"]
    assert out["constant_lr"] != out["first"]  # the inv schedule reached the graph
    assert out["no_dropout"] != out["first"]  # dropout is active while training
    assert all(math.isfinite(v) for v in out["first"])
