from __future__ import annotations

import numpy as np
import pytest

from dltune.kb import RecordStore
from dltune.recommend import RecommendPolicy
from dltune.surrogate import PerformanceModel, record_row
from dltune.surrogate._calibration import _fit_kinds
from dltune.surrogate._train_time import KINDS

pytestmark = pytest.mark.slow

OTHER = {"cpu_model": "Probed CPU", "logical_cores": 2, "memory_gb": 16.0, "cpu_flags": ["avx2"],
         "gpus": [], "blas": []}
KEY = "Probed CPU [avx2]|2|16"


def _probed(records, slower):
    """Copies of every other record as the quick calibration's probes on the ``OTHER`` machine,
    ``slower`` times slower."""
    return [dict(d, id=f"probe-{i}", hardware={**d["hardware"], **OTHER},
                 kb={"suite": "quick", "kind": "probe"},
                 metrics=dict(d["metrics"], train_time_s=d["metrics"]["train_time_s"] * slower))
            for i, d in enumerate(records[::2])]


def test_probes_describe_another_machine_by_its_throughput_per_kind_and_nothing_else(tiny_kb, tmp_path):
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    base = PerformanceModel(max_iter=20, calibrate=False).fit(records)
    model = PerformanceModel(max_iter=20, calibrate=False).fit(records + _probed(records, 2.0))
    speed = model.machine_speed_[KEY]
    assert {f"numpy:{k}" for k in KINDS} <= set(speed) and speed["~"] >= 0.0
    assert speed["numpy:step_x_layers"] == speed["numpy:step"]  # fitted as one (_SAME_MULTIPLIER)
    here = [record_row(d) for d in records]
    there = [dict(row, hardware={**row["hardware"], **OTHER}) for row in here]
    # The probes teach neither accuracy nor the reference machine's times.
    a, b = base.predict(here), model.predict(here)
    assert np.allclose(a["accuracy"], b["accuracy"]) and np.allclose(a["train_time_s"], b["train_time_s"])
    assert model.workloads_ == base.workloads_
    # Twice as slow at every kind of work: about twice the reference machine's time.
    ratio = model.predict(there)["train_time_s"] / b["train_time_s"]
    assert np.median(ratio) == pytest.approx(2.0, rel=0.15)
    assert model.calibrated_machines()[1:] == [KEY]
    reasons = model.novelty(there[0]["meta"], there[0]["hardware"], RecommendPolicy())[1]
    assert not any("never measured" in r for r in reasons)
    loaded = PerformanceModel.load(model.save(tmp_path / "m.npz"))
    assert np.allclose(loaded.predict(there)["train_time_s"], model.predict(there)["train_time_s"])


def test_the_per_layer_step_overhead_takes_the_per_step_multiplier():
    rng = np.random.default_rng(1)
    shares = rng.uniform(0.0, 1.0, (24, len(KINDS))) ** 3
    # Per-layer overheads in a third of the probes only (those at 2 threads): fitted alone,
    # their multiplier stays near the overall ratio (about 2.1 here).
    shares[np.arange(24) % 3 != 2, KINDS.index("step_x_layers")] = 0.0
    truth = np.array([{"step": 3.0, "step_x_layers": 3.0, "dense": 0.5}.get(k, 1.0) for k in KINDS])
    fitted = _fit_kinds(shares, shares @ truth)
    assert fitted[KINDS.index("step_x_layers")] == fitted[KINDS.index("step")] == pytest.approx(3.0, rel=0.1)
