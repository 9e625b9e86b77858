from __future__ import annotations

import json

import numpy as np
import pytest

from dltune.config import usable_cores
from dltune.config._threads import thread_grid
from dltune.kb import RecordStore
from dltune.kb._calibrate import calibrate_machine, calibration_plan, calibration_records
from dltune.kb._suite import QUICK_BATCHES, QUICK_EPOCHS, SUITES
from dltune.models import build_model
from dltune.surrogate import PerformanceModel, record_row
from dltune.surrogate._train_time import KINDS, kind_shares
from tests.conftest import run_cli

OTHER = {"cpu_model": "Probed CPU", "logical_cores": 2, "memory_gb": 16.0, "cpu_flags": ["avx2"],
         "gpus": [], "blas": []}
KEY = "Probed CPU [avx2]|2|16"


@pytest.fixture(scope="module")
def tiny_probes(tmp_path_factory):
    """The quick calibration with the ``tiny`` suite's first workload as its probes, measured
    for real with the numpy backend into a cache of its own: the plan, the first call's result,
    the second call's (a resume), and the probes' records."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DLTUNE_CACHE", str(tmp_path_factory.mktemp("cache")))
        patch.setitem(SUITES, "quick", SUITES["tiny"][:1])
        plan = calibration_plan(["numpy"])
        first, again = calibrate_machine(["numpy"]), calibrate_machine(["numpy"])
        probes = [r for r in calibration_records(shipped=False) if (r.get("kb") or {}).get("suite") == "quick"]
    return plan, first, again, probes


def test_quick_calibration_measures_its_plan_resumably_where_recommend_reads_it(tiny_probes):
    plan, result, again, probes = tiny_probes
    assert len(plan) == len(QUICK_BATCHES) * len(thread_grid(usable_cores()))
    assert {p.kind for p in plan} == {"probe"} and {p.config.epochs for p in plan} == {QUICK_EPOCHS} != {1}
    assert (result.measured, result.failed, result.stopped_by) == (len(plan), 0, "complete")
    assert again.measured == 0  # resumed: nothing left to run
    assert sorted(r["kb"]["key"] for r in probes) == sorted(p.key for p in plan)
    # Each epoch's time is kept: the first epoch and the whole run are the probe's two sizes.
    assert {len(r["metrics"]["curves"]) for r in probes} == {QUICK_EPOCHS}


def _known_cost_times(records):
    """The records with training times of a known cost model in place of their measured ones
    (which vary with the machine's load): each cost term weighs its median seconds, the per-run
    warm-up 0.25 s, so what the reference model splits by kind does not depend on the load."""
    from dltune.surrogate._train_time import COST_TERMS, cost_terms

    fitted = PerformanceModel(max_iter=5, calibrate=False).fit(records)
    terms = cost_terms(fitted.encoder_.transform([record_row(d) for d in records]),
                       tuple(fitted.train_time_.cost_columns))
    typical = np.array([np.median(c[c > 0]) if (c > 0).any() else 1.0 for c in terms.T])
    weight = np.where(np.array(COST_TERMS) == "run", 0.25, 0.05) / typical
    seconds = terms @ weight
    return [dict(d, metrics=dict(d["metrics"], train_time_s=float(t),
                                 curves=[dict(c, train_time_s=float(t) / len(d["metrics"]["curves"]))
                                         for c in d["metrics"].get("curves") or []]))
            for d, t in zip(records, seconds, strict=True)]


@pytest.mark.slow
def test_the_probes_two_sizes_separate_the_warm_up_from_the_throughputs(tiny_kb, tiny_probes):
    records = _known_cost_times([r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok])
    base = PerformanceModel(max_iter=20, calibrate=False).fit(records)
    # Another machine: its per-run and per-epoch overheads take 8 times the reference machine's,
    # every other kind of work twice; its probes' epochs take what the reference model's split
    # of them by kind says, times those.
    truth = np.array([8.0 if k == "run" else 2.0 for k in KINDS])

    def seconds(rows):
        return kind_shares(base.train_time_.term_seconds(base.encoder_.transform(rows))) @ truth

    probes = []
    for d in tiny_probes[3]:
        row = record_row(d)
        first, whole = seconds([dict(row, config=dict(row["config"], epochs=1)), row])
        curves = [dict(c, train_time_s=t) for c, t in zip(d["metrics"]["curves"], (first, whole - first), strict=True)]
        probes.append(dict(d, hardware={**d["hardware"], **OTHER},
                           metrics=dict(d["metrics"], train_time_s=whole, curves=curves)))
    model = PerformanceModel(max_iter=20, calibrate=False).fit(records + probes)
    speed = {k: np.exp(model.machine_speed_[KEY][f"numpy:{k}"]) for k in KINDS}
    # The warm-up is told apart from the per-step overheads and the dense layers' throughput
    # (the whole runs alone leave it near them: a two-epoch run is no other size).
    assert speed["run"] > 1.5 * max(speed["step"], speed["dense"])
    # Runs of other lengths on that machine: one epoch, where the warm-up weighs most, and ten.
    there = [dict(row, hardware={**row["hardware"], **OTHER}, config=dict(row["config"], epochs=n))
             for row in (record_row(d) for d in tiny_probes[3]) for n in (1, 10)]
    ratio = model.predict(there)["train_time_s"] / seconds(there)
    assert np.exp(np.mean(np.abs(np.log(ratio)))) < 1.12


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
