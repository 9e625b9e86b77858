"""The comparison with a preset and the final table, from given trial summaries."""

from __future__ import annotations

from dltune.measure import Measurement
from dltune.tuning import StudyResult, TrialSummary, TuneResult
from dltune.tuning._tune import _compare, preset_for


def _summary(number, accuracy, seconds):
    config = {"optimizer": "adam", "learning_rate": 0.001, "batch_size": 64, "epochs": 3,
              "threads": {"intra_op": 1, "inter_op": 1, "blas": 1}}
    return TrialSummary(number, config, {}, accuracy, seconds, 100.0)


def _preset(accuracy, seconds):
    return Measurement(status="ok", workload={}, config={"epochs": 20}, hardware={},
                       metrics={"test_accuracy": accuracy, "train_time_s": seconds})


def _result(front):
    return StudyResult("torch", "dltune:x:torch:t", ["accuracy", "train_time"], {"COMPLETE": 3},
                       front, max(front, key=lambda t: t.accuracy))


def test_chooses_the_fastest_trial_at_least_as_accurate_as_the_preset():
    front = [_summary(0, 0.90, 1.0), _summary(1, 0.97, 3.0), _summary(2, 0.99, 9.0)]
    comp = _compare(_result(front), _preset(0.96, 30.0), "torch/mnist")
    assert comp["trial"] == 1 and comp["matches_preset"]
    assert comp["speedup"] == 10.0 and round(comp["accuracy_gain_pts"], 6) == 1.0


def test_says_so_when_no_trial_matches_the_preset():
    front = [_summary(0, 0.90, 1.0), _summary(1, 0.93, 3.0)]
    result = _result(front)
    result.comparison = _compare(result, _preset(0.96, 30.0), "torch/mnist")
    assert result.comparison["trial"] == 1 and not result.comparison["matches_preset"]
    table = TuneResult("sqlite:///x.db", {"torch": result}).table()
    assert "less accurate than the preset" in table and "-3.00" in table


def test_preset_labels_say_what_was_borrowed_and_capped(tiny_workload):
    config, label = preset_for("torch", tiny_workload)
    assert (config.optimizer, config.batch_size, config.epochs, label) == ("sgd", 10, 20, "torch/mnist")
    config, label = preset_for("numpy", tiny_workload, max_epochs=4)
    assert config.framework == "numpy" and config.epochs == 4
    assert label == "caffe/mnist (no numpy preset), epochs capped 11->4"
