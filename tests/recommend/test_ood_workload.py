"""A workload outside what the knowledge base measured: recommend says so, and why, in the
answer's note and in full in its details."""

from __future__ import annotations

from dltune.recommend import recommend


def test_a_workload_outside_the_measured_range_is_flagged_in_the_answer(monkeypatch):
    from dltune._workload import Workload
    from dltune.data import Dataset

    # The landmarks fit scikit-learn models: seconds that say nothing here.
    monkeypatch.setattr(Dataset, "landmarks", lambda self: {"landmark_logreg": 0.5, "landmark_1nn": 0.5})
    workload = Workload.from_name("synthetic", "lenet", classes=100, height=64, width=64, n_train=200, n_test=100)
    rec = recommend(workload, storage=None, frameworks=["torch"])
    assert rec.out_of_distribution
    assert rec.ood_reasons[:2] == ["100 classes is outside the measured 2..50",
                                   "input 1x64x64 is outside the measured 1..3 x 8..48 x 8..48"]
    assert rec.caveat == "100 classes is outside the measured 2..50: the figures are rough"
    assert f"  note: {rec.caveat}" in rec.summary()
    assert "out of distribution: 100 classes is outside the measured 2..50; input 1x64x64" in rec.details()
    assert any(n.endswith("wider: the workload lies outside the measured range") for n in rec.interval_notes)
