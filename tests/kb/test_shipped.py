"""The knowledge base shipped in the package: real records of each shipped suite (reference,
families), one file per suite, with provenance."""

from __future__ import annotations

import functools
import json

import pytest

import dltune.measure._shipped as shipped
from dltune.kb import SUITES, load_shipped_records, shipped_kb_path, shipped_provenance_path
from dltune.kb._store import SHIPPED_SUITES, read_jsonl, shipped_kb_paths


def test_shipped_records_cover_the_reference_suite():
    assert shipped_kb_path().exists(), "run: dltune kb build --suite reference && dltune kb export"
    records = load_shipped_records(shipped_kb_path())
    ok = [r for r in records if r.ok]
    assert len(ok) >= 100
    workloads = {(r.workload["dataset"], json.dumps(r.workload["dataset_params"], sort_keys=True),
                  r.workload["model"]) for r in ok}
    assert len(workloads) == len(SUITES["reference"])
    assert {r.framework for r in ok} >= {"torch", "tensorflow"}
    for r in ok:
        assert r.metrics["train_time_s"] > 0 and 0 <= r.metrics["test_accuracy"] <= 1
        assert r.versions and r.hardware["cpu_model"] and r.workload["meta"]["landmark_1nn"] >= 0


def test_shipped_provenance_says_how_where_and_when():
    provenance = json.loads(shipped_provenance_path().read_text())
    # `dltune kb build` measures the reference suite unless told another (`--suite`).
    assert all(s["command"].startswith("dltune kb build")
               and ("--suite" not in s["command"] or "--suite reference" in s["command"])
               for s in provenance["sessions"])
    assert provenance["suite"] == "reference"
    assert provenance["machines"][0]["cpu_model"] and provenance["host_versions"]["numpy"]
    fingerprints = {m["fingerprint"] for m in provenance["machines"]}
    assert all(s["machine"] in fingerprints for s in provenance["sessions"])
    assert provenance["measured_from"] < provenance["measured_to"]
    assert provenance["shipped_records"] == len(load_shipped_records(shipped_kb_path()))
    assert "load_1m" in provenance["notes"]
    # Each run says how loaded the machine was when it started (the noise its time carries).
    assert all(e["kb"]["load_1m"] >= 0 for e in read_jsonl(shipped_kb_path()))


def test_each_shipped_file_holds_its_suites_runs_alone():
    """``kb export`` names the file after its build folder's suite: every shipped file's runs
    and provenance are of that suite, on its workloads."""
    paths = shipped_kb_paths()
    assert paths[0] == shipped_kb_path() and [p.name for p in paths] == [
        f"{s}.jsonl.gz" for s in SHIPPED_SUITES if (shipped_kb_path().parent / f"{s}.jsonl.gz").exists()]
    for path in paths:
        suite = path.name.removesuffix(".jsonl.gz")
        entries = list(read_jsonl(path))
        assert {e["kb"]["suite"] for e in entries} == {suite}
        assert {e["kb"]["suite_workload"] for e in entries} <= {w.name for w in SUITES[suite]}
        provenance = json.loads(path.with_name(f"{suite}_provenance.json").read_text())
        assert provenance["suite"] == suite and provenance["shipped_records"] == len(entries)


def test_the_shipped_records_are_every_shipped_suites_reference_first(tmp_path, monkeypatch):
    import gzip

    def write(suite, ids):
        with gzip.open(tmp_path / f"{suite}.jsonl.gz", "wt") as fh:
            for i in ids:
                fh.write(json.dumps({"id": i, "status": "ok", "workload": {}, "config": {"framework": "numpy"},
                                     "hardware": {}, "kb": {"suite": suite}}) + "\n")

    monkeypatch.setattr(shipped, "package_kb_dir", lambda: tmp_path)
    assert load_shipped_records() == [] and shipped_kb_paths() == []
    write("families", ["f1", "f2"])
    assert [r.id for r in load_shipped_records()] == ["f1", "f2"]
    write("reference", ["r1"])
    write("tiny", ["t1"])  # not a shipped suite: not read
    assert shipped_kb_paths() == [tmp_path / "reference.jsonl.gz", tmp_path / "families.jsonl.gz"]
    assert [r.id for r in load_shipped_records()] == ["r1", "f1", "f2"]
    assert [r.id for r in load_shipped_records(shipped_kb_path())] == ["r1"]


