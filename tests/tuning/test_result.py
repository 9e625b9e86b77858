"""What tune returns, as a notebook shows it: short reprs, HTML tables, its Optuna studies."""

from __future__ import annotations

import pytest

from dltune import ParameterError
from dltune.tuning import StudyResult, TrialSummary, TuneResult


def _result(framework: str, label: str = "caffe/mnist") -> StudyResult:
    config = {"optimizer": "sgd", "learning_rate": 0.05, "batch_size": 32, "epochs": 2,
              "startup": "x" * 3000}
    front = [TrialSummary(n, config, {"p": "y" * 3000}, 0.5 + n / 100, 1.0 + n, 120.0) for n in range(40)]
    result = StudyResult(framework, f"dltune:digits-mlp:{framework}:t", ["accuracy", "train_time"],
                         {"COMPLETE": 40, "FAIL": 2}, front, front[-1])
    result.comparison = {"preset_label": label, "speedup": 1.8, "accuracy_gain_pts": 0.5}
    return result


def test_reprs_are_short_and_say_the_best_trial():
    results = {fw: _result(fw) for fw in ("numpy", "torch", "tensorflow", "pytensor", "mxnet")}
    tuned = TuneResult("sqlite:///dltune.db", results)
    text = repr(tuned)
    assert len(text) < 600 and text.startswith("TuneResult(storage 'sqlite:///dltune.db'; numpy: 40 complete")
    assert "and 2 more frameworks" in text
    one = repr(results["numpy"])
    assert len(one) < 600 and "best trial 39: accuracy 89.00%, train 40 s, peak 120 MB" in one
    assert "2 failed" in one and "speed-up 1.80x, +0.50 pts" in one
    assert len(repr(results["numpy"].pareto[0])) < 200


def test_html_is_one_escaped_row_per_framework():
    tuned = TuneResult("sqlite:///dltune.db", {"numpy": _result("numpy", "<i>caffe</i>"),
                                               "torch": _result("torch")})
    page = tuned._repr_html_()
    assert page.startswith("<table>") and page.count("<tr>") == 3 and "<i>" not in page
    assert "<td>numpy</td><td>40</td><td>2</td><td>40</td><td>39</td>" in page
    assert tuned["numpy"]._repr_html_().count("<tr>") == 2


def test_a_tiny_tune_gives_back_its_optuna_studies(tiny_workload, cheap_space, tmp_path):
    import optuna

    from dltune import tune

    url = f"sqlite:///{tmp_path / 't.db'}"
    # Positional trials: the keyword's name is being settled (trials / n_trials).
    tuned = tune(tiny_workload, "numpy", None, cheap_space, 2, storage=url, seed=0, compare_preset=False)
    (study,) = tuned.studies.values()
    assert isinstance(study, optuna.Study) and study.study_name == tuned["numpy"].study_name
    assert len(study.trials) == 2
    again = TuneResult(tuned.storage, tuned.results)  # no studies handed over: loaded from storage
    loaded = again.studies["numpy"]
    assert isinstance(loaded, optuna.Study) and [t.number for t in loaded.trials] == [0, 1]
    assert len(repr(tuned)) < 600 and "numpy: 2 complete" in repr(tuned)


def test_studies_of_a_storage_whose_password_is_hidden_need_it_from_the_environment(monkeypatch):
    monkeypatch.delenv("DLTUNE_STORAGE", raising=False)
    tuned = TuneResult("postgresql://bob:***@127.0.0.1:1/db", {"numpy": _result("numpy")})
    with pytest.raises(ParameterError, match="hides its password: set \\$DLTUNE_STORAGE to that URL"):
        tuned.studies  # noqa: B018 - the property loads
