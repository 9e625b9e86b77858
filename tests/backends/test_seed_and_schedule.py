"""Backend-specific checks in the backend's own interpreter: dropout masks follow the seed and
the learning rate is set per batch — for TensorFlow inside the one graph that runs an epoch,
traced once per model in a process and restarted from the seed by every run."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["torch", "tensorflow"])
def test_dropout_seed_and_schedule(seed_and_schedule, backend):
    out = seed_and_schedule(backend, "tf_mnist")  # tf_mnist has Dropout(0.5)
    assert out["again"] == out["first"]  # same seed: same weights, batches and masks
    assert out["changed"] != out["first"]
    if backend == "tensorflow":  # each model traced once, reused by every later run of it
        assert out["traces"] == [1, 1]
    assert out["other_seed"] != out["first"]
    assert out["constant_lr"] != out["first"]  # the inv schedule reached the optimizer / graph
    assert out["no_dropout"] != out["first"]  # dropout is active while training
    assert all(math.isfinite(v) for v in out["first"])
