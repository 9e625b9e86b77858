"""tune(): real trials on the numpy backend, resume, failures, SIGKILL mid-trial, enqueueing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from dltune import ParameterError, TrainConfig, tune
from dltune.tuning import record_from_trial


def _study(url: str, name: str):
    import optuna

    return optuna.load_study(study_name=name, storage=url)


@pytest.mark.slow
def test_small_real_tune_resume_and_failed_run(tiny_workload, cheap_space, tmp_path, monkeypatch):
    from optuna.trial import TrialState

    from dltune.hardware import Hardware

    url = f"sqlite:///{tmp_path}/t.db"
    result = tune(tiny_workload, frameworks=["numpy"], space=cheap_space, trials=3,
                  storage=url, seed=0, preset_epochs=2)
    res = result["numpy"]
    hw = Hardware.detect()
    assert res.study_name == f"dltune:digits[n_test=150,n_train=300]-mlp:numpy:{hw.target}"
    study = _study(url, res.study_name)
    assert study.user_attrs["hardware_fingerprint"] == hw.fingerprint
    assert study.user_attrs["workload"]["fingerprint"] == tiny_workload.dataset.fingerprint()
    assert study.metric_names == ["test accuracy", "training time (s)"]
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == 3 == len(study.trials)
    for trial in complete:
        record = record_from_trial(trial)
        assert record.ok and record.framework == "numpy"
        assert record.config["batch_size"] == trial.params["batch_size"]
        assert record.config["learning_rate"] == pytest.approx(trial.params["learning_rate"])
        assert trial.values == [pytest.approx(record.metrics["test_accuracy"]),
                                pytest.approx(record.metrics["train_time_s"])]
        curve = [c["test_accuracy"] for c in record.metrics["curves"]]
        assert len(curve) == trial.params["epochs"]
        assert [trial.intermediate_values[i] for i in range(len(curve))] == pytest.approx(curve)
    # the comparison with the numpy backend's preset (Caffe's: no numpy preset), capped honestly
    comp = res.comparison
    assert comp["preset_label"] == "caffe/mnist (no numpy preset), epochs capped 11->2"
    assert comp["preset_epochs"] == 2 and 0.0 <= comp["preset_accuracy"] <= 1.0
    assert res.pareto and all(t.accuracy is not None for t in res.pareto)
    assert "Pareto front" in result.table() and "caffe/mnist" in result.table()
    first_params = [t.params for t in complete]
    preset_id = res.preset.id

    # a run that crashes becomes a FAIL trial with its reason; the study goes on
    monkeypatch.setenv("DLTUNE_ENABLE_FAULTS", "1")
    study.enqueue_trial({}, user_attrs={"fault": "segfault"})
    result = tune(tiny_workload, frameworks=["numpy"], space=cheap_space, trials=5,
                  storage=url, seed=0, preset_epochs=2)
    trials = _study(url, res.study_name).trials
    assert [t.params for t in trials[:3]] == first_params  # resumed, not restarted
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) == 5 and states.count(TrialState.FAIL) == 1
    assert len(trials) == 6
    failed = next(t for t in trials if t.state == TrialState.FAIL)
    assert "SIGSEGV" in failed.user_attrs["fail_reason"]
    assert failed.user_attrs["fail_kind"] == "signal"
    assert record_from_trial(failed).status == "failed"
    assert result["numpy"].preset.id == preset_id  # the preset was not measured again

    # the same call again adds nothing: the target is met
    tune(tiny_workload, frameworks=["numpy"], space=cheap_space, trials=5, storage=url,
         seed=0, compare_preset=False)
    assert len(_study(url, res.study_name).trials) == 6


@pytest.mark.slow
def test_single_objective_with_constraints_pruner_and_enqueue(tiny_workload, cheap_space, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    first = TrainConfig(optimizer="momentum", learning_rate=0.05, momentum=0.8, batch_size=32, epochs=2)
    result = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=3, storage=url,
                  objective="accuracy", constraints={"max_train_time_s": 600.0}, seed=1,
                  enqueue=[first], compare_preset=False)
    res = result["numpy"]
    assert res.study_name.endswith(":accuracy")
    study = _study(url, res.study_name)
    assert len(study.directions) == 1 and study.directions[0].name == "MAXIMIZE"
    trial0 = study.trials[0]
    assert trial0.params["batch_size"] == 32 and trial0.params["learning_rate"] == pytest.approx(0.05)
    assert trial0.params["momentum"] == pytest.approx(0.8) and trial0.user_attrs["enqueued"]
    assert len(study.trials) == 3
    for trial in study.trials:
        assert trial.constraints["max_train_time_s"] < 0  # feasible: far under the bound
        assert len(trial.intermediate_values) == trial.params["epochs"]
    assert res.best.number == study.best_trial.number


def test_tune_rejects_bad_arguments(tiny_workload, tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    with pytest.raises(ParameterError, match="'trials' parameter must be an int in"):
        tune(tiny_workload, frameworks="numpy", trials=0, storage=url)
    with pytest.raises(ParameterError, match="'objective' parameter must be 'balanced' or distinct"):
        tune(tiny_workload, frameworks="numpy", objective=("accuracy", "speed"), storage=url)
    with pytest.raises(ParameterError, match="'constraints' parameter must be one of .* Got 'max_time'"):
        tune(tiny_workload, frameworks="numpy", constraints={"max_time": 3}, storage=url)
    with pytest.raises(ParameterError, match="'frameworks' parameter must hold names from"):
        tune(tiny_workload, frameworks="caffe", storage=url)
    with pytest.raises(ParameterError, match="'sampler' parameter must be one of"):
        tune(tiny_workload, frameworks="numpy", sampler="cmaes", storage=url)
    alien = {"cpu_model": "Imaginary CPU 9000", "physical_cores": 64, "logical_cores": 128,
             "usable_cores": 128, "memory_gb": 512}
    with pytest.raises(ParameterError, match="tune measures on this machine"):
        tune(tiny_workload, frameworks="numpy", hardware=alien, storage=url)



@pytest.mark.parametrize("timeout", [-1, 0, float("nan"), float("inf")])
def test_a_worker_refuses_a_time_budget_tune_refuses(tmp_path, timeout):
    """run_worker took any time budget (tune's check was its own)."""
    from dltune.tuning import run_worker

    match = "The 'time_budget_s' parameter must be a float in \\(0.0, inf\\)"
    with pytest.raises(ParameterError, match=match):
        tune("digits", frameworks="numpy", time_budget_s=timeout, storage=f"sqlite:///{tmp_path}/t.db")
    with pytest.raises(ParameterError, match=match):
        run_worker("any", f"sqlite:///{tmp_path}/missing.db", time_budget_s=timeout)
    assert list(tmp_path.iterdir()) == []


_HANGING_TUNE = """
import sys
from dltune import Workload, tune
from dltune.tuning import SearchSpace
space = SearchSpace.from_dict({space!r}, cores=1)
tune(Workload.from_name("digits", "mlp", n_train=300, n_test=150), frameworks="numpy",
     space=space, trials=3, storage={url!r}, seed=0, compare_preset=False)
"""


@pytest.mark.slow
def test_sigkill_mid_trial_leaves_no_trial_running_and_next_run_completes(
    tiny_workload, cheap_space, tmp_path, monkeypatch
):
    import psutil
    from optuna.trial import TrialState

    monkeypatch.setenv("DLTUNE_HEARTBEAT_S", "1")
    monkeypatch.setenv("DLTUNE_GRACE_S", "2")
    url = f"sqlite:///{tmp_path}/k.db"
    res = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=1, storage=url,
               seed=0, compare_preset=False)["numpy"]
    study = _study(url, res.study_name)
    # the next trial this study hands out hangs in its worker (test hook), so it is surely
    # RUNNING when the tuning process is killed
    study.enqueue_trial({}, user_attrs={"fault": "hang"})
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HANGING_TUNE.format(space=cheap_space.to_dict(), url=url))],
        env={**os.environ, "DLTUNE_ENABLE_FAULTS": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    children: list = []
    try:
        deadline = time.monotonic() + 120
        while True:
            running = study.get_trials(states=(TrialState.RUNNING,))
            if running and running[0].user_attrs.get("fault") == "hang":
                children = psutil.Process(proc.pid).children(recursive=True)
                if children:
                    break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the tuning process never started the trial"
            time.sleep(0.2)
        time.sleep(1.5)  # let the worker get into the hang
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        for child in children:
            child.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed = study.get_trials(states=(TrialState.RUNNING,))
    assert len(killed) == 1  # as the kill left it

    monkeypatch.delenv("DLTUNE_ENABLE_FAULTS", raising=False)
    tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=3, storage=url, seed=0,
         compare_preset=False)
    trials = _study(url, res.study_name).trials
    states = [t.state for t in trials]
    assert TrialState.RUNNING not in states and TrialState.WAITING not in states
    assert states.count(TrialState.COMPLETE) == 3
    stale = trials[killed[0].number]
    assert stale.state == TrialState.FAIL
    assert _study(url, res.study_name).user_attrs[f"stale_trial:{stale.number}"].startswith("stale")
    retried = [t for t in trials if t.system_attrs.get("failed_trial") == stale.number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE


@pytest.mark.slow
def test_warm_start_enqueues_what_recommend_proposes(tiny_workload, cheap_space, tmp_path, monkeypatch):
    import dltune.recommend

    proposed = TrainConfig(framework="numpy", optimizer="sgd", learning_rate=0.1, batch_size=64, epochs=3)
    other = TrainConfig(framework="torch", optimizer="sgd", learning_rate=0.2, batch_size=16, epochs=1)
    calls = []

    class FakeRecommendation:
        configs = [proposed, other]

    def fake_recommend(workload, hardware=None, frameworks=None, **kwargs):
        calls.append((workload, hardware, frameworks, kwargs.get("storage")))
        return FakeRecommendation()

    # recommend() needs the shipped knowledge base; this test checks tune's side of the wiring
    monkeypatch.setattr(dltune.recommend, "recommend", fake_recommend)
    url = f"sqlite:///{tmp_path}/w.db"
    res = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=2, storage=url,
               seed=0, warm_start=True, compare_preset=False)["numpy"]
    assert calls and calls[0][0] is tiny_workload and calls[0][2] == ["numpy"]
    assert calls[0][3] == url  # fitted on the records of the storage the tune works in
    trials = _study(url, res.study_name).trials
    # weight decay 0 lies below the space's log range: clipped to its low end
    assert trials[0].params == {"learning_rate": 0.1, "batch_size": 64, "epochs": 3,
                                "optimizer": "sgd", "weight_decay": 1e-6}
    assert trials[0].user_attrs["enqueued"] is True
    assert len(trials) == 2 and not trials[1].user_attrs.get("enqueued")  # torch's was not queued


