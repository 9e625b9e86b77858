"""A configuration a COMPLETE trial of the study already measured is not trained again."""

from __future__ import annotations

import pytest


def _runner(workload, space, storage, pool=None):
    from dltune.config import TrainConfig
    from dltune.tuning._objective import TrialRunner, check_objectives

    return TrialRunner(workload, "numpy", space, TrainConfig(epochs=1), check_objectives("balanced"),
                       storage=storage, pool=pool)


def _study(storage):
    import optuna

    return optuna.create_study(storage=storage, directions=["maximize", "minimize"],
                               sampler=optuna.samplers.RandomSampler(seed=0))


@pytest.fixture
def measured(monkeypatch):
    """The configurations ``dltune._bench.measure`` was called with (it still measures)."""
    import dltune._bench

    calls, real = [], dltune._bench.measure

    def spy(workload, config, **kwargs):
        calls.append(config)
        return real(workload, config, **kwargs)

    monkeypatch.setattr(dltune._bench, "measure", spy)
    return calls


def test_a_replayed_configuration_is_pruned_untrained_and_the_study_goes_on(
    tiny_workload, cheap_space, measured
):
    """The sampler proposes trial 0's parameters again (as a seeded sampler rebuilt after a
    kill does): that trial is PRUNED without training, pointing at trial 0, and the loop runs
    one more trial, so the COMPLETE trials are as many distinct measurements as asked for."""
    import optuna
    from optuna.trial import TrialState

    from dltune.runtime import WorkerPool
    from dltune.tuning._loop import run_trials

    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    with WorkerPool(max_workers=1) as pool:
        runner = _runner(tiny_workload, cheap_space.without_knobs("numpy").fix(epochs=1), storage, pool)
        assert run_trials(study, runner, 1, storage=storage) == 1
        first = study.trials[0]
        study.enqueue_trial(first.params)
        assert run_trials(study, runner, 2, storage=storage) == 2
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.COMPLETE]
    replay = trials[1]
    assert replay.params == first.params and replay.user_attrs["config"] == first.user_attrs["config"]
    assert replay.user_attrs["duplicate_of"] == 0 and "trial #0" in replay.user_attrs["prune_reason"]
    assert replay.values is None and "test_accuracy" not in replay.user_attrs  # no measurement
    assert len(measured) == 2 and trials[2].params != first.params  # trained trials 0 and 2 only


def test_a_space_with_fewer_configurations_than_trials_stops_with_a_reason(
    tiny_workload, cheap_space, measured
):
    """Every dimension fixed: once measured, each proposal repeats it, so the loop stops at its
    run bound and says why instead of training the same configuration again."""
    import optuna

    from dltune.tuning._loop import run_trials

    space = cheap_space.without_knobs("numpy").fix(learning_rate=0.1, batch_size=32, epochs=1,
                                                   optimizer="sgd", momentum=0.9, weight_decay=0.0)
    runner = _runner(tiny_workload, space, None)
    config, env = space.to_config(space.sample(optuna.trial.FixedTrial({})), runner.base)
    storage = optuna.storages.InMemoryStorage()
    study = _study(storage)
    study.add_trial(optuna.trial.create_trial(
        values=[0.9, 1.0], user_attrs={"config": config.to_dict(), "startup_env": env, "phase": "hyper"}))
    with pytest.warns(UserWarning, match="3 proposed a configuration already measured: the search "
                                         "space may hold fewer than 2"):
        assert run_trials(study, runner, 2, storage=storage, max_runs=3) == 3
    assert measured == []
    assert [t.user_attrs.get("duplicate_of") for t in study.trials] == [None, 0, 0, 0]
