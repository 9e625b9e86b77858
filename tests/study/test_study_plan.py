"""The study's plan: phases, cross matrix, de-duplication, budget sizing, thread variants."""

from __future__ import annotations

from collections import Counter

import pytest

from dltune._errors import ParameterError
from dltune.config import TrainConfig, default_preset
from dltune.study import (
    MXNET_GLUON_DEFAULTS,
    CostModel,
    config_key,
    plan_study,
    preset_config,
    run_study,
    study_presets,
)
from dltune.study._plan import thread_variants

FWS = ["torch", "tensorflow", "mxnet", "theano"]


def _plan(budget_s: float, frameworks=FWS, **kw):
    cost = CostModel(n_train=1437, n_test=360, flops_per_sample=1_000_000)
    return plan_study(frameworks, workload_fingerprint="fp", model="lenet", n_train=1437, cost=cost,
                      budget_s=budget_s, **kw)


def test_presets_and_own_defaults():
    assert study_presets("mnist") == ["caffe", "tensorflow", "theano", "torch", "mxnet"]
    assert study_presets("cifar10") == ["caffe", "tensorflow", "torch"]
    mx = preset_config("mxnet", "tensorflow")
    assert mx.framework == "tensorflow" and mx.preset_name == "mxnet"
    assert (mx.batch_size, mx.learning_rate, mx.epochs, mx.optimizer) == (
        MXNET_GLUON_DEFAULTS["batch_size"], 0.1, 10, "momentum")
    caffe_on_tf = preset_config("caffe", "tensorflow")
    assert caffe_on_tf.framework == "tensorflow" and caffe_on_tf.lr_schedule == "inv"


def test_own_defaults_are_default_preset_s_the_ones_the_knowledge_base_measured():
    own = {r.config.framework: r.config.preset_name for r in _plan(3600, epoch_cap=5).in_phase("defaults")}
    # MXNet's are Caffe's; its Gluon example's defaults are the matrix's "mxnet" column.
    assert own == {"torch": "torch", "tensorflow": "tensorflow", "mxnet": "caffe", "theano": "theano"}
    cifar = _plan(3600, frameworks=["theano", "pytensor", "numpy"], epoch_cap=5, dataset_kind="cifar10")
    assert {r.config.preset_name for r in cifar.in_phase("defaults")} == {"caffe"}


def test_a_colour_data_set_is_planned_with_cifar10_presets_whatever_its_name(tmp_path, monkeypatch):
    from dltune.study import _run

    class Planned(Exception):
        pass

    seen = {}

    def capture(*args, **kwargs):
        seen.update(kwargs)
        raise Planned

    monkeypatch.setattr(_run, "plan_study", capture)
    data = {"n_train": 60, "n_test": 30, "height": 8, "width": 8, "channels": 3, "classes": 3}
    with pytest.raises(Planned):
        run_study("synthetic", model="mlp", frameworks="numpy", storage=f"sqlite:///{tmp_path}/s.db",
                  tune=False, dataset_params=data, progress=False)
    assert seen["dataset_kind"] == "cifar10"


def test_cross_matrix_is_complete_and_deduplicated():
    plan = _plan(3600, epoch_cap=5)
    cross = plan.in_phase("cross_defaults")
    pairs = {(r.config.framework, r.config.preset_name) for r in cross}
    assert pairs == {(fw, p) for fw in FWS for p in study_presets()}
    defaults = plan.in_phase("defaults")
    assert sorted(r.config.framework for r in defaults) == sorted(FWS)
    for run in defaults:
        # the framework's own-defaults run is the diagonal of the matrix, measured once
        assert "cross_defaults" in run.phases
        assert run.config.preset_name == default_preset(run.config.framework)
    keys = [r.key for r in plan.runs]
    assert len(keys) == len(set(keys))
    assert all(r.config.epochs <= 5 for r in plan.runs)


