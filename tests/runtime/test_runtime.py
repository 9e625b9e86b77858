"""The worker runtime: isolation, thread settings, reuse, and failures that become records."""

from __future__ import annotations

import os
import sys

import pytest

from dltune import benchmark
from dltune._bench import measure
from dltune._workload import Workload
from dltune.config import ThreadConfig, TrainConfig, usable_cores
from dltune.runtime import WorkerPool

FAST = dict(epochs=1, batch_size=64, learning_rate=0.05)


@pytest.fixture(scope="module")
def workload():
    return Workload.from_name("digits", "mlp", n_train=300, n_test=100)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(max_workers=2) as p:
        yield p


@pytest.fixture
def faults(monkeypatch):
    monkeypatch.setenv("DLTUNE_ENABLE_FAULTS", "1")


def test_warm_worker_is_reused_for_the_same_environment(workload, pool):
    config = TrainConfig(framework="torch", **FAST)
    first = measure(workload, config, pool=pool)
    second = measure(workload, config, pool=pool)
    assert first.ok and second.ok
    assert first.metrics["import_time_s"] > 0
    assert second.metrics["import_time_s"] == 0.0  # no second framework import


def test_a_worker_whose_threads_spin_when_idle_is_not_kept_warm(workload, monkeypatch):
    # OMP_WAIT_POLICY=active (a start-up knob tune searches): an idle warm torch worker started
    # with it busy-waits on a core, slowing every run measured meanwhile in other workers. The
    # pool decides by the worker's environment alone: numpy's workers start quickest.
    from dltune.runtime._pool import spins_when_idle

    config = TrainConfig(framework="numpy", **FAST)
    with WorkerPool(max_workers=3) as pool:
        for policy, kept in (("passive", True), ("ACTIVE", False)):
            monkeypatch.setenv("OMP_WAIT_POLICY", policy)
            record = measure(workload, config, pool=pool)
            assert record.ok and record.metrics["import_time_s"] > 0
            warm = [dict(key[1]).get("OMP_WAIT_POLICY") for key in pool._workers]
            assert (policy in warm) is kept, warm
            assert all(w.alive for w in pool._workers.values())
        # The next run with the spinning policy starts a new worker (it imports again).
        assert measure(workload, config, pool=pool).metrics["import_time_s"] > 0
    assert spins_when_idle({"KMP_BLOCKTIME": "infinite"}) and not spins_when_idle({"KMP_BLOCKTIME": "200"})
    assert not spins_when_idle({})


@pytest.mark.parametrize("threads", sorted({1, usable_cores()}))
def test_threads_actually_used_are_reported(workload, pool, threads):
    config = TrainConfig(framework="torch", threads=ThreadConfig.uniform(threads), **FAST)
    record = measure(workload, config, pool=pool)
    assert record.ok, record.error
    used = record.metrics["threads"]
    assert used["intra_op"] == threads
    assert used["inter_op"] == 1
    assert used["env"]["OMP_NUM_THREADS"] == str(threads)


def test_cpu_affinity_restricts_the_worker(workload, pool):
    config = TrainConfig(framework="torch", threads=ThreadConfig(intra_op=1, cores=1), **FAST)
    record = measure(workload, config, pool=pool)
    assert record.ok, record.error
    assert record.metrics["threads"]["cores"] == 1
    assert record.hardware["usable_cores"] == 1


@pytest.mark.parametrize(
    "fault, kind, reason",
    [
        ("raise", "exception", "RuntimeError: fault injected by test hook"),
        ("segfault", "signal", "SIGSEGV"),
        ("exit", "exit", "status 3"),
    ],
)
def test_a_failed_run_becomes_a_record_and_the_next_run_succeeds(workload, pool, faults, fault, kind, reason):
    config = TrainConfig(framework="torch", **FAST)
    failed = measure(workload, config, pool=pool, fault=fault)
    assert failed.status == "failed"
    assert failed.error["kind"] == kind
    assert reason in failed.error["message"]
    after = measure(workload, config, pool=pool)
    assert after.ok, after.error


def test_a_hung_run_is_killed_at_its_timeout(workload, pool, faults):
    config = TrainConfig(framework="torch", timeout_s=3.0, **FAST)
    record = measure(workload, config, pool=pool, fault="hang")
    assert record.status == "failed"
    assert record.error["kind"] == "timeout"
    assert "timeout of 3 s" in record.error["message"]
    # A fresh worker (its framework import included) must be given more than 3 s on a busy machine.
    assert measure(workload, config.replace(timeout_s=600), pool=pool).ok


def test_fault_hook_needs_to_be_enabled(workload, pool, monkeypatch):
    monkeypatch.delenv("DLTUNE_ENABLE_FAULTS", raising=False)
    from dltune._errors import ParameterError

    with pytest.raises(ParameterError, match="test hook"):
        measure(workload, TrainConfig(framework="torch", **FAST), pool=pool, fault="raise")


def test_benchmark_repeats_report_median_min_max(workload, pool):
    (record,) = benchmark(workload, TrainConfig(framework="torch", **FAST), repeats=3, pool=pool,
                          storage=None)
    assert record.ok
    times = [r["train_time_s"] for r in record.metrics["repeats"]]
    assert len(times) == 3
    assert record.metrics["train_time_s_min"] == min(times)
    assert record.metrics["train_time_s_max"] == max(times)
    assert record.metrics["train_time_s"] == sorted(times)[1]


def test_measurement_has_the_study_metrics(workload, pool):
    # Batches of 1: enough steps that the training windows span several of the OS's 10 ms CPU
    # clock ticks (with batches of 32 an idle machine trains an epoch between two ticks).
    record = measure(workload, TrainConfig(framework="torch", epochs=2, batch_size=1), pool=pool)
    m = record.metrics
    for key in ("train_time_s", "test_time_s", "cpu_percent_mean", "cpu_percent_p95", "peak_rss_mb"):
        assert m[key] > 0, key
    assert 0 < m["cpu_fraction_mean"] <= 1.5
    assert m["peak_rss_delta_mb"] == pytest.approx(m["peak_rss_mb"] - m["baseline_rss_mb"])
    if sys.platform.startswith("linux"):
        # Without the libraries' mapped file pages, which vary with the page cache.
        assert 0 < m["peak_rss_anon_mb"] < m["peak_rss_mb"]
    assert len(m["curves"]) == 2
    assert m["param_count"] == workload.model.param_count
    assert record.versions["framework"]
    assert record.hardware["fingerprint"]
    assert record.workload["meta"]["n_train"] == 300
    assert os.getpid() != m.get("worker_pid", -1)
