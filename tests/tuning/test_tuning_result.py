"""The comparison with a preset and the final table, from given trial summaries."""

from __future__ import annotations

import pytest

from dltune.measure import Measurement
from dltune.tuning import StudyResult, TrialSummary, TuneResult
from dltune.tuning._study_measurements import _compare, preset_for


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


def _repeat(trial, accuracy, again, seconds=1.0, seconds_again=1.1):
    return {"trial": trial, "seed": 1, "status": "ok" if again is not None else "failed",
            "accuracy": accuracy, "accuracy_again": again, "train_time_s": seconds,
            "train_time_again_s": None if again is None else seconds_again,
            "peak_rss_mb": 100.0, "peak_rss_again_mb": None if again is None else 101.0}


def test_repeats_of_the_best_trials_say_how_much_was_luck():
    from dltune.measure._noise import seed_noise

    front = [_summary(0, 0.90, 1.0), _summary(1, 0.97, 3.0)]
    result = _result(front)
    assert result.repeat_summary() is None and "measured again" not in TuneResult("x", {"torch": result}).table()
    result.repeats = [_repeat(1, 0.97, 0.95), _repeat(0, 0.90, 0.91)]
    summary = result.repeat_summary()
    assert summary["pairs"] == 2 and round(summary["accuracy_change_pts"], 6) == -0.5
    assert summary["seed_noise_pts"] is None  # fewer than 3 pairs
    assert round(summary["time_ratio"], 6) == 1.1
    table = TuneResult("x", {"torch": result}).table()
    assert "The most accurate trials measured again with another seed" in table
    assert "-2.00" in table and "+1.00" in table
    assert "changed by -0.50 points on average; seed noise needs at least 3 pairs (have 2)" in table

    # A failed repeat is shown, and left out of the summary.
    result.repeats += [_repeat(3, 0.89, None), _repeat(2, 0.88, 0.86)]
    summary = result.repeat_summary()
    assert summary["pairs"] == 3
    diffs = [-0.02, 0.01, -0.02]
    assert summary["seed_noise_pts"] == pytest.approx(100 * seed_noise(diffs))
    assert round(summary["accuracy_change_pts"], 6) == round(100 * sum(diffs) / 3, 6)
    table = TuneResult("x", {"torch": result}).table()
    assert "failed" in table and f"seed noise of one run about {100 * seed_noise(diffs):.2f} points" in table
    data = result.to_dict()
    assert data["repeats"] == result.repeats and data["repeat_summary"] == summary


def test_the_trials_measured_again_are_the_most_accurate_feasible_ones():
    import optuna
    from optuna.trial import TrialState, create_trial

    from dltune.tuning._study_measurements import _most_accurate

    def trial(accuracy, seconds, feasible=True, state=TrialState.COMPLETE):
        return create_trial(
            state=state, values=None if state != TrialState.COMPLETE else [accuracy],
            user_attrs={"test_accuracy": accuracy, "train_time_s": seconds, "config": {"epochs": 1}},
            system_attrs={"constraints": [-1.0 if feasible else 1.0]})

    study = optuna.create_study(direction="maximize")
    for t in (trial(0.90, 1.0), trial(0.99, 1.0, feasible=False), trial(0.95, 2.0),
              trial(0.95, 1.0), trial(0.97, 1.0, state=TrialState.FAIL), trial(0.80, 1.0)):
        study.add_trial(t)
    assert [t.number for t in _most_accurate(study, 3)] == [3, 2, 0]
    assert [t.number for t in _most_accurate(study, 10)] == [3, 2, 0, 5]
