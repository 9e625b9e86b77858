"""What tune does around a trial's run stays off the run's path: the worker starts while the
storage opens, and curve points are written while the run goes on."""

from __future__ import annotations


def test_tune_starts_the_trials_worker_before_it_opens_the_storage(tiny_workload, cheap_space,
                                                                   tmp_path, monkeypatch):
    """The worker imports its framework while tune opens the storage; every trial then runs in
    that worker (same key), and the first run still reports the import time."""
    import dltune.tuning._tune as tune_module
    from dltune.runtime import WorkerPool
    from dltune.tuning import tune
    from dltune.tuning._objective import record_from_trial

    prestarted, acquired, at_open = [], [], []
    real_open = tune_module.open_storage
    monkeypatch.setattr(tune_module, "open_storage",
                        lambda url: (at_open.append(len(prestarted)), real_open(url))[1])
    with WorkerPool() as pool:
        real_prestart, real_acquire = pool.prestart, pool.acquire

        def prestart(interpreter, env, setup=None):
            prestarted.append((interpreter, sorted(env.items())))
            real_prestart(interpreter, env, setup)

        def acquire(interpreter, env):
            acquired.append((interpreter, sorted(env.items())))
            return real_acquire(interpreter, env)

        monkeypatch.setattr(pool, "prestart", prestart)
        monkeypatch.setattr(pool, "acquire", acquire)
        result = tune(tiny_workload, frameworks="numpy", space=cheap_space.fix(epochs=1), trials=2,
                      seed=0, storage=f"sqlite:///{tmp_path}/t.db", compare_preset=False,
                      thread_configs=0, pool=pool)
    assert at_open == [1] and len(prestarted) == 1
    assert acquired == prestarted * 2
    trials = sorted(result.studies["numpy"].trials, key=lambda t: t.number)
    imports = [record_from_trial(t).metrics["import_time_s"] for t in trials]
    assert imports[0] > 0 and imports[1] == 0.0


def test_a_curve_point_is_written_while_the_run_goes_on(tiny_workload, cheap_space, monkeypatch):
    """A multi-objective trial's per-epoch accuracy (nothing prunes on it) is written from a
    thread of its own: here the write waits for the run to return, and still lands on the
    trial before it is told."""
    import threading

    import optuna

    import dltune._bench
    from dltune.config import TrainConfig
    from dltune.runtime import WorkerPool
    from dltune.tuning._loop import run_trials
    from dltune.tuning._objective import TrialRunner, check_objectives

    returned, waited = threading.Event(), []
    real_measure = dltune._bench.measure

    def measure(*args, **kwargs):
        record = real_measure(*args, **kwargs)
        returned.set()
        return record

    monkeypatch.setattr(dltune._bench, "measure", measure)
    storage = optuna.storages.InMemoryStorage()
    real_write = storage.set_trial_intermediate_value

    def write(trial_id, step, value):
        waited.append(returned.wait(5))  # written inline, the run would still be waiting here
        real_write(trial_id, step, value)

    monkeypatch.setattr(storage, "set_trial_intermediate_value", write)
    study = optuna.create_study(storage=storage, directions=["maximize", "minimize"],
                                sampler=optuna.samplers.RandomSampler(seed=0))
    runner = TrialRunner(tiny_workload, "numpy", cheap_space.without_knobs("numpy").fix(epochs=1),
                         TrainConfig(epochs=1), check_objectives("balanced"), storage=storage)
    with WorkerPool(max_workers=1) as pool:
        runner.pool = pool
        assert run_trials(study, runner, 1, storage=storage) == 1
    trial = study.trials[0]
    assert waited == [True]
    assert trial.intermediate_values == {0: trial.user_attrs["test_accuracy"]}