def test_shipped_calibrations_are_the_knowledge_bases_runs_on_other_machines_or_days():
    """Each shipped calibration: `dltune kb calibrate` runs of one machine on the knowledge
    base's own configurations (the same keys), measured for the knowledge base on another
    machine, or on a machine of the same kind on another day. (The AVX2 VM of the first shipped
    calibration later measured knowledge-base workloads of its own; its calibration runs are
    those of the build machine's workloads. The second is a machine of the build machine's kind
    that ran them 1.2-1.6x as long two days later.)"""
    from dltune.kb import calibration_dir, shipped_calibration_paths
    from dltune.surrogate._calibration import MIN_MACHINE_RECORDS
    from dltune.surrogate._machines import machine_key

    kb = {e["kb"]["key"]: e["started_at"] for e in read_jsonl(shipped_kb_path())}
    for path in shipped_calibration_paths():
        entries = list(read_jsonl(path))
        assert len(entries) >= MIN_MACHINE_RECORDS and all(e["status"] == "ok" for e in entries)
        [machine] = {machine_key(e["hardware"]) for e in entries}
        assert all(e["kb"]["key"] in kb and e["started_at"] > kb[e["kb"]["key"]] for e in entries)
        assert path.name == calibration_dir(entries[0]["hardware"]).name + ".jsonl.gz"
        provenance = json.loads(path.with_name(path.name.replace(".jsonl.gz", "_provenance.json")).read_text())
        assert all(s["command"].startswith("dltune kb calibrate") for s in provenance["sessions"])
        assert provenance["shipped_records"] == len(entries)


@functools.cache
def _shipped_fit_records() -> tuple[dict, ...]:
    """What the shipped surrogates are fitted on, read once (seconds: thousands of records)."""
    from dltune.kb import calibration_records

    records = {}
    for record in [r.to_dict() for r in load_shipped_records()] + calibration_records(shipped=True, cache=False):
        records.setdefault(str(record["id"]), record)
    return tuple(records.values())


def test_the_shipped_surrogates_are_the_fit_of_what_the_package_ships(tmp_path):
    """A fresh install loads them instead of fitting on its first recommend (about 16 s), so
    they must be what `dltune kb export` fits on the shipped knowledge base and calibrations:
    named by that fit's cache key, and predicting what a fit made here predicts."""
    import numpy as np
    import sklearn

    from dltune.surrogate import (
        PerformanceModel,
        export_shipped_model,
        record_row,
        shipped_model_dir,
        shipped_model_key,
    )

    shipped = sorted(shipped_model_dir().glob("*.npz"))
    assert [p.name for p in shipped] == [f"{shipped_model_key()}.npz"], (
        "the shipped surrogates are not the fit of the shipped knowledge base and calibrations "
        "(or of this model format): run `dltune kb export --surrogates-only`")
    summary = export_shipped_model(out=tmp_path)
    assert summary["key"] == shipped_model_key() and summary["records"] == len(_shipped_fit_records())
    here = PerformanceModel.load(summary["path"])
    ships = PerformanceModel.load(shipped[0])
    assert ships.n_records_ == here.n_records_
    rows = [record_row(r) for r in _shipped_fit_records() if r["status"] == "ok"]
    a, b = ships.predict(rows), here.predict(rows)
    if ships.fitted_with_ == here.fitted_with_:
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-6, err_msg=key)
    elif ships.fitted_with_.get("scikit-learn") == sklearn.__version__:
        # Other BLAS kernels (another CPU) round the time model's sums otherwise: the last digits.
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-2, err_msg=key)
    else:  # another scikit-learn may grow other trees: the same model, not the same digits
        for key in ("train_time_s", "peak_rss_mb"):
            assert np.median(np.abs(a[key] / b[key] - 1)) < 0.05, key
        assert np.corrcoef(np.argsort(np.argsort(a["accuracy"])),
                           np.argsort(np.argsort(b["accuracy"])))[0, 1] > 0.9


def test_a_fresh_install_recommends_from_the_shipped_surrogates_without_fitting(tmp_path, monkeypatch):
    import dltune
    from dltune.surrogate import PerformanceModel, clear_memory_cache, fitted_model

    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "cache"))  # nothing cached, no calibration
    monkeypatch.delenv("DLTUNE_STORAGE", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./dltune.db
    clear_memory_cache()

    def no_fit(self, records):
        raise AssertionError("fitted although the package ships this fit")

    monkeypatch.setattr(PerformanceModel, "fit", no_fit)
    try:
        rec = dltune.recommend("digits")
        assert rec.framework and rec.predicted["train_time_s"][0] > 0
        assert fitted_model().n_records_ == sum(r["status"] == "ok" for r in _shipped_fit_records())
        assert not (tmp_path / "cache" / "surrogates").exists()
        # The user's own records are another fit: made here, not shipped.
        extra = dict(load_shipped_records()[0].to_dict(), id="a-run-of-my-own")
        with pytest.raises(AssertionError, match="fitted although"):
            fitted_model(records=[extra])
    finally:
        clear_memory_cache()