@pytest.mark.slow
def test_the_tuning_process_imports_no_framework(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from dltune import Workload, tune
        from dltune.tuning import SearchSpace
        space = SearchSpace(cores=1).fix(epochs=1, batch_size=64, optimizer="sgd")
        tune(Workload.from_name("digits", "mlp", n_train=200, n_test=100), frameworks="numpy",
             space=space, trials=1, storage="sqlite:///{tmp_path}/f.db", seed=0)
        heavy = {{"torch", "tensorflow", "keras", "mxnet", "theano", "pytensor", "jax"}}
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_pruned_trials_keep_partial_records_and_cannot_loop_forever(tiny_workload, cheap_space, tmp_path):
    import optuna
    from optuna.trial import TrialState

    from dltune.tuning._worker import max_runs_for

    url = f"sqlite:///{tmp_path}/p.db"
    always = optuna.pruners.ThresholdPruner(lower=1.1)  # no accuracy reaches 1.1: prune all
    with pytest.warns(UserWarning, match="without reaching 1 complete ones"):
        res = tune(tiny_workload, frameworks="numpy", space=cheap_space.fix(epochs=3),
                   trials=1, storage=url, objective="accuracy", pruner=always, seed=0)["numpy"]
    trials = _study(url, res.study_name).trials
    assert len(trials) == max_runs_for(1)
    assert all(t.state == TrialState.PRUNED for t in trials)
    for trial in trials:
        record = record_from_trial(trial)
        assert record.metrics["stopped"] == "pruned" and record.metrics["epochs_run"] == 1
    assert res.pareto == [] and res.comparison is None


@pytest.mark.slow
def test_same_seed_proposes_the_same_configurations(tiny_workload, cheap_space, tmp_path):
    params = []
    for run in ("a", "b"):
        url = f"sqlite:///{tmp_path}/{run}.db"
        res = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=3, storage=url,
                   seed=11, compare_preset=False)["numpy"]
        params.append([t.params for t in _study(url, res.study_name).trials])
    assert params[0] == params[1] and len(params[0]) == 3
    assert len({tuple(sorted(p.items())) for p in params[0]}) == 3


