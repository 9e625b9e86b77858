"""Out of distribution by workload against the shipped knowledge base: a modality, model
family, class count or input shape it never measured is flagged with the reason, and the
intervals widen; a workload it measured is not flagged."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dltune.models import build_model, model_features
from dltune.recommend import RecommendPolicy

POLICY = RecommendPolicy()


@pytest.fixture(scope="module")
def shipped():
    from dltune.surrogate import fitted_model

    return fitted_model(storage=None)


@pytest.fixture(scope="module")
def digits(shipped):
    """The shipped knowledge base's digits / LeNet workload as recommend sees it, and the
    hardware of its machine."""
    measured = next(w for w in shipped.workloads_ if w["dataset"] == "digits" and w["model"] == "lenet")
    meta = dict(measured["meta"], **model_features(build_model("lenet", (1, 8, 8), 10)))
    return meta, shipped.hardware_[0]


def _twenty_classes_12x40(meta):
    return dict(meta, num_classes=20, height=12, width=40, input_size=480,
                **model_features(build_model("lenet", (1, 12, 40), 20)))


def test_a_measured_workload_is_not_flagged(shipped, digits):
    meta, hardware = digits
    assert meta["model_family"] == "cnn" and meta["input_shape"] == [1, 8, 8]
    assert shipped.outside_reasons(meta) == []
    assert shipped.novelty(meta, hardware, POLICY)[:2] == (False, [])


def test_twenty_classes_of_12x40_images_are_flagged_with_the_reasons(shipped, digits):
    meta, hardware = digits
    ood, reasons, _ = shipped.novelty(_twenty_classes_12x40(meta), hardware, POLICY)
    assert ood and reasons == ["20 classes is outside the measured 2..10",
                               "input 1x12x40 is outside the measured 1..3 x 8..32 x 8..32"]


def test_a_tabular_workload_is_flagged_with_the_reasons(shipped, digits, monkeypatch):
    from dltune._workload import Workload
    from dltune.data import Dataset

    # The landmarks fit scikit-learn models: seconds that say nothing here.
    monkeypatch.setattr(Dataset, "landmarks", lambda self: {"landmark_logreg": 0.9, "landmark_1nn": 0.9})
    meta = Workload.from_name("breast_cancer", "tabular_mlp").meta_features()
    assert (meta["modality"], meta["model_family"], meta["input_shape"]) == ("tabular", "mlp", [30])
    ood, reasons, _ = shipped.novelty(meta, digits[1], POLICY)
    assert ood and "the data are tabular, a modality never measured (measured: image)" in reasons
    assert reasons[0].startswith("model 'tabular_mlp' was never measured")
    lstm = dict(meta, **model_features(build_model("text_lstm", (30,), 2, vocab_size=10)))
    assert "model family 'rnn' was never measured (measured: cnn, mlp)" in shipped.outside_reasons(lstm)


def test_intervals_widen_for_a_workload_outside_the_measured_range(shipped, digits):
    meta, hardware = digits
    pred = {k: np.array([v]) for k, v in (("accuracy", 0.8), ("accuracy_low", 0.7), ("accuracy_high", 0.85),
                                           ("train_time_s", 1.0), ("train_time_s_low", 0.5),
                                           ("train_time_s_high", 2.0), ("peak_rss_mb", 300.0),
                                           ("peak_rss_mb_low", 250.0), ("peak_rss_mb_high", 400.0))}
    same, notes = shipped.widen(pred, meta, hardware, POLICY)
    assert same["accuracy_low"][0] == 0.7 and not [n for n in notes if "wider" in n]
    wide, notes = shipped.widen(pred, _twenty_classes_12x40(meta), hardware, POLICY)
    stretch = 1 + max(shipped.nearest_workloads(_twenty_classes_12x40(meta), k=1)[0][1],
                      shipped.ood_threshold_) / shipped.ood_threshold_
    assert stretch >= 2.0 and notes[0] == f"intervals {stretch:.1f}x wider: the workload lies outside the measured range"
    assert wide["accuracy_low"][0] == pytest.approx(0.8 - stretch * 0.1)
    assert wide["train_time_s_high"][0] == pytest.approx(np.exp(stretch * np.log(2.0)))


def test_a_workload_is_no_longer_flagged_once_the_knowledge_base_covers_it(shipped, digits, monkeypatch):
    meta, _ = digits
    new = _twenty_classes_12x40(meta)
    covered = copy.deepcopy(shipped.workloads_) + [{"name": "synthetic-20", "model": "lenet", "meta": new}]
    monkeypatch.setattr(shipped, "workloads_", covered)
    assert shipped.outside_reasons(new) == []
