"""Out of distribution by workload, before and after the knowledge base covers it: a 20-class
12x40 image workload and a tabular one are flagged, with reasons naming what is new, by a fit
on reference-like workloads alone, and not by a fit that adds workloads of their modality,
class count and shapes (not the workloads themselves). Synthetic records: only which workloads
were measured matters here, not what their runs measured."""

from __future__ import annotations

import pytest

from dltune.config import TrainConfig
from dltune.recommend import RecommendPolicy

POLICY = RecommendPolicy()
HARDWARE = {"target": "test-2c", "cpu_model": "Test CPU", "usable_cores": 2, "logical_cores": 2,
            "memory_gb": 8.0, "cpu_flags": ["avx2"], "gpus": []}


def _records(workload, n=6):
    """``n`` successful runs of ``workload`` with made-up metrics."""
    described = workload.to_record()
    return [{"id": f"{workload.name}-{described['fingerprint']}-{i}", "status": "ok", "workload": described,
             "config": TrainConfig(framework=("torch", "tensorflow")[i % 2], learning_rate=0.01 * (i + 1),
                                   batch_size=32 * (1 + i % 3), epochs=1 + i % 3).to_dict(),
             "hardware": HARDWARE,
             "metrics": {"train_time_s": 0.1 * (i + 1), "test_time_s": 0.01, "test_accuracy": 0.5 + 0.05 * i,
                         "peak_rss_mb": 200.0 + i}}
            for i in range(n)]


@pytest.fixture(scope="module")
def workloads():
    from dltune._workload import Workload
    from dltune.data import Dataset

    def build(name, model, **params):
        return Workload.from_name(name, model, **params)

    with pytest.MonkeyPatch.context() as patch:
        # The landmarks fit scikit-learn models: seconds that say nothing here.
        patch.setattr(Dataset, "landmarks", lambda self: {"landmark_logreg": 0.9, "landmark_1nn": 0.9})
        small = {"n_train": 300, "n_test": 100}
        yield {
            # Like the reference suite: images of 2..10 classes, 1..3 x 8..32 x 8..32.
            "reference": [build("digits", "mlp"), build("digits", "lenet"),
                          build("synthetic", "lenet", classes=2, height=16, width=16, channels=3, **small),
                          build("synthetic", "mlp", classes=5, height=32, width=32, **small)],
            # Like the families suite: 20 classes, a 16x48 input, tabular rows of 13 and 50 features.
            "families": [build("synthetic", "lenet", classes=20, height=16, width=16, **small),
                         build("synthetic", "lenet", classes=10, height=16, width=48, **small),
                         build("wine", "tabular_mlp"),
                         build("synthetic_tabular", "tabular_mlp", features=50, classes=5, **small)],
            "asked": [build("synthetic", "lenet", classes=20, height=12, width=40, **small),
                      build("breast_cancer", "tabular_mlp")],
        }


def _fit(workloads):
    from dltune.surrogate import PerformanceModel

    # Out of distribution reads only which workloads were measured: few trees suffice.
    return PerformanceModel(max_iter=10, time_residual_iter=5).fit([r for w in workloads for r in _records(w)])


def test_new_classes_shapes_and_modalities_are_flagged_until_the_knowledge_base_covers_them(workloads):
    images, tabular = (w.meta_features() for w in workloads["asked"])
    assert (images["num_classes"], images["input_shape"], tabular["modality"]) == (20, [1, 12, 40], "tabular")
    before = _fit(workloads["reference"])
    assert before.novelty(images, HARDWARE, POLICY)[:2] == (True, [
        "20 classes is outside the measured 2..10", "input 1x12x40 is outside the measured 1..3 x 8..32 x 8..32"])
    flagged, reasons, _ = before.novelty(tabular, HARDWARE, POLICY)
    assert flagged and reasons == [
        "model 'tabular_mlp' was never measured (measured: lenet, mlp): its accuracy is predicted "
        "from other models' runs",
        "the data are tabular, a modality never measured (measured: image)"]

    after = _fit(workloads["reference"] + workloads["families"])
    assert {w["fingerprint"] for w in after.workloads_}.isdisjoint(
        w.dataset.fingerprint() for w in workloads["asked"])
    for meta in (images, tabular):
        assert after.outside_reasons(meta) == []
        assert after.novelty(meta, HARDWARE, POLICY)[:2] == (False, [])
