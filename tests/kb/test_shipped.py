"""The knowledge base shipped in the package: real records of the reference suite, with provenance."""

from __future__ import annotations

import json

from dltune.kb import SUITES, load_shipped_records, shipped_kb_path, shipped_provenance_path
from dltune.kb._store import read_jsonl


def test_shipped_records_cover_the_reference_suite():
    assert shipped_kb_path().exists(), "run: dltune kb build --suite reference && dltune kb export"
    records = load_shipped_records()
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
    assert all(s["command"].startswith("dltune kb build --suite reference") for s in provenance["sessions"])
    assert provenance["machines"][0]["cpu_model"] and provenance["host_versions"]["numpy"]
    fingerprints = {m["fingerprint"] for m in provenance["machines"]}
    assert all(s["machine"] in fingerprints for s in provenance["sessions"])
    assert provenance["measured_from"] < provenance["measured_to"]
    assert provenance["shipped_records"] == len(load_shipped_records())
    assert "load_1m" in provenance["notes"]
    # Each run says how loaded the machine was when it started (the noise its time carries).
    assert all(e["kb"]["load_1m"] >= 0 for e in read_jsonl(shipped_kb_path()))


def test_shipped_calibrations_are_the_knowledge_bases_runs_on_other_machines():
    """Each shipped calibration: `dltune kb calibrate` runs of one machine on the knowledge
    base's own configurations (the same keys), which the knowledge base measured on another
    machine. (The VM of the shipped calibration later measured knowledge-base workloads of its
    own and is now the machine most of it was measured on; its calibration runs are those of
    the build machine's workloads.)"""
    from dltune.kb import calibration_dir, shipped_calibration_paths
    from dltune.surrogate._model import MIN_MACHINE_RECORDS, machine_key

    kb = {e["kb"]["key"]: machine_key(e["hardware"]) for e in read_jsonl(shipped_kb_path())}
    for path in shipped_calibration_paths():
        entries = list(read_jsonl(path))
        assert len(entries) >= MIN_MACHINE_RECORDS and all(e["status"] == "ok" for e in entries)
        [machine] = {machine_key(e["hardware"]) for e in entries}
        assert all(e["kb"]["key"] in kb and kb[e["kb"]["key"]] != machine for e in entries)
        assert path.name == calibration_dir(entries[0]["hardware"]).name + ".jsonl.gz"
        provenance = json.loads(path.with_name(path.name.replace(".jsonl.gz", "_provenance.json")).read_text())
        assert all(s["command"].startswith("dltune kb calibrate") for s in provenance["sessions"])
        assert provenance["shipped_records"] == len(entries)
