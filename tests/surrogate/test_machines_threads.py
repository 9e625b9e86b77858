"""Runs with more threads than the knowledge base's: what a many-core machine's calibration
teaches the training-time model, and the evidence recommend names for its thread counts."""

from __future__ import annotations

import numpy as np
import pytest

from dltune.kb import RecordStore
from dltune.surrogate import PerformanceModel, record_row
from dltune.surrogate._train_time import kind_shares

pytestmark = pytest.mark.slow

# A 16-core machine the tiny knowledge base never measured (no BLAS listed: its machine key has
# no kernels, wherever the tests run).
BIG = {"cpu_model": "Many-core CPU", "logical_cores": 16, "physical_cores": 16, "usable_cores": 16,
       "memory_gb": 64.0, "cpu_flags": ["avx2"], "gpus": [], "blas": [], "target": "many-core-cpu-16of16c"}
KEY = "Many-core CPU [avx2]|16|64"


def _at(record: dict, n: int) -> dict:
    """``record`` as run with ``n`` intra-op threads on ``BIG``: all its cores, else pinned to ``n``
    (as ``dltune kb calibrate`` runs its grid)."""
    threads = ({"intra_op": n, "inter_op": 1, "blas": n, "cores": None} if n == 16
               else {"intra_op": n, "inter_op": 1, "blas": n, "cores": n})
    return dict(record, id=f"{record['id']}@{n}", kb={"suite": "quick", "kind": "probe"},
                config=dict(record["config"], threads=threads),
                hardware=dict(BIG, usable_cores=n, target=f"many-core-cpu-{n}of16c"))


def probes(records: list[dict], gain: dict[int, float]) -> list[dict]:
    """Quick-calibration probes on ``BIG`` at 1 and 2 threads and at each count of ``gain``: twice
    the reference cost model's seconds for the same run (so 2x at every kind of work), times
    ``gain[n]`` beyond 2 threads (what that many threads gain against the model's extrapolation)."""
    base = PerformanceModel(max_iter=20, calibrate=False).fit(records)
    out = [_at(d, n) for d in records[::2] for n in (1, 2, *gain)]
    seconds = kind_shares(base.train_time_.term_seconds(base.encoder_.transform([record_row(p) for p in out])))
    for p, s in zip(out, seconds.sum(axis=1), strict=True):
        n = p["config"]["threads"]["intra_op"]
        p["metrics"] = dict(p["metrics"], train_time_s=float(2.0 * s * gain.get(n, 1.0)), curves=[])
    return out


@pytest.fixture(scope="module")
def records(tiny_kb):
    return [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]


def test_probes_with_more_threads_get_a_thread_delta_and_are_counted(records, tmp_path):
    gain = {4: 0.8, 8: 0.6, 16: 0.5}
    calibration = probes(records, gain)
    model = PerformanceModel(max_iter=20, calibrate=False).fit(records + calibration)
    speed = model.machine_speed_[KEY]
    # The kinds are fitted on the probes within the reference machine's 2 threads (2x each);
    # beyond, each count's gain against the extrapolation is a delta of its own.
    assert np.exp(speed["numpy"]) == pytest.approx(2.0, rel=0.02)
    assert speed["@"] == 2
    per = len(records[::2])
    for n, g in gain.items():
        assert np.exp(speed[f"*@{n}"]) == pytest.approx(g, rel=0.02)
        assert np.exp(speed[f"numpy@{n}"]) == pytest.approx(g, rel=0.02)
        assert speed[f"#*@{n}"] == speed[f"#numpy@{n}"] == per
    row = record_row(calibration[-1])  # a 16-thread probe: predicted as measured
    assert model.predict([row])["train_time_s"][0] == pytest.approx(calibration[-1]["metrics"]["train_time_s"], rel=0.03)
    evidence = model.threads_evidence(BIG)
    assert evidence == {"measured": 2, "most": 16, "machine": "many-core-cpu-16of16c",
                        "runs": {4: per, 8: per, 16: per}, "frameworks": {"numpy": {4: per, 8: per, 16: per}}}
    # An unmeasured 16-core machine has no such runs: candidates keep to the 2 threads measured.
    other = dict(BIG, cpu_model="Other many-core CPU")
    assert model.threads_evidence(other) == {"measured": 2, "most": 2, "machine": None, "runs": {},
                                             "frameworks": {}}
    loaded = PerformanceModel.load(model.save(tmp_path / "m.npz"))
    assert loaded.threads_evidence(BIG) == evidence


def test_probes_at_the_reference_threads_alone_support_no_more(records):
    calibration = [p for p in probes(records, {}) if p["config"]["threads"]["intra_op"] <= 2]
    model = PerformanceModel(max_iter=20, calibrate=False).fit(records + calibration)
    assert "@" not in model.machine_speed_[KEY]
    assert model.threads_evidence(BIG) == {"measured": 2, "most": 2, "machine": None, "runs": {},
                                           "frameworks": {}}


def test_a_slice_with_only_more_threads_is_counted_without_a_delta():
    """A knowledge-base slice of a many-core machine (``scripts/kb_many_cores.py``) ran only
    more threads than the reference: one factor over them, and their counts for the evidence."""
    from dltune.surrogate._calibration import MIN_MACHINE_THREADS_RECORDS

    n = MIN_MACHINE_THREADS_RECORDS
    rows = ([("A", "w1", 1, 1.0), ("A", "w1", 2, 1.0), ("A", "w2", 1, 1.0), ("A", "w2", 2, 1.0)] * 2
            + [("B", "w1", 16, 0.5)] * n + [("B", "w2", 8, 0.5)] * n + [("B", "w2", 4, 0.5)] * (n - 1))
    machines, groups, threads, y = (list(c) for c in zip(*rows, strict=True))
    k = len(y)
    factors = PerformanceModel._machine_factors(
        _Ones(), np.zeros((k, 1)), np.array(y), groups, machines, ["numpy"] * k, ["mlp"] * k,
        threads, {"B"}, 3, spread=False)["B"]
    assert factors["numpy"] == pytest.approx(np.log(0.5)) and "@" not in factors
    # 4 threads: too few runs to count.
    assert {k: v for k, v in factors.items() if k.startswith("#")} == {
        "#*@8": n, "#numpy@8": n, "#*@16": n, "#numpy@16": n}


class _Ones:
    """An estimator whose every prediction is 1 (the machine factors are then the ratios)."""

    def predict(self, X):
        return np.ones(len(X))
