from __future__ import annotations

import json

from dltune.config import usable_cores
from dltune.config._threads import thread_grid
from dltune.kb._calibrate import calibrate_machine, calibration_plan, calibration_records
from dltune.kb._suite import QUICK_BATCHES, SUITES
from dltune.models import build_model
from tests.conftest import run_cli


def test_quick_calibration_measures_its_plan_resumably_where_recommend_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path))
    monkeypatch.setitem(SUITES, "quick", SUITES["tiny"][:1])
    plan = calibration_plan(["numpy"])
    assert len(plan) == len(QUICK_BATCHES) * len(thread_grid(usable_cores()))
    assert {p.kind for p in plan} == {"probe"} and {p.config.epochs for p in plan} == {1}
    result = calibrate_machine(["numpy"])
    assert (result.measured, result.failed, result.stopped_by) == (len(plan), 0, "complete")
    assert calibrate_machine(["numpy"]).measured == 0  # resumed: nothing left to run
    probes = [r for r in calibration_records(shipped=False) if (r.get("kb") or {}).get("suite") == "quick"]
    assert sorted(r["kb"]["key"] for r in probes) == sorted(p.key for p in plan)


def test_plan_json_lists_the_quick_probes_and_full_keeps_the_knowledge_base_runs(tmp_path):
    env = {"DLTUNE_CACHE": str(tmp_path)}
    quick = run_cli("kb", "calibrate", "--plan", "--json", "--frameworks", "numpy", env=env)
    assert quick.returncode == 0, quick.stderr
    rows = json.loads(quick.stdout)
    assert len(rows) == len(SUITES["quick"]) * len(QUICK_BATCHES) * len(thread_grid(usable_cores()))
    full = calibration_plan(["numpy"], tmp_path / "full", full=True)
    assert {p.kind for p in full} <= {"space-filling", "preset", "all-cores"}


def test_the_quick_probes_cover_the_layer_kinds_of_every_model_family():
    families = {w.model: w for w in SUITES["reference"]}
    covered = set()
    for w in SUITES["quick"]:
        p = w.params
        spec = build_model(w.model, (p["channels"], p["height"], p["width"]), p["classes"])
        work = spec.work_by_kind()
        assert sum(work.values()) == spec.flops_per_sample
        covered |= set(work)
    for model in families:
        w = families[model]
        shape = (w.params.get("channels", 1), w.params.get("height", 8), w.params.get("width", 8))
        assert set(build_model(model, shape, 10).work_by_kind()) <= covered
