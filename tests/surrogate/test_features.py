from __future__ import annotations

import math

import pytest

from dltune.surrogate import PerformanceModel
from dltune.surrogate._features import FeatureEncoder


def _row(optimizer, lr, batch, momentum=0.9):
    return {"meta": {"n_train": 1000, "model": "mlp"}, "hardware": {"usable_cores": 2},
            "config": {"framework": "torch", "optimizer": optimizer, "learning_rate": lr,
                       "momentum": momentum, "batch_size": batch, "epochs": 2}}


def test_step_per_sample_is_the_effective_rate_over_the_batch():
    rows = [_row("sgd", 0.1, 32), _row("momentum", 0.01, 16), _row("momentum", 0.01, 16, momentum=0.5),
            _row("adam", 0.001, 64)]
    enc = FeatureEncoder().fit(rows)
    column = enc.transform(rows)[:, enc.feature_names_.index("log_step_per_sample")]
    # Momentum 0.9 takes steps of 10x its rate: 0.01 at batch 16 is sgd's 0.1 at batch 16.
    assert column == pytest.approx([math.log(0.1 / 32), math.log(0.1 / 16), math.log(0.02 / 16),
                                    math.log(0.001 / 64)])


def test_step_per_sample_reaches_the_accuracy_point_but_not_its_interval_nor_speed():
    enc = FeatureEncoder().fit([_row("sgd", 0.1, 32)])
    accuracy, time, memory = PerformanceModel()._estimators(enc)
    column = enc.feature_names_.index("log_step_per_sample")
    assert column in accuracy.tree_columns and column not in accuracy.band_columns
    assert set(accuracy.band_columns) == set(accuracy.tree_columns) - {column}
    assert column not in time.tree_columns and column not in memory.tree_columns
