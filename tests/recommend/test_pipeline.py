from __future__ import annotations

import numpy as np
import pytest

from dltune.kb import RecordStore, validate_kb
from dltune.recommend import RecommendPolicy, recommend
from dltune.recommend._pipeline import ScoredCandidates

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workload():
    from dltune import Workload

    return Workload.from_name("digits", "mlp", n_train=300, n_test=150)


def _scored(monkeypatch) -> list[tuple[ScoredCandidates, int]]:
    """Every ``ScoredCandidates.pick`` from now on: the candidates as scored, and the pick."""
    calls: list[tuple[ScoredCandidates, int]] = []
    real = ScoredCandidates.pick

    def spy(self, objective, among=None):
        chosen = real(self, objective, among)
        calls.append((self, chosen))
        return chosen

    monkeypatch.setattr(ScoredCandidates, "pick", spy)
    return calls


def test_recommend_and_kb_validate_score_through_one_pipeline(tiny_kb, workload, monkeypatch):
    """A policy field changed moves both recommend's answer and kb validate's intervals and
    picks: both score through ``score_candidates`` and pick with its policy."""
    from dltune.recommend import _recommend

    monkeypatch.setattr(_recommend, "_predictions", {})
    kb, records = tiny_kb / "records.jsonl", RecordStore(tiny_kb).records()
    # Memory intervals reach 10x their point (another installation's pages: 1.3x by default),
    # and every candidate is tied for accuracy: the highest point wins.
    changed = RecommendPolicy(installation_memory_factor=10.0, accuracy_tie=1.0)
    answers, reports, seen = {}, {}, {}
    for name, policy in (("default", None), ("changed", changed)):
        calls = _scored(monkeypatch)
        answers[name] = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None,
                                  policy=policy)
        reports[name] = validate_kb(records, objective="accuracy", calibrate=False, policy=policy)
        assert len(calls) == 1 + len(reports[name].workloads)  # recommend's, then each held-out one
        assert all(scored.policy == (policy or RecommendPolicy()) for scored, _ in calls)
        seen[name] = calls
        monkeypatch.undo()
        monkeypatch.setattr(_recommend, "_predictions", {})

    for name, calls in seen.items():
        for scored, chosen in calls:
            point, high = scored.predicted["peak_rss_mb"], scored.predicted["peak_rss_mb_high"]
            reach = np.all(high >= 10.0 * point * (1 - 1e-12))
            assert reach == (name == "changed")
            accuracy = scored.predicted["accuracy"]
            if name == "changed":  # all tied: the highest point (measured or predicted) wins
                assert accuracy[chosen] == accuracy.max()
            else:
                assert scored.ranked_by[chosen] >= scored.ranked_by.max() - 0.005
    mem = [answers[name].predicted["peak_rss_mb"] for name in ("default", "changed")]
    assert mem[1][2] >= 10.0 * mem[1][0] * (1 - 1e-12) and mem[0][2] < 10.0 * mem[0][0]
    # The picks that the default policy made below the highest point move.
    for name in ("default", "changed"):
        assert answers[name].predicted["accuracy"][0] == seen[name][0][0].predicted["accuracy"][seen[name][0][1]]
    for (plain, plain_pick), (_, changed_pick) in zip(seen["default"], seen["changed"], strict=True):
        if plain.predicted["accuracy"][plain_pick] < plain.predicted["accuracy"].max():
            assert changed_pick != plain_pick
    # What kb validate reports is what those picks and intervals score: a pick that moved
    # moves its row, and wider memory intervals hold no fewer runs.
    rows = zip(reports["default"].workloads, reports["changed"].workloads, seen["default"][1:],
               seen["changed"][1:], strict=True)
    for plain_row, changed_row, (scored, plain_pick), (_, changed_pick) in rows:
        assert plain_row["ranked_own_share"] == scored.own_share
        assert (plain_row["picked_config"] == changed_row["picked_config"]) == (plain_pick == changed_pick)
    coverage = [reports[name].overall["memory_coverage_pct"] for name in ("default", "changed")]
    assert coverage[0] <= coverage[1]


def test_score_candidates_is_predict_rank_measured_hedge_widen(tiny_kb):
    """One workload's records as candidates: the ranking is the learnt low ends (the workload
    is like the measured ones), measured candidates take what they measured, and the intervals
    are what the hedges and the widening make of the predictions, with their notes."""
    from dltune.recommend import score_candidates
    from dltune.recommend._pipeline import Measured
    from dltune.surrogate import PerformanceModel, record_row
    from dltune.surrogate._records import workload_label

    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    label = workload_label(records[0])
    held = [d for d in records if workload_label(d) == label]
    model = PerformanceModel(max_iter=20, calibrate=False).fit([d for d in records if workload_label(d) != label])
    rows = [record_row(d) for d in held]
    meta, hardware = rows[0]["meta"], rows[0]["hardware"]
    policy = RecommendPolicy()
    scored = score_candidates(meta, hardware, rows, model, policy)
    learnt = model.predict(rows)
    ranked, share, band = model.ranking_accuracy(rows, meta, learnt["accuracy_low"])
    hedged, notes = model.hedge_threads(learnt, rows, hardware)
    hedged, more = model.hedge_machines(hedged, rows, hardware)
    widened, widen_notes = model.widen(hedged, meta, hardware, policy, consensus=band)
    assert scored.own_share == share and np.array_equal(scored.ranked_by, ranked)
    assert all(np.array_equal(scored.predicted[k], widened[k]) for k in widened)
    assert scored.notes == [*notes, *more, *widen_notes] and scored.measured is None
    assert not scored.runs.any()
    # Two candidates measured: their accuracy is what they measured, ranked by its low end.
    measured = Measured(np.array([0, 2]), np.array([1, 3]), np.array([0.5, 0.9]), np.array([0.4, 0.85]),
                        np.array([0.6, 0.95]), None, 2)
    with_runs = score_candidates(meta, hardware, rows, model, policy, measured=measured)
    assert with_runs.runs[[0, 1, 2]].tolist() == [1, 0, 3]
    assert with_runs.predicted["accuracy"][[0, 2]].tolist() == [0.5, 0.9]
    assert with_runs.predicted["accuracy_low"][[0, 2]].tolist() == [0.4, 0.85]
    assert with_runs.ranked_by[[0, 2]].tolist() == [0.4, 0.85]
    assert np.array_equal(with_runs.ranked_by[1:2], scored.ranked_by[1:2])