def test_sweeps_vary_one_parameter_around_the_defaults():
    plan = _plan(3600, epoch_cap=5)
    for param in ("batch_size", "learning_rate", "epochs"):
        runs = plan.in_phase(f"sweep:{param}")
        by_fw = Counter(r.config.framework for r in runs)
        assert set(by_fw) == set(FWS) and min(by_fw.values()) >= 2
        for run in runs:
            base = preset_config(default_preset(run.config.framework), run.config.framework)
            base = base.replace(epochs=min(base.epochs, 5))
            differing = {k for k, v in run.config.to_dict().items() if base.to_dict()[k] != v}
            assert differing <= {param}
        # the defaults point is part of every sweep
        assert sum("defaults" in r.phases for r in runs) == len(FWS)


def test_thread_variants_stay_within_the_cores():
    one = thread_variants(1)
    assert all((t.cores or 1) <= 1 and (t.intra_op or 1) <= 1 and (t.blas or 1) <= 1 for _, t in one)
    two = dict(thread_variants(2))
    assert two["1 core"].cores == 1 and two["2 cores"].cores == 2
    assert two["intra 2, blas 1"].intra_op == 2 and two["intra 2, blas 1"].blas == 1
    for _, t in thread_variants(2):
        t.validate(max_cores=2)
    plan = _plan(3600, epoch_cap=5)
    assert len(plan.in_phase("threads")) == len(FWS) * len(thread_variants(2))


def test_budget_sizes_the_epoch_cap_and_the_sweeps():
    small, large = _plan(120), _plan(4 * 3600)
    assert small.epoch_cap < large.epoch_cap
    assert len(small.runs) <= len(large.runs)
    assert any("capped" in note for note in small.notes)
    assert large.tune_trials >= small.tune_trials >= 2
    assert _plan(600, with_tune=False).tune_trials == 0


def test_cost_model_learns_from_observed_runs():
    cost = CostModel(n_train=1000, n_test=200, flops_per_sample=100_000)
    config = TrainConfig(framework="torch", batch_size=50, epochs=4)
    before = cost.predict(config)
    cost.observe(config, wall_s=1.5 + 4 * 10.0)
    assert cost.factor("torch") > 1
    after = cost.predict(config)
    assert after > before - cost.startup_s(TrainConfig(framework="tensorflow"))
    # a run from an earlier session says nothing about a warm worker now
    other = config.replace(batch_size=25)
    cost.observe(other.replace(framework="tensorflow"), wall_s=30.0, warm=False)
    assert cost.startup_s(other.replace(framework="tensorflow")) > 0
    # once a worker with these settings has run, its start-up is no longer predicted
    assert cost.startup_s(config) == 0.0
    assert cost.predict(config) == pytest.approx(1.5 + 4 * 10.0, rel=0.01)


def test_config_key_is_stable_and_ignores_the_timeout():
    a = TrainConfig(framework="torch")
    assert config_key("w", "lenet", a) == config_key("w", "lenet", a.replace(timeout_s=5.0))
    assert config_key("w", "lenet", a) != config_key("w", "lenet", a.replace(batch_size=32))
    assert config_key("w", "lenet", a) != config_key("w2", "lenet", a)


def test_bad_arguments_raise_clear_errors():
    from dltune.study import run_study

    with pytest.raises(ParameterError, match="'time_budget_s' parameter must be a float"):
        run_study("digits", time_budget_s=0)
    with pytest.raises(ParameterError, match="'frameworks' parameter must be 'all' or a subset"):
        run_study("digits", frameworks="torch,caffe", time_budget_s=60)
    with pytest.raises(ParameterError, match="'max_epochs' parameter must be an int"):
        run_study("digits", epoch_cap=0, time_budget_s=60)
    with pytest.raises(ParameterError, match="'budget_minutes' parameter of run_study\\(\\) is now 'time_budget_s'"):
        run_study("digits", budget_minutes=20)
    with pytest.raises(ParameterError, match="'storage' parameter of run_study\\(\\) must be a database URL"):
        run_study("digits", storage=None)
