"""The factorized search: hyper-parameters at fixed threads, then a thread phase of its own."""

from __future__ import annotations

import json

import pytest

from dltune import ParameterError, tune
from dltune.tuning import SearchSpace, StudyResult, TrialSummary, TuneResult
from dltune.tuning._thread_phase import (
    MIN_GAIN,
    candidates_after,
    first_candidates,
    grid_size,
    search_spaces,
)


def _space(framework: str, cores: int = 2) -> SearchSpace:
    return SearchSpace(cores=cores).without_knobs(framework)


def test_split_puts_varying_thread_and_startup_dimensions_apart():
    hyper, execution = _space("torch").fix(blas_threads=1).split()
    assert set(execution.dimensions) == {"intra_op_threads", "inter_op_threads", "omp_wait_policy"}
    assert "learning_rate" in hyper and hyper["blas_threads"].value == 1  # fixed: stays in hyper
    assert not ({"intra_op_threads", "inter_op_threads", "omp_wait_policy"} & set(hyper.dimensions))


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_the_thread_phase_tries_at_most_a_third_of_the_grid_on_two_cores(framework):
    _, execution = _space(framework).split()
    first = first_candidates(execution)
    assert first[0] == {}  # the framework's default comes first
    # the cores one intra-op thread leaves are inter-op threads
    assert {"intra_op_threads": 1, "blas_threads": 1, "inter_op_threads": 2} in first
    assert {"intra_op_threads": 2, "blas_threads": 2, "inter_op_threads": 1} in first
    best = first[2]
    after = candidates_after(execution, best)
    assert {**best, "inter_op_threads": 2} in after
    knob = "omp_wait_policy" if framework == "torch" else "tf_onednn_opts"
    # only a value that may beat leaving the variable unset is worth a run
    assert [c[knob] for c in after if knob in c] == (["active"] if framework == "torch" else [0])
    assert grid_size(execution) == 16 and 3 * (len(first) + len(after)) <= grid_size(execution)


def test_a_many_core_space_tries_powers_of_two_and_the_cores():
    _, execution = _space("numpy", cores=12).split()
    first = first_candidates(execution)
    assert [c.get("intra_op_threads") for c in first] == [None, 1, 2, 4, 8, 12]
    assert [c.get("inter_op_threads") for c in first] == [None, 12, 6, 3, 1, 1]


def test_joint_search_and_thread_sensitive_backends_keep_one_space(monkeypatch):
    space = _space("torch")
    assert search_spaces(space, "torch", "joint") == (space, SearchSpace({}, cores=2, defaults=False))
    monkeypatch.setattr("dltune.tuning._space.THREADS_CHANGE_ACCURACY", frozenset({"torch"}))
    assert search_spaces(space, "torch", "factorized")[0] == space
    assert search_spaces(space, "tensorflow", "factorized") == space.split()
    with pytest.raises(ParameterError, match=r"'search' parameter must be one of \{factorized, joint\}. "
                                             r"Got 'both' instead."):
        tune("digits", frameworks="numpy", search="both", storage="sqlite:///:memory:")


def test_the_summary_is_short_and_gives_the_combined_answer():
    config = {"optimizer": "adam", "learning_rate": 0.001, "batch_size": 64, "epochs": 3,
              "threads": {"intra_op": None, "inter_op": None, "blas": None}}
    best = TrialSummary(4, config, {}, 0.97, 2.0, 100.0)
    tuned = {**config, "threads": {"intra_op": 1, "inter_op": 2, "blas": 1, "cores": None}}
    result = StudyResult("torch", "s", ["accuracy", "train_time"], {"COMPLETE": 8, "FAIL": 1},
                         [best], best)
    result.threads = [{"trial": 4, "study_name": "s:threads", "evaluations": 5, "epochs": 2,
                       "params": {}, "threads": tuned["threads"],
                       "startup_env": {"OMP_WAIT_POLICY": "active"}, "config": tuned,
                       "train_time_s": 0.5, "default_train_time_s": 0.8, "speedup": 1.6,
                       "accuracy_spread_pts": 0.0}]
    assert result.answer == {"trial": 4, "config": tuned, "startup_env": {"OMP_WAIT_POLICY": "active"},
                             "threads_speedup": 1.6}
    text = TuneResult("x", {"torch": result, "tensorflow": result}).summary()
    assert len(text.splitlines()) <= 6
    assert "8 complete, 1 fail" in text and "1/2/1 OMP_WAIT_POLICY=active (1.60x)" in text
    assert "Thread phase" in TuneResult("x", {"torch": result}).table()


