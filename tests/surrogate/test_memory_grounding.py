"""A framework (or a model it trained) whose memory the memory surrogate's rows do not ground
gets what was measured, its process's least, and no upper end, not an extrapolation."""

from __future__ import annotations

import numpy as np
import pytest

from dltune.kb import RecordStore
from dltune.measure._record import current_revision
from dltune.surrogate import PerformanceModel, record_row
from dltune.surrogate._memory import (
    MIN_GROUNDED_MODEL_RUNS,
    MIN_GROUNDED_RUNS,
    process_floor,
    ungrounded_memory,
)

pytestmark = pytest.mark.slow


def _copies(records, tag, framework=None, model=None, fresh=True, peaks=None, baseline=None):
    """Copies of ``records`` as runs of ``framework`` training ``model``, in a new worker
    process or a reused one, with peak memory ``peaks`` (one each, cycled) and the memory the
    worker held as each run started (``baseline``)."""
    out = []
    for i, d in enumerate(records):
        fw = framework or d["config"]["framework"]
        metrics = dict(d["metrics"], import_time_s=1.0 if fresh else 0.0)
        if peaks is not None:
            metrics["peak_rss_mb"] = float(peaks[i % len(peaks)])
        metrics["baseline_rss_mb"] = 30.0 if fresh else baseline
        workload = d["workload"]
        if model is not None:
            workload = dict(workload, model=model, meta=dict(workload["meta"], model=model))
        out.append(dict(d, id=f"{tag}-{i}", config=dict(d["config"], framework=fw),
                        backend_revision=current_revision(fw), metrics=metrics, workload=workload))
    return out


@pytest.fixture(scope="module")
def records(tiny_kb):
    tiny = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    # numpy: every run in a new process (enough of them for the memory model to learn from
    # those alone); torch: reused workers, whose peaks are high-water marks, and two first
    # runs of a worker at 500 and 520 MB; numpy's lenet: reused workers only.
    return {"numpy": _copies(tiny, "np"),
            "torch": _copies(tiny, "tw", "torch", fresh=False, peaks=[900.0], baseline=600.0)
            + _copies(tiny[:2], "tf", "torch", peaks=[520.0, 500.0]),
            "numpy/lenet": _copies(tiny, "nl", model="lenet", fresh=False, peaks=[800.0], baseline=700.0)}


@pytest.fixture(scope="module")
def model(records):
    return PerformanceModel(max_iter=20, calibrate=False).fit([d for rs in records.values() for d in rs])


def test_the_least_a_process_held_is_a_new_process_peak_or_a_reused_worker_start():
    run = {"metrics": {"import_time_s": 1.2, "peak_rss_mb": 335.0, "baseline_rss_mb": 27.0}}
    assert process_floor(run) == 335.0
    run["metrics"]["import_time_s"] = 0.0  # a reused worker: its framework was imported already
    assert process_floor(run) == 27.0
    run["metrics"]["baseline_rss_mb"] = None
    assert process_floor(run) == 335.0


def test_too_few_learnt_runs_leave_a_framework_or_a_model_it_trained_ungrounded():
    n, m = MIN_GROUNDED_RUNS, MIN_GROUNDED_MODEL_RUNS
    frameworks = ["a"] * (n + m) + ["b"] * (n - 1) + ["c"] * 2
    models = ["mlp"] * n + ["lenet"] * m + ["mlp"] * (n - 1) + ["mlp"] * 2
    # a's lenet runs are one short; c's runs have no memory as measured now.
    learnt = [True] * (n + m - 1) + [False] + [True] * (n - 1) + [True] * 2
    floors = [float(400 + i) for i in range(n + m)] + [300.0] * (n - 1) + [None, None]
    assert ungrounded_memory(frameworks, models, learnt, floors) == {"a/lenet": 400.0, "b": 300.0, "c": 0.0}
    learnt[n + m - 1] = True
    assert ungrounded_memory(frameworks, models, learnt, floors) == {"b": 300.0, "c": 0.0}


def test_an_ungrounded_framework_gets_its_least_measured_and_no_upper_end(model, records):
    # numpy's least: a new process's peak, or a reused worker's 700 MB as its lenet runs started.
    numpy_least = min([d["metrics"]["peak_rss_mb"] for d in records["numpy"]] + [700.0])
    assert model.memory_ungrounded_ == {"torch": 500.0, "numpy/lenet": numpy_least}
    assert model.memory_grounded("numpy", "mlp") and model.memory_grounded("numpy", "resnet8")
    assert not model.memory_grounded("torch", "mlp") and not model.memory_grounded("numpy", "lenet")
    for key, floor in (("torch", 500.0), ("numpy/lenet", numpy_least)):
        pred = model.predict([record_row(d) for d in records[key]])
        assert np.all(pred["peak_rss_mb"] == floor) and np.all(pred["peak_rss_mb_low"] == floor)
        assert np.all(np.isinf(pred["peak_rss_mb_high"]))
    # A framework whose runs in a new process ground it keeps its interval around a prediction.
    pred = model.predict([record_row(d) for d in records["numpy"]])
    assert np.all(np.isfinite(pred["peak_rss_mb_high"]))
    assert np.all(pred["peak_rss_mb_low"] <= pred["peak_rss_mb"]) and np.all(pred["peak_rss_mb"] <= pred["peak_rss_mb_high"])


def test_grounding_survives_a_save_and_load(model, records, tmp_path):
    loaded = PerformanceModel.load(model.save(tmp_path / "m.npz"))
    assert loaded.memory_ungrounded_ == model.memory_ungrounded_
    rows = [record_row(d) for rs in records.values() for d in rs]
    a, b = model.predict(rows), loaded.predict(rows)
    assert all(np.array_equal(a[k], b[k]) for k in ("peak_rss_mb", "peak_rss_mb_low", "peak_rss_mb_high"))
