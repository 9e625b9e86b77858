from __future__ import annotations

import numpy as np
import pytest

from dltune._errors import NotFittedError, ParameterError
from dltune.kb import RecordStore
from dltune.surrogate import (
    PerformanceModel,
    clear_memory_cache,
    fitted_model,
    load_storage_records,
    record_row,
)

pytestmark = pytest.mark.slow

ALIEN = {"cpu_model": "Neoverse-V2 (ARM)", "logical_cores": 72, "memory_gb": 480.0,
         "gpus": [{"name": "NVIDIA GH200"}]}


@pytest.fixture(scope="module")
def model(tiny_kb):
    return PerformanceModel(max_iter=40).fit(RecordStore(tiny_kb).records())


def test_predicts_three_metrics_with_ordered_intervals(model, tiny_kb):
    records = [r for r in RecordStore(tiny_kb).records() if r.ok]
    pred = model.predict([record_row(r) for r in records])
    for key in ("accuracy", "train_time_s", "peak_rss_mb"):
        assert pred[key].shape == (len(records),)
        assert np.all(pred[f"{key}_low"] <= pred[key]) and np.all(pred[key] <= pred[f"{key}_high"])
    assert np.all(pred["train_time_s"] > 0) and np.all(pred["peak_rss_mb"] > 0)


def test_unfitted_and_too_few_records():
    with pytest.raises(NotFittedError):
        PerformanceModel().predict([])
    with pytest.raises(ParameterError, match="at least 4 successful measurements. Got 0 instead."):
        PerformanceModel().fit([])


