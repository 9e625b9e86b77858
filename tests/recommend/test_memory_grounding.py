"""A candidate whose memory was seldom measured in a fresh process: shown as at least what its
process held, with no upper bound, and never reported as meeting a memory limit with confidence."""

from __future__ import annotations

import json
import math

import pytest

from dltune._errors import DltuneError
from dltune.config import TrainConfig
from dltune.kb import RecordStore
from dltune.measure._record import current_revision
from dltune.recommend import Candidate, Recommendation, recommend
from dltune.surrogate import PerformanceModel

pytestmark = pytest.mark.slow

DIGITS = {"n_train": 300, "n_test": 150}


def _run(d, tag, framework, fresh, peak):
    metrics = dict(d["metrics"], import_time_s=1.0 if fresh else 0.0, baseline_rss_mb=30.0 if fresh else 600.0)
    if peak is not None:
        metrics["peak_rss_mb"] = peak
    return dict(d, id=tag, config=dict(d["config"], framework=framework),
                backend_revision=current_revision(framework), metrics=metrics)


@pytest.fixture(scope="module")
def question(tiny_kb):
    """Surrogates fitted on records in which numpy ran in new processes and torch in reused
    workers (whose first runs peaked at 500 and 520 MB), and what to ask them: digits on the
    records' machine."""
    import dltune.surrogate
    from dltune import Workload

    tiny = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    runs = ([_run(d, f"np-{i}", "numpy", True, None) for i, d in enumerate(tiny)]
            + [_run(d, f"tw-{i}", "torch", False, 900.0) for i, d in enumerate(tiny)]
            + [_run(d, f"tf-{i}", "torch", True, peak) for i, (d, peak) in enumerate(zip(tiny[:2], (520.0, 500.0),
                                                                                          strict=True))])
    model = PerformanceModel(max_iter=20, calibrate=False).fit(runs)
    with pytest.MonkeyPatch.context() as patch:  # recommend's fit, the quick way
        patch.setattr(dltune.surrogate, "fitted_model", lambda *args, **kwargs: model)
        yield dict(workload=Workload.from_name("digits", "mlp", **DIGITS), hardware=tiny[0]["hardware"],
                   storage=None, frameworks=["torch"])


def test_a_memory_limit_below_what_the_process_held_excludes_it(question):
    with pytest.raises(DltuneError, match="the smallest at 500 MB"):
        recommend(**question, constraints={"max_memory_mb": 450})


def test_a_memory_limit_above_it_keeps_it_with_a_warning(question):
    rec = recommend(**question, constraints={"max_memory_mb": 2000})
    assert rec.framework == "torch" and tuple(rec.predicted["peak_rss_mb"]) == (500.0, 500.0, math.inf)
    assert rec.memory_unmeasured == ["torch"]
    text = str(rec)
    assert "memory at least 500 MB" in text
    assert "note: memory of torch seldom measured in a fresh process: no upper bound, so max_memory_mb " \
           "2000 may not hold" in text
    assert "memory of torch seldom measured in a fresh process" in rec.details()
    out = json.loads(json.dumps(rec.to_dict(), allow_nan=False))  # strict JSON: no Infinity
    assert out["predicted"]["peak_rss_mb"] == [500.0, 500.0, None] and out["memory_unmeasured"] == ["torch"]


def test_a_measured_memory_reads_as_before():
    config = TrainConfig(framework="torch", optimizer="adam", learning_rate=0.001, batch_size=64, epochs=3)
    c = Candidate(config, (0.95, 0.93, 0.97), (1.0, 0.5, 2.0), (330.4, 315.0, 430.0))
    rec = Recommendation(workload="digits", model="lenet", framework="torch", config=config,
                         predicted={"accuracy": c.accuracy, "train_time_s": c.train_time_s,
                                    "peak_rss_mb": c.peak_rss_mb},
                         objective="balanced", alternatives=[c], reason="", out_of_distribution=False,
                         ood_reasons=[], nearest_workloads=[], hardware_target="here", n_candidates=1,
                         kb_records=1, constraints={"max_memory_mb": 2000.0})
    assert rec.memory_unmeasured == [] and "memory 330 MB [315, 430]" in str(rec)
    assert "fresh process" not in str(rec) + rec.details()
    assert rec.to_dict()["predicted"]["peak_rss_mb"] == [330.4, 315.0, 430.0]
