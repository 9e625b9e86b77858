"""``dltune worker --phase threads``: a worker takes part in the factorized search's thread phase."""

from __future__ import annotations

import pytest

from dltune import ParameterError
from dltune.tuning import SearchSpace, run_worker


@pytest.fixture(scope="module")
def hyper_study(tiny_workload, tmp_path_factory):
    """A study whose hyper-parameter phase is done and whose thread phase never ran (as when
    its ``tune`` was killed after the search): ``(storage URL, study name)``. Only intra-op
    threads vary, so the thread phase times the default, 1 and 2 threads."""
    from dltune import tune

    url = f"sqlite:///{tmp_path_factory.mktemp('worker-threads')}/w.db"
    space = SearchSpace(cores=2).update(epochs=1, batch_size=[64], optimizer=["sgd"], weight_decay=0.0,
                                        learning_rate={"low": 0.01, "high": 0.3, "log": True},
                                        inter_op_threads=1, blas_threads=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dltune.tuning._tune.run_thread_phase", lambda *args, **kwargs: [])
        result = tune(tiny_workload, frameworks="numpy", space=space, trials=1, storage=url, seed=0,
                      compare_preset=False, thread_configs=1)
    return url, result["numpy"].study_name, space


def _threads(url: str, name: str):
    import optuna

    return optuna.load_study(study_name=f"{name}:threads", storage=url)


def test_a_bad_phase_is_refused_in_one_line(capsys, tmp_path):
    from dltune.cli import main

    with pytest.raises(ParameterError, match=r"The 'phase' parameter must be one of "
                                             r"\{hyper, threads, all\}. Got 'both' instead."):
        run_worker("any", f"sqlite:///{tmp_path}/t.db", phase="both")
    with pytest.raises(SystemExit) as stop:
        main(["worker", "--study", "any", "--phase", "both"])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == ""
    (line,) = err.splitlines()
    assert "--phase" in line and "'both'" in line and "'hyper', 'threads', 'all'" in line
    assert list(tmp_path.iterdir()) == []


def test_a_trial_another_process_is_timing_is_left_to_it(hyper_study):
    """Each trial's thread phase belongs to the process that holds its claim."""
    import optuna

    from dltune.tuning._storage import claim_lock, open_storage
    from dltune.tuning._thread_phase import _claim_name

    url, name, _ = hyper_study
    best = optuna.load_study(study_name=name, storage=url).trials[0].number
    with claim_lock(open_storage(url), _claim_name(name, best), wait=False) as mine:
        assert mine
        summary = run_worker(name, url, phase="threads")
    assert summary["threads"] == {"answers": [], "skipped": [best]}
    assert summary["ran"] == 0 and summary["counts"] == {"COMPLETE": 1}


def test_a_worker_times_the_thread_phase_as_tune_does_and_tune_reuses_it(
    hyper_study, tiny_workload, capsys, monkeypatch
):
    import optuna
    from optuna.trial import TrialState

    from dltune import tune

    monkeypatch.setattr("dltune.tuning._thread_phase.REPEATS", 1)
    url, name, space = hyper_study
    # A worker that died while timing trial 0's candidates left one RUNNING.
    dead = optuna.create_study(storage=url, study_name=f"{name}:threads", direction="minimize",
                               load_if_exists=True)
    dead.enqueue_trial({"intra_op_threads": 1}, user_attrs={"phase": "threads", "hyper_trial": 0})
    dead.ask()

    summary = run_worker(name, url, phase="threads")
    (answer,) = summary["threads"]["answers"]
    assert summary["phase"] == "threads" and summary["ran"] == 0 and answer["trial"] == 0
    trials = _threads(url, name).trials
    assert trials[0].state == TrialState.FAIL and "abandoned" in trials[0].user_attrs["fail_reason"]
    timed = trials[1:]
    assert [t.params.get("intra_op_threads") for t in timed] == [None, 1, 2]
    assert all(t.state == TrialState.COMPLETE and t.user_attrs["phase"] == "threads"
               and t.user_attrs["hyper_trial"] == 0 and len(t.user_attrs["train_times_s"]) == 1
               for t in timed)
    assert answer["evaluations"] == 3 and answer["params"] in [t.params for t in timed]
    assert len(optuna.load_study(study_name=name, storage=url).trials) == 1  # no hyper trial

    # tune, the thread study's name and --phase all reuse those timings: none runs again
    again = tune(tiny_workload, frameworks="numpy", space=space, trials=1, storage=url, seed=0,
                 compare_preset=False, thread_configs=1)["numpy"]
    assert again.threads == [answer]
    from dltune.cli import main

    capsys.readouterr()
    assert main(["worker", "--study", f"{name}:threads", "--storage", url]) == 0
    out = capsys.readouterr().out
    assert f"{name}:threads: #0 " in out and "study has" not in out
    assert run_worker(name, url, phase="all")["threads"]["answers"] == [answer]
    assert len(_threads(url, name).trials) == 4


def test_a_study_without_a_thread_phase_refuses_it(hyper_study):
    import optuna

    url, name, _ = hyper_study
    threads = optuna.create_study(storage=url, study_name=f"{name}:threads", load_if_exists=True)
    threads.set_user_attr("phase", "threads")
    threads.set_user_attr("hyper_study", name)
    with pytest.raises(ParameterError, match=r"The 'phase' parameter must be 'threads' for study "
                                             r".*:threads', a thread phase's study .* Got 'hyper'"):
        run_worker(f"{name}:threads", url, phase="hyper")
    study = optuna.load_study(study_name=name, storage=url)
    study.set_user_attr("thread_configs", 0)
    try:
        with pytest.raises(ParameterError, match=r"The 'phase' parameter must be 'hyper' for "
                                                 r"study .* no thread phase .* Got 'all' instead."):
            run_worker(name, url, phase="all")
    finally:
        study.set_user_attr("thread_configs", 1)
