from __future__ import annotations

import pytest

from dltune._errors import ParameterError
from dltune.kb import SUITES, plan_suite
from dltune.kb._suite import FRESH_REVISIONS, run_key


def test_reference_suite_spans_the_design():
    workloads = SUITES["reference"]
    assert len(workloads) >= 8
    sizes = [w.params.get("n_train", 1437) for w in workloads]
    assert min(sizes) < 1000 and max(sizes) >= 10_000
    sides = {w.params.get("height", 8) for w in workloads}
    assert min(sides) == 8 and max(sides) == 32
    assert {w.params.get("channels", 1) for w in workloads} == {1, 3}
    assert {w.model for w in workloads} == {"mlp", "lenet", "cifar_quick"}
    assert any(w.dataset == "digits" for w in workloads)
    assert len({w.params.get("difficulty") for w in workloads if w.dataset == "synthetic"}) >= 4


def test_plan_interleaves_every_pair_first():
    frameworks = ["torch", "tensorflow"]
    plan = plan_suite("reference", frameworks, configs_per_pair=4, repeats=1)
    n_pairs = len(SUITES["reference"]) * len(frameworks)
    first = {(p.workload.name, p.config.framework) for p in plan[:n_pairs]}
    assert len(first) == n_pairs  # a build cut short after one round still covers every pair
    assert [p.round for p in plan] == sorted(p.round for p in plan)
    for r in range(max(p.round for p in plan) + 1):
        costs = [p.est_cost for p in plan if p.round == r]
        assert costs == sorted(costs)  # cheapest first within a round
    assert len({p.key for p in plan}) == len(plan)


def test_plan_holds_presets_repeats_and_both_thread_targets():
    plan = plan_suite("reference", ["torch"], configs_per_pair=8, repeats=2, max_threads=2)
    kinds = {p.kind for p in plan}
    assert kinds == {"space-filling", "preset", "repeat", "fresh"}
    fresh = [p for p in plan if p.kind == "fresh"]
    assert len(fresh) == 3 * len(SUITES["reference"]) and all(p.repeat == 2 and p.config.seed == 0 for p in fresh)
    measured = {p.key for p in plan if p.kind == "space-filling"}
    assert all(run_key(p.workload, p.config, 0) in measured for p in fresh)
    presets = [p for p in plan if p.kind == "preset"]
    assert all(p.config.preset_name for p in presets)
    assert all(p.config.epochs <= p.workload.max_epochs for p in presets)
    threads = {(p.config.threads.intra_op, p.config.threads.cores) for p in plan}
    assert (1, 1) in threads and (2, None) in threads  # 1 thread pinned to one core: 1-core target
    repeats = [p for p in plan if p.kind == "repeat"]
    assert all(p.repeat == 1 and p.config.seed == 1 for p in repeats)


def test_a_backend_whose_memory_changed_measures_its_fresh_runs_again():
    """TensorFlow's (and MXNet's) fresh-process runs of the first builds held copies of the data set:
    its runs in a new process get new keys (a resumed build measures them again); the same
    configurations, and every other run, keep theirs."""
    plan = plan_suite("reference", ["torch", "tensorflow"], configs_per_pair=4, repeats=1)
    fresh = {fw: [p for p in plan if p.kind == "fresh" and p.config.framework == fw] for fw in ("torch", "tensorflow")}
    assert {"tensorflow": 1, "mxnet": 1}.items() <= FRESH_REVISIONS.items()
    assert "torch" not in FRESH_REVISIONS
    assert {p.repeat for p in fresh["torch"]} == {2} and {p.repeat for p in fresh["tensorflow"]} == {3}
    assert len(fresh["tensorflow"]) == len(fresh["torch"]) == 3 * len(SUITES["reference"])
    for p in fresh["tensorflow"]:
        assert p.key == run_key(p.workload, p.config, 3) != run_key(p.workload, p.config, 2)
    assert {p.repeat for p in plan if p.kind != "fresh"} <= {0, 1}
    assert {p.config.optimizer for p in plan} == {"sgd", "momentum", "adam"}


def test_a_calibration_on_more_cores_runs_each_configuration_with_all_of_them_too():
    from dltune.kb._suite import CALIBRATION_PLAN

    plain = plan_suite("calibration", ["torch", "tensorflow"], **CALIBRATION_PLAN)
    assert plan_suite("calibration", ["torch", "tensorflow"], all_cores=2, **CALIBRATION_PLAN) == plain
    wide = plan_suite("calibration", ["torch", "tensorflow"], all_cores=16, **CALIBRATION_PLAN)
    extra = [p for p in wide if p.kind == "all-cores"]
    # The same runs as before (same keys), then each space-filling one with 16 threads.
    assert [p.key for p in wide if p.kind != "all-cores"] == [p.key for p in plain]
    filling = [p for p in plain if p.kind == "space-filling"]
    assert len(extra) == len(filling) == 3 * 2 * CALIBRATION_PLAN["configs_per_pair"]
    def same(p):
        return p.workload.name, repr({k: v for k, v in p.config.to_dict().items() if k != "threads"})

    assert sorted(map(same, extra)) == sorted(map(same, filling))
    assert {(p.config.threads.intra_op, p.config.threads.cores) for p in extra} == {(16, None)}
    assert min(p.round for p in extra) > max(p.round for p in plain if p.kind != "all-cores") - 1
    with pytest.raises(ParameterError, match="all_cores"):
        plan_suite("calibration", ["torch"], all_cores=0)


def test_adding_a_framework_keeps_the_keys_of_the_others():
    torch_only = {p.key for p in plan_suite("reference", ["torch"], 4, 1)}
    both = {p.key for p in plan_suite("reference", ["torch", "tensorflow"], 4, 1)}
    assert torch_only <= both


def test_plan_rejects_bad_input():
    with pytest.raises(ParameterError, match=r"The 'suite' parameter must be one of .* Got 'nope' instead."):
        plan_suite("nope")
    with pytest.raises(ParameterError, match=r"The 'configs_per_pair' parameter must be an int in \[1, 4096\]. Got 0"):
        plan_suite("tiny", configs_per_pair=0)


def test_adding_a_workload_keeps_the_keys_of_the_others(monkeypatch):
    full = {p.key for p in plan_suite("reference", ["torch"], 4, 1)}
    monkeypatch.setitem(SUITES, "reference", SUITES["reference"][:-1])
    fewer = {p.key for p in plan_suite("reference", ["torch"], 4, 1)}
    assert fewer < full  # a build resumed after a workload was added measures only the new runs
