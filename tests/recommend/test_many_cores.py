"""Recommend for a described many-core machine: more threads than the knowledge base measured
only where runs on such a machine support them, named in the answer."""

from __future__ import annotations

import pytest

from dltune.kb import RecordStore
from dltune.recommend import recommend
from dltune.recommend._candidates import candidate_configs, candidate_threads, measured_candidates
from dltune.recommend._explain import threads_note

pytestmark = pytest.mark.slow

BIG = {"cpu_model": "Many-core CPU", "logical_cores": 16, "physical_cores": 16, "usable_cores": 16,
       "memory_gb": 64.0, "cpu_flags": ["avx2"], "gpus": [], "blas": [], "target": "many-core-cpu-16of16c"}
NONE = "at most 2 of 16 cores: more were never measured on such a machine (`dltune kb calibrate` there measures them)"


@pytest.fixture(scope="module")
def kb(tiny_kb):
    return tiny_kb / "records.jsonl"


@pytest.fixture(scope="module")
def records(tiny_kb):
    return [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]


@pytest.fixture(scope="module")
def workload():
    from dltune import Workload

    return Workload.from_name("digits", "mlp", n_train=300, n_test=150)


def _probes(records: list[dict], gain: float) -> list[dict]:
    """Quick-calibration probes on ``BIG``: at 1 and 2 threads twice the tiny knowledge base's
    cost model's time, at 4, 8 and 16 threads ``gain`` times that (against its extrapolation)."""
    from dltune.surrogate import PerformanceModel, record_row

    out = []
    for d in records[::2]:
        for n in (1, 2, 4, 8, 16):
            threads = {"intra_op": n, "inter_op": 1, "blas": n, "cores": None if n == 16 else n}
            out.append(dict(d, id=f"{d['id']}@{n}", kb={"suite": "quick", "kind": "probe"},
                            config=dict(d["config"], threads=threads),
                            hardware=dict(BIG, usable_cores=n, target=f"many-core-cpu-{n}of16c")))
    seconds = PerformanceModel(max_iter=20, calibrate=False).fit(records).predict(
        [record_row(p) for p in out])["train_time_s"]
    for p, s in zip(out, seconds, strict=True):
        more = p["config"]["threads"]["intra_op"] > 2
        p["metrics"] = dict(p["metrics"], train_time_s=float(2.0 * s * (gain if more else 1.0)), curves=[])
    return out


def test_candidates_keep_to_the_threads_measured():
    assert [t.intra_op for t in candidate_threads(16)] == [1, 2, 4, 8, 16]
    capped = candidate_threads(16, 2)
    assert [(t.intra_op, t.cores) for t in capped] == [(1, 1), (2, 2)]  # pinned: the 2-core target
    assert candidate_threads(2, 2) == candidate_threads(2) == candidate_threads(2, 16)
    configs = candidate_configs(["numpy"], 16, (1, 3), most_threads=2)
    assert max(c.threads.intra_op for c in configs) == 2
    assert {c.threads for c in configs if c.preset_name} == {capped[-1]}
    measured = [{"config": configs[0].to_dict()}]
    assert [c.threads for c in measured_candidates(measured, ["numpy"], 16, most_threads=2)[0]] == capped


def test_a_16_core_machine_with_runs_beyond_2_threads_gets_more_and_is_told_which(kb, records, workload):
    from dltune.surrogate import fitted_model

    calibration = _probes(records, 0.5)
    rec = recommend(workload, BIG, "time", knowledge_base=kb, records=calibration, storage=None)
    threads = rec.config.threads.intra_op
    per = len(records[::2])
    assert threads > 2 and rec.threads_note in rec.reason
    assert (f" Threads: {threads} threads, from {3 * per} runs of many-core-cpu-16of16c with more than 2 "
            f"({per} at 4, {per} at 8, {per} at 16; {3 * per} numpy): training times there are scaled by what "
            "those runs gained.") in rec.reason
    perf = fitted_model(records=calibration, storage=None, kb_path=kb)
    assert perf.threads_evidence(BIG)["most"] == 16
    assert threads_note(perf, BIG, 2, "numpy") == (
        f"2 threads: by {3 * per} runs of many-core-cpu-16of16c with more than 2 ({per} at 4, {per} at 8, "
        f"{per} at 16; {3 * per} numpy), more do not pay")


def test_a_16_core_machine_without_runs_beyond_2_threads_is_told_how_to_measure_them(kb, workload):
    from dltune.surrogate import fitted_model

    rec = recommend(workload, BIG, knowledge_base=kb, storage=None)
    perf = fitted_model(storage=None, kb_path=kb)
    assert max(c.threads.intra_op for c in rec.configs) <= 2
    assert rec.to_dict()["threads_note"] == NONE
    assert f"  threads: {rec.threads_note[:60]}" in rec.summary()
    assert perf.threads_evidence(BIG)["most"] == 2
    assert threads_note(perf, BIG, 2, "numpy") == NONE and len(f"  threads: {NONE}") <= 120  # a summary line
    assert threads_note(perf, BIG, 16, "numpy").startswith("16 threads extrapolated: more than 2 were never measured")
    assert (f" Threads: {threads_note(perf, BIG, rec.config.threads.intra_op, 'numpy')}; "
            "`python scripts/kb_many_cores.py` measures a knowledge-base slice there.") in rec.reason
    # This machine's own core count was measured: nothing to say.
    assert threads_note(perf, dict(BIG, usable_cores=2, logical_cores=2), 2, "numpy") is None