def test_save_and_load_round_trip_without_pickle(model, tiny_kb, tmp_path):
    rows = [record_row(r) for r in RecordStore(tiny_kb).records() if r.ok]
    path = model.save(tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as arrays:  # everything in it is a plain array
        assert "state_json" in arrays
    loaded = PerformanceModel.load(path)
    a, b = model.predict(rows), loaded.predict(rows)
    assert all(np.allclose(a[k], b[k]) for k in a)


def test_alien_hardware_is_out_of_distribution(model, tiny_kb):
    record = RecordStore(tiny_kb).records()[0]
    ood, reasons, nearest = model.novelty(record.workload["meta"], record.hardware)
    assert not ood and nearest[0][1] == 0.0
    ood, reasons, _ = model.novelty(record.workload["meta"], ALIEN)
    assert ood
    assert any("never measured" in r for r in reasons) and any("GPU" in r for r in reasons)
    assert any("72 usable cores" in r for r in reasons)


def test_unlike_workload_is_out_of_distribution(model, tiny_kb):
    record = RecordStore(tiny_kb).records()[0]
    meta = dict(record.workload["meta"], n_train=2_000_000, height=512, width=512, channels=3,
                input_size=3 * 512 * 512, num_classes=1000, flops_per_sample=5e10)
    ood, reasons, nearest = model.novelty(meta, record.hardware)
    assert ood and "workload is unlike every measured one" in reasons[0]


def test_intervals_widen_out_of_distribution_and_only_there(model, tiny_kb):
    record = RecordStore(tiny_kb).records()[0]
    row = record_row(record)
    pred = model.predict([row])
    same, notes = model.widen(pred, row["meta"], row["hardware"])
    assert notes == [] and all(np.array_equal(same[k], pred[k]) for k in pred)

    def log_width(p, key):
        return np.log(p[f"{key}_high"][0]) - np.log(p[f"{key}_low"][0])

    # Another machine: time 3x wider each way per difference (CPU, cores, GPU, memory).
    hw_reasons = len(model.novelty(row["meta"], ALIEN)[1])
    alien, notes = model.widen(pred, row["meta"], ALIEN)
    assert hw_reasons == 4 and len(notes) == 1
    assert log_width(alien, "train_time_s") == pytest.approx(
        log_width(pred, "train_time_s") + 2 * hw_reasons * np.log(3.0))
    assert log_width(alien, "peak_rss_mb") == pytest.approx(log_width(pred, "peak_rss_mb") + 2 * np.log(1.5))
    assert alien["accuracy_low"][0] == pred["accuracy_low"][0]  # the hardware does not change results
    # An unlike workload: every interval wider by 1 + distance / threshold, accuracy kept in [0, 1].
    meta = dict(row["meta"], n_train=2_000_000, height=512, width=512, channels=3,
                input_size=3 * 512 * 512, num_classes=1000, flops_per_sample=5e10)
    far = model.predict([dict(row, meta=meta)])
    wide, notes = model.widen(far, meta, row["hardware"])
    stretch = 1 + model.nearest_workloads(meta, k=1)[0][1] / model.ood_threshold_
    assert len(notes) == 1 and stretch > 2
    assert log_width(wide, "train_time_s") == pytest.approx(stretch * log_width(far, "train_time_s"))
    assert 0 <= wide["accuracy_low"][0] <= far["accuracy_low"][0]
    assert far["accuracy_high"][0] <= wide["accuracy_high"][0] <= 1


def test_memory_is_learned_from_fresh_worker_runs_when_there_are_enough(tiny_kb):
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    assert len(records) >= 24
    for i, d in enumerate(records):
        fresh = i < 24  # a run that imported its framework: a new worker process
        d["metrics"] = dict(d["metrics"], import_time_s=1.0 if fresh else 0.0,
                            peak_rss_mb=100.0 if fresh else 5000.0)
    model = PerformanceModel(max_iter=20, calibrate=False).fit(records)
    assert model.n_memory_records_ == 24
    assert model.predict([record_row(d) for d in records])["peak_rss_mb"].max() < 200
    few = [dict(d, metrics=dict(d["metrics"], import_time_s=0.0)) if i >= 5 else d
           for i, d in enumerate(records)]
    assert PerformanceModel(max_iter=20, calibrate=False).fit(few).n_memory_records_ == len(records)


def test_unknown_framework_is_refused(model, tiny_kb):
    row = record_row(RecordStore(tiny_kb).records()[0])
    row["config"] = dict(row["config"], framework="caffe")
    with pytest.raises(ParameterError, match=r"must be one the knowledge base has measured \(numpy\)"):
        model.predict([row])


def test_fitted_model_is_cached_by_content_and_refit_on_change(tiny_kb, monkeypatch):
    from dltune._paths import cache_dir

    kb = tiny_kb / "records.jsonl"
    clear_memory_cache()
    first = fitted_model(storage=None, kb_path=kb)
    assert fitted_model(storage=None, kb_path=kb) is first  # same process: no reload
    files = list((cache_dir() / "surrogates").glob("*.npz"))
    assert files
    clear_memory_cache()

    def no_fit(self, records):
        raise AssertionError("refitted although the cache was valid")

    monkeypatch.setattr(PerformanceModel, "fit", no_fit)
    again = fitted_model(storage=None, kb_path=kb)  # loaded from disk
    assert again.n_records_ == first.n_records_
    monkeypatch.undo()
    extra = RecordStore(tiny_kb).records()[:1]
    extra[0].id = "another-run"
    refit = fitted_model(records=[extra[0]], storage=None, kb_path=kb)
    assert refit.n_records_ == first.n_records_ + 1


def test_records_in_an_optuna_storage_are_found(tiny_kb, tmp_path):
    import optuna

    record = RecordStore(tiny_kb).records()[0]
    record.id = "user-run-1"
    url = f"sqlite:///{tmp_path / 'dltune.db'}"
    study = optuna.create_study(storage=url, study_name="s")
    trial = study.ask()
    trial.set_user_attr("measurement", record.to_dict())
    trial.set_user_attr("note", "not a record")
    study.tell(trial, 0.5)
    # A large record split into chunks, as dltune.tuning stores it.
    other = RecordStore(tiny_kb).records()[1]
    other.id = "user-run-2"
    text = other.to_json()
    trial = study.ask()
    chunks = [text[i : i + 500] for i in range(0, len(text), 500)]
    for i, chunk in enumerate(chunks):
        trial.set_user_attr(f"measurement.{i}", chunk)
    trial.set_user_attr("measurement.chunks", len(chunks))
    study.tell(trial, 0.5)
    study.set_user_attr("preset_measurement:torch", record.to_dict())  # same id: counted once
    found = load_storage_records(url)
    assert sorted(r["id"] for r in found) == sorted([record.id, other.id])
    clear_memory_cache()
    with_user = fitted_model(storage=url, kb_path=tiny_kb / "records.jsonl")
    without = fitted_model(storage=None, kb_path=tiny_kb / "records.jsonl")
    assert with_user.n_records_ == without.n_records_ + 2