@pytest.mark.slow
def test_a_gpu_tune_is_a_study_of_its_own_and_its_trials_run_there(tiny_workload, cheap_space, tmp_path):
    # The numpy backend has no GPU: each trial fails with its refusal, which shows that it ran
    # with device='cuda'; the study is named for the GPU target, beside the CPU's.
    import optuna

    from dltune.hardware import Hardware
    from dltune.tuning._loop import TooManyFailuresError

    url = f"sqlite:///{tmp_path}/gpu.db"
    with pytest.raises(TooManyFailuresError, match="The numpy backend runs on the CPU only"):
        tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=2, storage=url,
             seed=0, base=TrainConfig(device="cuda"), compare_preset=False)
    [summary] = optuna.get_all_study_summaries(url)
    assert summary.study_name.endswith(f":numpy:{Hardware.detect().target}+cuda")
    study = _study(url, summary.study_name)
    assert {t.user_attrs["config"]["device"] for t in study.trials} == {"cuda"}


@pytest.mark.slow
def test_repeat_best_measures_the_most_accurate_trials_again_once(tiny_workload, cheap_space, tmp_path, tiny_kb):
    """The K most accurate trials run once more with seed + 1, stored on the study (a resumed
    call measures none again), and recommend counts each as a configuration of two runs."""
    from optuna.trial import TrialState

    from dltune.measure import Measurement
    from dltune.surrogate import fitted_model
    from dltune.surrogate._seed_noise import measured_key

    url = f"sqlite:///{tmp_path}/r.db"
    res = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=4, storage=url,
               seed=0, compare_preset=False, repeat_best=3)["numpy"]
    study = _study(url, res.study_name)
    complete = sorted(study.get_trials(states=(TrialState.COMPLETE,)),
                      key=lambda t: (-t.user_attrs["test_accuracy"], t.user_attrs["train_time_s"], t.number))
    assert [r["trial"] for r in res.repeats] == [t.number for t in complete[:3]]
    ids = []
    for row, trial in zip(res.repeats, complete, strict=False):
        stored = Measurement.from_dict(study.user_attrs[f"repeat_measurement:{trial.number}"])
        assert stored.ok and stored.config == {**trial.user_attrs["config"], "seed": 1} and row["seed"] == 1
        assert row["accuracy"] == trial.user_attrs["test_accuracy"]
        assert row["accuracy_again"] == stored.metrics["test_accuracy"] and row["status"] == "ok"
        assert row["train_time_again_s"] == stored.metrics["train_time_s"]
        ids.append(stored.id)
    assert res.repeat_summary()["pairs"] == 3 and res.repeat_summary()["seed_noise_pts"] is not None

    again = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=4, storage=url,
                 seed=0, compare_preset=False, repeat_best=3)["numpy"]
    assert again.repeats == res.repeats and len(_study(url, res.study_name).trials) == 4
    assert [Measurement.from_dict(_study(url, res.study_name).user_attrs[f"repeat_measurement:{r['trial']}"]).id
            for r in again.repeats] == ids  # not measured again

    perf = fitted_model(storage=url, kb_path=tiny_kb / "records.jsonl")
    runs, _ = perf.measured_runs(tiny_workload.dataset.fingerprint(), "mlp")
    by_key = {measured_key(r["config"]): r for r in runs}
    for row, trial in zip(res.repeats, complete, strict=False):
        entry = by_key[measured_key(trial.user_attrs["config"])]
        assert entry["runs"] == 2
        assert entry["accuracy"] == pytest.approx((row["accuracy"] + row["accuracy_again"]) / 2)


