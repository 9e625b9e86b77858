"""``run_study(seeds=K)``: every planned run measured with K seeds, keyed apart, resumed."""

from __future__ import annotations

import copy

import pytest

from dltune._errors import ParameterError
from dltune.study import run_study

DATA = {"n_train": 200, "n_test": 60}


def test_every_run_holds_its_seeds_mean_spread_and_interval(tmp_path, monkeypatch):
    import dltune._bench as bench

    real, first = bench.measure, {}
    seen = []

    def by_seed(workload, config, pool=None, fault=None):
        """One real run, then copies whose accuracy is the seed's (no more training)."""
        seen.append(config.seed)
        if not first:
            first["record"] = real(workload, config, pool=pool)
        record = copy.deepcopy(first["record"])
        record.config = config.to_dict()
        record.metrics["test_accuracy"] = 0.5 + 0.01 * config.seed
        return record

    monkeypatch.setattr(bench, "measure", by_seed)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    kwargs = dict(model="mlp", frameworks="numpy", time_budget_s=600, storage=storage, epoch_cap=1,
                  dataset_params=DATA, progress=False)
    result = run_study("digits", seeds=2, **kwargs)
    assert result.ran == len(result.plan.runs) > 5 and result.skipped == []
    assert all(run.key.endswith(":seeds=2") for run in result.plan.runs)
    assert len(seen) == 2 * result.ran
    for stored in result.records:
        seeds = stored.measurement.metrics["seeds"]
        base = stored.measurement.config["seed"]
        assert seeds["seeds"] == [base, base + 1]
        assert seeds["test_accuracy"]["mean"] == pytest.approx(0.505 + 0.01 * base)
        assert seeds["test_accuracy"]["sd"] == pytest.approx(0.01 / 2**0.5)
    assert run_study("digits", seeds=2, **kwargs).ran == 0  # resumed


def test_seeds_must_be_a_positive_int(tmp_path):
    with pytest.raises(ParameterError, match=r"The 'seeds' parameter must be an int in \[1, 100\]. Got 0"):
        run_study("digits", seeds=0, storage=f"sqlite:///{tmp_path / 's.db'}", progress=False)
    assert list(tmp_path.iterdir()) == []
