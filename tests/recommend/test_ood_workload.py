"""A workload outside what the knowledge base measured: recommend says so, and why, in the
answer's note and in full in its details."""

from __future__ import annotations

from dltune.recommend import recommend


def test_a_workload_outside_the_measured_range_is_flagged_in_the_answer(monkeypatch):
    from dltune._workload import Workload
    from dltune.data import Dataset

    # The landmarks fit scikit-learn models: seconds that say nothing here.
    monkeypatch.setattr(Dataset, "landmarks", lambda self: {"landmark_logreg": 0.5, "landmark_1nn": 0.5})
    workload = Workload.from_name("synthetic", "lenet", classes=20, height=12, width=40, n_train=200, n_test=100)
    rec = recommend(workload, storage=None, frameworks=["torch"])
    assert rec.out_of_distribution
    assert rec.ood_reasons[:2] == ["20 classes is outside the measured 2..10",
                                   "input 1x12x40 is outside the measured 1..3 x 8..32 x 8..32"]
    assert rec.caveat == "20 classes is outside the measured 2..10: the figures are rough"
    assert f"  note: {rec.caveat}" in rec.summary()
    assert "out of distribution: 20 classes is outside the measured 2..10; input 1x12x40" in rec.details()
    assert any(n.endswith("wider: the workload lies outside the measured range") for n in rec.interval_notes)
