"""A trial that hangs is killed at the run timeout, fails with its reason, and the search goes on."""

from __future__ import annotations

import pytest

from dltune import ParameterError, tune
from dltune.tuning import run_worker


def _hang_next(url: str, name: str):
    import optuna

    study = optuna.load_study(study_name=name, storage=url)
    study.enqueue_trial({}, user_attrs={"fault": "hang"})
    return study


def _failed_and_complete(study):
    from optuna.trial import TrialState

    trials = study.get_trials()
    return ([t for t in trials if t.state == TrialState.FAIL],
            [t for t in trials if t.state == TrialState.COMPLETE])


@pytest.mark.slow
def test_a_hung_trial_fails_at_the_run_timeout_in_tune_and_in_a_worker(
    tiny_workload, cheap_space, tmp_path, monkeypatch
):
    monkeypatch.setenv("DLTUNE_ENABLE_FAULTS", "1")
    url = f"sqlite:///{tmp_path}/h.db"
    kwargs = dict(frameworks="numpy", space=cheap_space.fix(epochs=1), storage=url, seed=0,
                  compare_preset=False)
    name = tune(tiny_workload, trials=1, **kwargs)["numpy"].study_name

    study = _hang_next(url, name)
    tune(tiny_workload, trials=2, run_timeout_s=1.5, **kwargs)
    failed, complete = _failed_and_complete(study)
    assert len(failed) == 1 and len(complete) == 2
    assert failed[0].user_attrs["fail_reason"] == "run exceeded its timeout of 1.5 s"
    assert failed[0].user_attrs["fail_kind"] == "timeout"

    _hang_next(url, name)
    summary = run_worker(name, url, trials=3, run_timeout_s=1.5)
    failed, complete = _failed_and_complete(study)
    assert summary["ran"] == 2 and len(failed) == 2 and len(complete) == 3
    assert failed[1].user_attrs["fail_reason"] == "run exceeded its timeout of 1.5 s"


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_a_run_timeout_must_be_positive(tmp_path, bad):
    match = "The 'run_timeout_s' parameter must be a float in \\(0.0, inf\\)"
    with pytest.raises(ParameterError, match=match):
        tune("digits", frameworks="numpy", run_timeout_s=bad, storage=f"sqlite:///{tmp_path}/t.db")
    with pytest.raises(ParameterError, match=match):
        run_worker("any", f"sqlite:///{tmp_path}/t.db", run_timeout_s=bad)
    assert list(tmp_path.iterdir()) == []
