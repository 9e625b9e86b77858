"""``jobs``: K trials at once on this machine, each pinned to its own disjoint core set."""

from __future__ import annotations

import os

import pytest

from dltune import ParameterError, tune
from dltune.tuning._worker import job_core_sets

USABLE = len(os.sched_getaffinity(0))


def test_core_sets_are_disjoint_and_too_many_jobs_are_refused():
    allowed = sorted(os.sched_getaffinity(0))
    sets = job_core_sets(USABLE, 1)
    assert sets == [[core] for core in allowed]
    assert job_core_sets(1, USABLE) == [allowed]
    with pytest.raises(ParameterError, match=(
            rf"^The 'jobs' parameter must be an int in \[1, {USABLE}\] \(trials of 1 core\(s\) "
            rf"each on the {USABLE} usable cores\). Got {USABLE + 1} instead.$")):
        job_core_sets(USABLE + 1, 1)


def test_tune_refuses_more_jobs_than_cores_before_any_study(tiny_workload, tmp_path):
    with pytest.raises(ParameterError, match="The 'jobs' parameter must be an int in"):
        tune(tiny_workload, frameworks="numpy", jobs=USABLE + 1, storage=f"sqlite:///{tmp_path}/j.db")
    with pytest.raises(ParameterError, match="The 'jobs' parameter must be 1 when 'workers' is 2"):
        tune(tiny_workload, frameworks="numpy", jobs=2, workers=2, storage=f"sqlite:///{tmp_path}/j.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(USABLE < 2, reason="two jobs need two usable cores")
def test_two_jobs_complete_the_study_on_the_one_core_target(tiny_workload, cheap_space, tmp_path):
    import optuna
    from optuna.trial import TrialState

    from dltune.hardware import Hardware

    url = f"sqlite:///{tmp_path}/j.db"
    res = tune(tiny_workload, frameworks="numpy", space=cheap_space.fix(epochs=1),
               trials=4, storage=url, seed=0, jobs=2, compare_preset=False)["numpy"]
    assert res.study_name.endswith(Hardware.detect(cores=1).target)
    complete = optuna.load_study(study_name=res.study_name, storage=url).get_trials(
        states=(TrialState.COMPLETE,))
    assert len(complete) == 4
    assert {t.user_attrs["config"]["threads"]["cores"] for t in complete} == {1}
