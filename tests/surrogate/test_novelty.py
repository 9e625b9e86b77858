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


def _hundred_classes_64x64(meta):
    """A workload neither shipped suite measured: 100 classes of 64x64 images."""
    return dict(meta, num_classes=100, height=64, width=64, input_size=4096,
                **model_features(build_model("lenet", (1, 64, 64), 100)))


def test_a_measured_workload_is_not_flagged(shipped, digits):
    meta, hardware = digits
    assert meta["model_family"] == "cnn" and meta["input_shape"] == [1, 8, 8]
    assert shipped.outside_reasons(meta) == []
    assert shipped.novelty(meta, hardware, POLICY)[:2] == (False, [])


def test_a_hundred_classes_of_64x64_images_are_flagged_with_the_reasons(shipped, digits):
    meta, hardware = digits
    ood, reasons, _ = shipped.novelty(_hundred_classes_64x64(meta), hardware, POLICY)
    assert ood and reasons == ["100 classes is outside the measured 2..50",
                               "input 1x64x64 is outside the measured 1..3 x 8..48 x 8..48"]


def test_tabular_data_and_recurrent_models_are_measured_by_the_families_suite(shipped, digits, monkeypatch):
    """The shipped families suite holds tabular rows and LSTMs: neither is flagged (the flags
    before a knowledge base covers them: tests/surrogate/test_novelty_workloads.py)."""
    from dltune._workload import Workload
    from dltune.data import Dataset

    # The landmarks fit scikit-learn models: seconds that say nothing here.
    monkeypatch.setattr(Dataset, "landmarks", lambda self: {"landmark_logreg": 0.9, "landmark_1nn": 0.9})
    meta = Workload.from_name("breast_cancer", "tabular_mlp").meta_features()
    assert (meta["modality"], meta["model_family"], meta["input_shape"]) == ("tabular", "mlp", [30])
    assert shipped.novelty(meta, digits[1], POLICY)[:2] == (False, [])
    tokens = Workload.from_name("synthetic_tokens", "text_lstm").meta_features()
    assert tokens["model_family"] == "rnn" and shipped.outside_reasons(tokens) == []


def test_intervals_widen_for_a_workload_outside_the_measured_range(shipped, digits):
    meta, hardware = digits
    pred = {k: np.array([v]) for k, v in (("accuracy", 0.8), ("accuracy_low", 0.7), ("accuracy_high", 0.85),
                                           ("train_time_s", 1.0), ("train_time_s_low", 0.5),
                                           ("train_time_s_high", 2.0), ("peak_rss_mb", 300.0),
                                           ("peak_rss_mb_low", 250.0), ("peak_rss_mb_high", 400.0))}
    same, notes = shipped.widen(pred, meta, hardware, POLICY)
    assert same["accuracy_low"][0] == 0.7 and not [n for n in notes if "wider" in n]
    wide, notes = shipped.widen(pred, _hundred_classes_64x64(meta), hardware, POLICY)
    stretch = 1 + max(shipped.nearest_workloads(_hundred_classes_64x64(meta), k=1)[0][1],
                      shipped.ood_threshold_) / shipped.ood_threshold_
    assert stretch >= 2.0 and notes[0] == f"intervals {stretch:.1f}x wider: the workload lies outside the measured range"
    assert wide["accuracy_low"][0] == pytest.approx(0.8 - stretch * 0.1)
    assert wide["train_time_s_high"][0] == pytest.approx(np.exp(stretch * np.log(2.0)))


def test_an_unmeasured_workload_within_the_range_widens_its_accuracy_band_with_the_distance(shipped, digits):
    """Not flagged, not noted: only the accuracy interval widens, by 1 + d / t."""
    meta, hardware = digits
    near = dict(meta, n_train=int(meta["n_train"] * 0.8), landmark_logreg=meta["landmark_logreg"] - 0.05)
    (_, d), = shipped.nearest_workloads(near, k=1)
    assert 0 < d < shipped.ood_threshold_ and shipped.novelty(near, hardware, POLICY)[:2] == (False, [])
    pred = {k: np.array([v]) for k, v in (("accuracy", 0.8), ("accuracy_low", 0.7), ("accuracy_high", 0.85),
                                           ("train_time_s", 1.0), ("train_time_s_low", 0.5),
                                           ("train_time_s_high", 2.0), ("peak_rss_mb", 300.0),
                                           ("peak_rss_mb_low", 250.0), ("peak_rss_mb_high", 400.0))}
    out, notes = shipped.widen(pred, near, hardware, POLICY)
    stretch = 1 + d / shipped.ood_threshold_
    assert out["accuracy_low"][0] == pytest.approx(0.8 - stretch * 0.1)
    assert out["accuracy_high"][0] == pytest.approx(0.8 + stretch * 0.05)
    assert out["train_time_s_low"][0] == 0.5 and not [n for n in notes if "wider" in n]


def test_a_workload_is_no_longer_flagged_once_the_knowledge_base_covers_it(shipped, digits, monkeypatch):
    meta, _ = digits
    new = _hundred_classes_64x64(meta)
    covered = copy.deepcopy(shipped.workloads_) + [{"name": "synthetic-100", "model": "lenet", "meta": new}]
    monkeypatch.setattr(shipped, "workloads_", covered)
    assert shipped.outside_reasons(new) == []


def test_a_low_end_at_chance_reaches_down_by_the_test_set_s_sampling_noise(shipped, digits):
    """A run that learns nothing scores chance give or take its test set's sampling noise: a low
    end at chance extends below it (as far as the interval's coverage of such a score); another
    low end is left as it is."""
    from statistics import NormalDist

    meta, hardware = digits
    chance, n = 1 / meta["num_classes"], meta["n_test"]
    pred = {k: np.array(v) for k, v in (("accuracy", [0.3, 0.8]), ("accuracy_low", [chance, 0.7]),
                                         ("accuracy_high", [0.9, 0.85]), ("train_time_s", [1.0, 1.0]),
                                         ("train_time_s_low", [0.5, 0.5]), ("train_time_s_high", [2.0, 2.0]),
                                         ("peak_rss_mb", [300.0, 300.0]), ("peak_rss_mb_low", [250.0, 250.0]),
                                         ("peak_rss_mb_high", [400.0, 400.0]))}
    out, _ = shipped.widen(pred, meta, hardware, POLICY)
    noise = NormalDist().inv_cdf(0.9) * np.sqrt(chance * (1 - chance) / n)
    assert 0 < noise < chance and out["accuracy_low"] == pytest.approx([chance - noise, 0.7])
    assert out["accuracy_high"] == pytest.approx([0.9, 0.85])
