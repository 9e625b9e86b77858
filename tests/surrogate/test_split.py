from __future__ import annotations

import copy

import numpy as np
import pytest

from dltune.kb import RecordStore
from dltune.surrogate import PerformanceModel, _cache, record_row
from dltune.surrogate._split import with_probes

# Another machine than the knowledge base's.
OTHER = {"cpu_model": "Probed CPU", "logical_cores": 2, "memory_gb": 16.0, "cpu_flags": ["avx2"],
         "gpus": [], "blas": []}


def _probes(records, hardware=None, n=8):
    """Quick-calibration probes made of knowledge-base runs: two epochs each, timed 1.7x (and the
    first epoch 1.1x of half the run) on ``hardware`` (default: the runs' own machine)."""
    out = []
    for i, d in enumerate(records[:n]):
        d = copy.deepcopy(d)
        t = 1.7 * d["metrics"]["train_time_s"]
        first = 0.55 * t
        d["id"] = f"probe-{i}"
        d["kb"] = {"suite": "quick", "key": f"probe-{i}"}
        d["config"]["epochs"] = 2
        d["metrics"].update(train_time_s=t, curves=[{"epoch": 1, "train_time_s": first},
                                                    {"epoch": 2, "train_time_s": t - first}])
        if hardware is not None:
            d["hardware"] = {**d["hardware"], **hardware}
        out.append(d)
    return out


@pytest.fixture(scope="module")
def kb_records(tiny_kb):
    return [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]


@pytest.mark.parametrize("where", ["another machine", "the knowledge base's machine"])
def test_adding_probes_to_a_fit_equals_fitting_on_them(kb_records, where):
    """A quick calibration refits in seconds: the estimators are kept and only the calibrated
    part is fitted again, with the same result as a full fit on the records and the probes."""
    probes = _probes(kb_records, OTHER if where == "another machine" else None)
    params = dict(max_iter=5, calibrate=False, n_jobs=1)
    base = PerformanceModel(**params).fit(kb_records)
    full = PerformanceModel(**params).fit(kb_records + probes)
    quick = with_probes(base, kb_records + probes)
    assert quick is not None and quick is not base and quick.n_records_ == full.n_records_
    # the base fit is left as it was
    assert base.machine_speed_ != full.machine_speed_ or base.machine_now_ != full.machine_now_
    assert quick.machine_speed_ == full.machine_speed_ and quick.machine_now_ == full.machine_now_
    rows = [record_row(d) for d in kb_records + probes]
    expected, got = full.predict(rows), quick.predict(rows)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-12, err_msg=key)


def test_a_probe_of_a_framework_the_fit_never_saw_needs_a_full_fit(kb_records):
    base = PerformanceModel(max_iter=5, calibrate=False, n_jobs=1).fit(kb_records)
    probes = _probes(kb_records, OTHER)
    for p in probes:
        p["config"]["framework"] = "torch" if p["config"]["framework"] != "torch" else "tensorflow"
    assert with_probes(base, kb_records + probes) is None


def test_recommend_after_a_quick_calibration_does_not_fit_the_estimators(tiny_kb, kb_records, tmp_path,
                                                                         monkeypatch):
    """fitted_model: with the fit without the probes at hand, the probes are added to it; asked
    to refit, the records are fitted in full."""
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path))
    _cache.clear_memory_cache()
    kb = tiny_kb / "records.jsonl"
    monkeypatch.setattr(_cache, "calibration_records", lambda **_: [])
    base = _cache.fitted_model(storage=None, kb_path=kb, calibration=True)
    fits = []
    real_fit = PerformanceModel.fit
    monkeypatch.setattr(PerformanceModel, "fit", lambda self, records: fits.append(1) or real_fit(self, records))
    probes = _probes(kb_records, OTHER)
    monkeypatch.setattr(_cache, "calibration_records", lambda **_: probes)
    _cache.clear_memory_cache()  # the base fit is read from the cache's file
    model = _cache.fitted_model(storage=None, kb_path=kb, calibration=True)
    assert fits == [] and model.n_records_ == base.n_records_ + len(probes)
    assert any(k.startswith("Probed CPU") for k in model.machine_speed_)
    _cache.fitted_model(storage=None, kb_path=kb, calibration=True, refit=True)
    assert fits == [1]