@pytest.mark.slow
def test_factorized_tune_times_threads_apart_and_combines_both(tiny_workload, tmp_path, monkeypatch):
    """Hyper-parameter trials at the default threads, then a study ``<name>:threads`` whose
    trials time thread settings for the best trial; the answer combines both."""
    import optuna

    monkeypatch.setattr("dltune.tuning._thread_phase.REPEATS", 2)
    url = f"sqlite:///{tmp_path}/f.db"
    # intra-op threads alone vary: the default, 1 and 2 threads are timed
    space = SearchSpace(cores=2).update(epochs=1, batch_size=[32, 64], optimizer=["sgd"], weight_decay=0.0,
                                        learning_rate={"low": 0.01, "high": 0.3, "log": True},
                                        inter_op_threads=1, blas_threads=1)
    result = tune(tiny_workload, frameworks="numpy", hardware=None, space=space, trials=2,
                  storage=url, seed=0, compare_preset=False, thread_configs=1)
    res = result["numpy"]
    hyper = optuna.load_study(study_name=res.study_name, storage=url)
    assert {t.user_attrs["phase"] for t in hyper.trials} == {"hyper"}
    assert all(set(t.params) <= {"batch_size", "learning_rate"} for t in hyper.trials)
    assert {t.user_attrs["config"]["threads"]["intra_op"] for t in hyper.trials} == {None}
    assert [c.get("intra_op_threads") for c in (t.params for t in optuna.load_study(
        study_name=f"{res.study_name}:threads", storage=url).trials)] == [None, 1, 2]
    (phase,) = res.threads
    threads = optuna.load_study(study_name=f"{res.study_name}:threads", storage=url)
    assert threads.user_attrs["hyper_study"] == res.study_name and phase["trial"] == res.best.number
    timed = threads.trials
    assert {t.user_attrs["phase"] for t in timed} == {"threads"} and len(timed) == phase["evaluations"] == 3
    assert all(len(t.user_attrs["train_times_s"]) == 2 for t in timed)
    # in the order tried, a setting replaces the pick only when MIN_GAIN faster than it
    fastest = timed[0]
    for t in timed[1:]:
        if t.values[0] < (1 - MIN_GAIN) * fastest.values[0]:
            fastest = t
    assert phase["params"] == fastest.params and phase["train_time_s"] == fastest.values[0]
    answer = res.answer
    assert answer["config"]["learning_rate"] == res.best.config["learning_rate"]
    assert answer["config"]["threads"]["intra_op"] == fastest.params.get("intra_op_threads")
    # resumed: the timed settings are reused, none is measured again
    again = tune(tiny_workload, frameworks="numpy", space=space, trials=2, storage=url, seed=0,
                 compare_preset=False, thread_configs=1)
    assert len(optuna.load_study(study_name=f"{res.study_name}:threads", storage=url).trials) == len(timed)
    assert again["numpy"].threads[0]["params"] == phase["params"]


def _dashboard_get(url: str, path: str) -> dict:
    """A GET on optuna-dashboard's WSGI app, in this process."""
    import io
    import json
    from wsgiref.util import setup_testing_defaults

    from optuna_dashboard import wsgi

    environ: dict = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(wsgi(url)(environ, lambda s, h, *a: status.append(s)))
    assert status[0].startswith("200"), status
    return json.loads(body)


@pytest.mark.slow
def test_one_study_across_frameworks_shows_every_framework_on_one_front(tiny_workload, tmp_path):
    """``one_study``: the framework is a categorical parameter of one study, which the
    dashboard's API shows with trials of every framework."""
    url = f"sqlite:///{tmp_path}/o.db"
    space = SearchSpace(cores=1).update(epochs=1, batch_size=[64], optimizer=["sgd"], weight_decay=0.0)
    result = tune(tiny_workload, frameworks="numpy,torch", space=space, trials=3, storage=url,
                  seed=3, compare_preset=False, one_study=True, sampler="random", thread_configs=0,
                  enqueue=[{"framework": "numpy"}, {"framework": "torch"}])
    (res,) = result.results.values()
    assert res.framework == "numpy+torch" and res.study_name.split(":")[2] == "numpy+torch"
    (summary,) = _dashboard_get(url, "/api/studies")["study_summaries"]
    detail = _dashboard_get(url, f"/api/studies/{summary['study_id']}")
    trials = detail["trials"]
    assert len(trials) == 3
    shown = {p["param_external_value"] for t in trials for p in t["params"] if p["name"] == "framework"}
    assert shown == {"numpy", "torch"}
    for trial in trials:
        attrs = {a["key"]: a["value"] for a in trial["user_attrs"]}
        param = next(p["param_external_value"] for p in trial["params"] if p["name"] == "framework")
        assert json.loads(attrs["config"])["framework"] == param == attrs["framework"]
    assert "numpy+torch" in result.summary() and res.best.config["framework"] in result.summary()


def test_a_setting_tried_later_must_be_clearly_faster_to_be_picked():
    from dltune.tuning._thread_phase import _fastest

    def entry(trial, seconds):
        return {"trial": trial, "train_time_s": seconds, "params": {"n": trial}}

    done = {"a": entry(0, 1.00), "b": entry(1, 0.99), "c": entry(2, 0.96), "d": entry(3, 0.95)}
    assert _fastest(done)["trial"] == 2  # 1 % faster is noise; 4 % is not; then 1 % again
    assert _fastest({"x": entry(5, 2.0), "y": entry(4, 3.0)})["trial"] == 5