@pytest.mark.parametrize(("old", "new"), [({"n_trials": 3}, "'trials'"), ({"timeout": 60.0}, "'time_budget_s'"),
                                          ({"objectives": "accuracy"}, "'objective'")])
def test_tune_refuses_a_renamed_keyword_with_its_new_name(tmp_path, old, new):
    with pytest.raises(ParameterError, match=f"parameter of tune\\(\\) is now {new}"):
        tune("digits", frameworks="numpy", storage=f"sqlite:///{tmp_path}/t.db", **old)
    with pytest.raises(TypeError, match="unexpected keyword argument 'trails'"):
        tune("digits", frameworks="numpy", trails=3)
    assert list(tmp_path.iterdir()) == []


def test_tune_speaks_the_shared_vocabulary(tmp_path):
    """Old objective and constraint names get a pointer; a study needs a storage."""
    url = f"sqlite:///{tmp_path}/t.db"
    with pytest.raises(ParameterError, match="no longer accepts 'both': use 'balanced'"):
        tune("digits", frameworks="numpy", objective="both", storage=url)
    with pytest.raises(ParameterError, match="no longer accepts 'max_memory': use 'max_memory_mb'"):
        tune("digits", frameworks="numpy", constraints={"max_memory": 100}, storage=url)
    with pytest.raises(ParameterError, match="'storage' parameter of tune\\(\\) must be a database URL"):
        tune("digits", frameworks="numpy", storage=None)
    assert list(tmp_path.iterdir()) == []
