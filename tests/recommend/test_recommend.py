from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dltune._errors import DltuneError, ParameterError
from dltune.config import TrainConfig
from dltune.recommend import (
    Recommendation,
    RecommendPolicy,
    alternatives_of,
    pareto_front,
    pick,
    recommend,
)

pytestmark = pytest.mark.slow

ALIEN = {"cpu_model": "Neoverse-V2 (ARM)", "logical_cores": 72, "memory_gb": 480.0,
         "gpus": [{"name": "NVIDIA GH200"}]}
DIGITS = {"n_train": 300, "n_test": 150}


@pytest.fixture(scope="module")
def kb(tiny_kb):
    return tiny_kb / "records.jsonl"


@pytest.fixture(scope="module")
def workload():
    from dltune import Workload

    return Workload.from_name("digits", "mlp", **DIGITS)


def test_recommendation_is_complete(kb, workload):
    rec = recommend(workload, knowledge_base=kb, storage=None)
    assert isinstance(rec, Recommendation)
    assert rec.framework == "numpy" == rec.config.framework
    assert isinstance(rec.config, TrainConfig)
    rec.config.validate(["numpy"])  # usable as is by benchmark
    for key in ("accuracy", "train_time_s", "peak_rss_mb"):
        point, low, high = rec.predicted[key]
        assert low <= point <= high
    assert 0 <= rec.predicted["accuracy"][0] <= 1
    assert rec.reason and "numpy" in rec.reason
    assert not rec.out_of_distribution, rec.ood_reasons
    assert rec.ranked_own_share == 1.0
    # Ranked by the shown low ends: no separate figure.
    assert all(a.ranked_accuracy is None for a in rec.alternatives) and "ranked at" not in rec.details()
    assert rec.nearest_workloads[0][1] == 0.0  # this very data set was measured
    assert rec.configs[0] == rec.config and len(rec.configs) == 1 + len(rec.alternatives)
    assert "predicted accuracy" in str(rec)
    json.dumps(rec.to_dict())


def _candidates(monkeypatch, question):
    """``question()`` asked afresh, and its candidates' predictions and ranking figures
    (``pred``, ``sure``), as the memo holds them (scored: ``score_candidates``)."""
    from dltune.recommend import _recommend

    monkeypatch.setattr(_recommend, "_predictions", {})
    answer = question()
    (entry,) = _recommend._predictions.values()
    return answer, entry.scored.predicted, entry.scored.ranked_by


def test_alternatives_lie_on_the_pareto_front(kb, workload, monkeypatch):
    tie = RecommendPolicy().accuracy_tie
    rec, pred, sure = _candidates(monkeypatch, lambda: recommend(
        workload, knowledge_base=kb, storage=None, top_k=4, objective="accuracy"))
    # Some alternative wherever the front of all candidates has more than the pick: with the
    # tiny knowledge base the fastest candidate is sometimes also the surest (one whole front).
    front = pareto_front(sure, pred["train_time_s"])
    assert len(rec.alternatives) == min(3, len(front) - 1), (len(front), rec.alternatives)
    # The front of the accuracy each candidate is predicted to reach at least (its interval's
    # low end, which the objectives rank by) and its predicted time.
    points = [(rec.predicted["accuracy"][1], rec.predicted["train_time_s"][0])] + [
        (a.accuracy[1], a.train_time_s[0]) for a in rec.alternatives]
    for i, (acc, time) in enumerate(points[1:], 1):
        assert not any(a >= acc and t <= time and (a, t) != (acc, time)
                       for j, (a, t) in enumerate(points) if j != i)
    # "accuracy": nothing predicted surely more accurate than the recommendation beyond the tie.
    assert all(a.accuracy[1] <= rec.predicted["accuracy"][1] + tie for a in rec.alternatives)
    # ... and, of the tied, the highest predicted point.
    tied = sure >= sure.max() - tie
    assert rec.predicted["accuracy"][0] == pytest.approx(pred["accuracy"][tied].max())
    assert [a.config for a in rec.alternatives] == [  # the front's useful part, fastest first
        rec_alt.config for rec_alt in sorted(rec.alternatives, key=lambda a: a.train_time_s[0])]
    assert "low end of its interval" in rec.reason
    for alt in rec.alternatives:  # each shown with the low end it was ranked by
        assert f"(at least {100 * alt.accuracy[1]:.1f}%{', measured' if alt.measured_runs else ''})" in rec.details()


def test_objectives_order_time_and_accuracy(kb, workload):
    by_acc = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None)
    by_time = recommend(workload, objective="time", knowledge_base=kb, storage=None)
    assert by_time.predicted["train_time_s"][0] <= by_acc.predicted["train_time_s"][0]
    # Both within their slack of the surest; "accuracy"'s slack is the narrower tie.
    assert by_acc.predicted["accuracy"][1] >= by_time.predicted["accuracy"][1] - RecommendPolicy().accuracy_tie


def _grid_only(monkeypatch):
    """Candidates from the grid alone: no configuration measured on the workload among them."""
    from dltune.surrogate import PerformanceModel

    monkeypatch.setattr(PerformanceModel, "measured_runs", lambda self, fingerprint, model: ([], 0.01))


def _two_candidates(monkeypatch, point, low, high, rest_point, rest_low):
    """Predictions with candidates 0 and 1 set to ``point``, ``low`` and ``high`` (pairs) and
    every other candidate's point and low end capped at ``rest_point`` and ``rest_low``."""
    from dltune.recommend import _recommend
    from dltune.surrogate import PerformanceModel

    real = PerformanceModel.predict

    def predict(self, rows):
        pred = {k: np.array(v, dtype=float) for k, v in real(self, rows).items()}
        pred["accuracy"][:2], pred["accuracy_low"][:2], pred["accuracy_high"][:2] = point, low, high
        pred["accuracy_low"][2:] = np.minimum(pred["accuracy_low"][2:], rest_low)
        pred["accuracy"][2:] = np.minimum(pred["accuracy"][2:], rest_point)
        return pred

    monkeypatch.setattr(PerformanceModel, "predict", predict)
    monkeypatch.setattr(_recommend, "_predictions", {})  # not the memo of an earlier test


def test_configurations_measured_on_the_workload_are_candidates_with_what_they_measured(kb, workload, monkeypatch):
    """The configurations measured on the workload are candidates too (one per thread setting),
    with the accuracy they measured and the interval of one more run, ranked by its low end."""
    from dltune.kb import RecordStore
    from dltune.recommend import _recommend
    from dltune.recommend._candidates import candidate_threads
    from dltune.surrogate import fitted_model
    from dltune.surrogate._seed_noise import measured_key

    perf = fitted_model(storage=None, kb_path=kb)
    runs, noise = perf.measured_runs(workload.dataset.fingerprint(), "mlp")
    mine = [r.to_dict() for r in RecordStore(kb.parent).records()
            if r.ok and r.workload["fingerprint"] == workload.dataset.fingerprint()]
    # Its runs at 1 and 2 threads, and repeats with another seed, are one configuration each.
    n = len({measured_key(d["config"]) for d in mine})
    assert len(runs) == n < len(mine)
    rec, pred, sure = _candidates(monkeypatch, lambda: recommend(
        workload, objective="accuracy", knowledge_base=kb, storage=None))
    (entry,) = _recommend._predictions.values()
    threads = len(candidate_threads(_recommend._resolve_hardware(None)[0].usable_cores))
    measured = entry.scored.measured
    assert len(measured.index) == n * threads
    assert measured.index.tolist() == list(range(rec.n_candidates - n * threads, rec.n_candidates))
    by_key = {measured_key(r["config"]): r for r in runs}
    for i, accuracy, low, high in zip(measured.index, measured.accuracy, measured.low, measured.high, strict=True):
        config = entry.configs[i].to_dict()
        assert by_key[measured_key(config)]["accuracy"] == accuracy == pred["accuracy"][i]
        assert (low, high) == (pred["accuracy_low"][i], pred["accuracy_high"][i])
        expected = perf.measured_interval(np.array([accuracy]), np.array([by_key[measured_key(config)]["runs"]]), noise)
        assert (low, high) == (expected[0][0], expected[1][0]) and sure[i] == low
    assert measured.noise == noise and measured.configs == n

    # A run of the user's own at a configuration no candidate has, measured at 100 %: with its
    # low end (one more run, given the seed noise) above every other, it is the pick.
    base = mine[0]
    mine = dict(base, id="mine-1", config=dict(base["config"], learning_rate=0.0123, seed=5),
                metrics=dict(base["metrics"], test_accuracy=1.0))
    rec, pred, sure = _candidates(monkeypatch, lambda: recommend(
        workload, objective="accuracy", knowledge_base=kb, storage=None, records=[mine]))
    assert rec.config.learning_rate == 0.0123 and rec.measured_runs == 1
    assert rec.predicted["accuracy"][0] == 1.0 and rec.predicted["accuracy"][1] < 1.0
    assert "This configuration was measured on this workload (1 run)" in rec.reason
    # The tiny knowledge base has fewer than 3 repeat pairs of this workload: its noise is borrowed.
    assert not perf.has_own_seed_noise(workload.dataset.fingerprint(), "mlp")
    assert "borrowed from its nearest measured workloads" in rec.reason
    assert "`dltune tune --repeat-best 3` measures them" in rec.reason
    # Three of its configurations measured again with another seed (as `tune --repeat-best 3`
    # does): the noise is its own.
    again = [dict(d, id=f"again-{i}", config=dict(d["config"], seed=9),
                  metrics=dict(d["metrics"], test_accuracy=d["metrics"]["test_accuracy"] - 0.01 * (i + 1)))
             for i, d in enumerate(r.to_dict() for r in RecordStore(kb.parent).records()
                                   if r.ok and r.workload["fingerprint"] == workload.dataset.fingerprint()
                                   and r.config["seed"] == 0) if i < 3]
    rec = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None, records=[mine, *again])
    assert ", from its own repeat pairs" in rec.reason and "borrowed" not in rec.reason
    assert f"100.0% measured, at least {100 * rec.predicted['accuracy'][1]:.1f}%" in rec.reason
    assert "accuracy as measured on this workload (1 run)" in rec.details()
    assert "(measured, 1 run)" in str(rec)
    assert rec.to_dict()["measured_runs"] == 1


def test_objectives_rank_by_the_accuracy_interval_low_end(kb, workload, monkeypatch):
    """A candidate predicted a little more accurate but far less surely does not win."""
    # Candidate 0: the best point by far, with the widest interval; candidate 1: a point just
    # below it, with the best low end.
    _two_candidates(monkeypatch, [0.99, 0.98], [0.50, 0.97], [1.0, 0.99], 0.95, 0.9)
    rec = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None,
                    frameworks=["numpy"])
    assert rec.predicted["accuracy"] == pytest.approx((0.98, 0.97, 0.99))


def test_widening_out_of_distribution_does_not_move_the_pick(kb, workload, monkeypatch):
    """The pick ranks the low ends as learnt; widened intervals are what is shown."""
    from dltune.surrogate import PerformanceModel

    # Candidate 0: the best learnt low end, with a wider interval than candidate 1's.
    _two_candidates(monkeypatch, [0.99, 0.97], [0.97, 0.965], [1.0, 0.98], 0.85, 0.8)

    def widen(self, pred, meta, hardware, policy, consensus=None):  # 5x wider: 0.99 - 5 x 0.02 = 0.89 < 0.97 - 5 x 0.005
        out = {k: np.array(v, dtype=float) for k, v in pred.items()}
        out["accuracy_low"] = out["accuracy"] - 5 * (out["accuracy"] - out["accuracy_low"])
        return out, ["intervals 5.0x wider: a test"]

    monkeypatch.setattr(PerformanceModel, "widen", widen)
    rec = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None,
                    frameworks=["numpy"])
    assert rec.predicted["accuracy"] == pytest.approx((0.99, 0.89, 1.0))
    assert rec.interval_notes == ["intervals 5.0x wider: a test"]


def test_an_unlike_workload_is_ranked_partly_by_what_worked_across_the_measured_ones(kb, workload, monkeypatch):
    """Unlike every measured workload of its model (intervals widened u = 2x), the pick ranks
    half its own low ends and half the consensus of the measured workloads, and says so; its
    accuracy interval reaches the consensus band."""
    from dltune.recommend import _recommend
    from dltune.surrogate import PerformanceModel

    _grid_only(monkeypatch)  # the workload is measured: its runs would be candidates too
    real = PerformanceModel._unlike
    monkeypatch.setattr(PerformanceModel, "_unlike",
                        lambda self, meta, k: (real(self, meta, k)[0], False, 2.0))
    monkeypatch.setattr(_recommend, "_predictions", {})
    chosen = {}

    keys = ("optimizer", "learning_rate", "batch_size", "epochs")

    def consensus(self, rows, meta):  # every measured workload's best: the surest-worst here
        own = self.predict(rows)["accuracy_low"]
        chosen["configs"] = [{k: rows[i]["config"][k] for k in keys} for i in np.flatnonzero(own == own.min())]
        best = (own == own.min()).astype(float)
        return best, best

    monkeypatch.setattr(PerformanceModel, "consensus_accuracy_band", consensus)
    rec = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None,
                    frameworks=["numpy"])
    assert rec.out_of_distribution and "workload is unlike" in rec.ood_reasons[0]
    assert rec.ranked_own_share == rec.to_dict()["ranked_own_share"] == 0.5
    picked = _recommend._config_features(rec.config)
    assert {k: picked[k] for k in keys} in chosen["configs"]
    assert ("ranked 50% by the accuracy predicted at least for it and 50% by the accuracy each "
            "configuration is predicted to reach at least across the measured mlp workloads") in rec.reason
    # The figure it was ranked by, beside the shown low end, which is not it here.
    assert rec.reason.count("(ranked at ") == 1  # the pick's: no other framework
    for alt in rec.alternatives:
        assert alt.ranked_accuracy is not None and f", ranked at {100 * alt.ranked_accuracy:.1f}%)" in rec.details()
    assert rec.predicted["accuracy"][2] == 1.0  # its band: (1.0, 1.0)
    assert any("accuracy intervals reach" in n for n in rec.interval_notes)


def test_constraints_filter_or_fail_clearly(kb, workload, monkeypatch):
    base, pred, _ = _candidates(monkeypatch, lambda: recommend(
        workload, objective="accuracy", knowledge_base=kb, storage=None, top_k=4))
    # A limit between the pick and the next candidate beyond it, faster or (where the pick is
    # the fastest, as the tiny knowledge base's coarse times sometimes make it) predicted more
    # accurate: feasible, and it excludes the unconstrained pick.
    own_time, own_accuracy = base.predicted["train_time_s"][0], base.predicted["accuracy"][0]
    faster = pred["train_time_s"][pred["train_time_s"] < own_time]
    better = pred["accuracy"][pred["accuracy"] > own_accuracy]
    assert len(faster) or len(better), "the pick is both the fastest and the most accurate of all candidates"
    if len(faster):
        limit = (faster.max() + own_time) / 2
        rec = recommend(workload, objective="accuracy", constraints={"max_train_time_s": limit},
                        knowledge_base=kb, storage=None)
        assert rec.predicted["train_time_s"][0] <= limit < own_time
    else:
        limit = (better.min() + own_accuracy) / 2
        rec = recommend(workload, objective="accuracy", constraints={"min_accuracy": limit},
                        knowledge_base=kb, storage=None)
        assert rec.predicted["accuracy"][0] >= limit > own_accuracy
    with pytest.raises(DltuneError, match="No candidate meets the constraints"):
        recommend(workload, constraints={"max_train_time_s": 1e-12}, knowledge_base=kb, storage=None)


def test_alien_hardware_is_flagged_not_confident(kb, workload):
    rec = recommend(workload, hardware=ALIEN, knowledge_base=kb, storage=None)
    assert rec.out_of_distribution
    assert any("never measured" in r for r in rec.ood_reasons)
    assert "outside what was measured" in rec.reason and "out of distribution: " in rec.details()
    # One calm line in the summary: whose times these are, and how to measure this machine.
    assert rec.caveat.startswith("times estimated from ") and "`dltune kb calibrate`" in rec.caveat
    assert f"note: {rec.caveat}" in str(rec) and "OUT OF" not in str(rec)
    # Not confident: the training-time interval is widened 3x each way per hardware difference.
    assert rec.interval_notes and textwrap.fill(rec.interval_notes[0], 10**6) in rec.details().replace("\n    ", " ")
    low, high = rec.predicted["train_time_s"][1:]
    assert high / low >= 9.0 ** len(rec.ood_reasons)
    # The candidates' thread counts on 72 cores: 1, 2 (the most measured) and all of them.
    assert rec.config.threads.intra_op in (1, 2, 72)
    # Thread counts far beyond the measured ones must not blow the time model up.
    local = recommend(workload, knowledge_base=kb, storage=None)
    times = [rec.predicted["train_time_s"][0]] + [c.train_time_s[0] for c in rec.alternatives]
    assert all(np.isfinite(t) and t < 1000 * local.predicted["train_time_s"][2] for t in times), times


def test_a_framework_only_another_machine_ran_has_no_speed_ratio_in_the_reason(kb, workload, tiny_kb):
    """Another machine's runs of a framework the knowledge base's machine never ran (a backend
    not in the knowledge base, tuned there): its factor is against the cost model's
    extrapolation, not a speed, and the reason says so instead of quoting it as one."""
    from dltune.kb import RecordStore

    other = {"cpu_model": "Other CPU", "logical_cores": 2, "usable_cores": 2, "memory_gb": 16.0,
             "cpu_flags": ["avx2"], "gpus": [], "target": "other-cpu-2of2c"}
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok][::2]
    runs = [dict(d, id=f"pt-{i}", hardware=dict(d["hardware"], **other),
                 config=dict(d["config"], framework="pytensor")) for i, d in enumerate(records)]
    assert len(runs) >= 8  # MIN_MACHINE_RECORDS: the machine gets factors of its own
    rec = recommend(workload, hardware=other, records=runs, frameworks=["pytensor"],
                    knowledge_base=kb, storage=None, objective="accuracy")
    assert rec.framework == "pytensor"
    assert ("The machine most of the knowledge base was measured on never ran pytensor, so there is "
            "no speed to compare with: pytensor's training times are the cost model's, scaled to this "
            "machine's own runs of it.") in rec.reason, rec.reason
    assert "as long as those of the machine" not in rec.reason
    # The knowledge base's framework, which that machine never ran: its speed is the machine's
    # over the frameworks it did run, and the reason says whose.
    numpy = recommend(workload, hardware=other, records=runs, frameworks=["numpy"],
                      knowledge_base=kb, storage=None, objective="accuracy")
    assert ("as long as those of the machine most of the knowledge base was measured on, over "
            "pytensor (numpy was not among its runs).") in numpy.reason, numpy.reason


def test_a_framework_with_a_few_runs_is_no_candidate(kb, workload, tiny_kb):
    """A user's two runs of a backend the knowledge base never ran: its cost model has nothing
    to stand on (the numpy backend's 2 runs once predicted 7e-07 s and won the balanced pick),
    so it is left out, and asked for by name it is refused with what would make it a candidate."""
    from dltune.kb import RecordStore

    two = [dict(r.to_dict(), id=f"few-{i}", config=dict(r.to_dict()["config"], framework="pytensor"))
           for i, r in enumerate(RecordStore(tiny_kb).records()[:2]) if r.ok]
    assert len(two) == 2
    # Described, not this machine: every measured framework is a candidate, installed here or not.
    other = {"cpu_model": "Other CPU", "logical_cores": 2, "usable_cores": 2, "memory_gb": 16.0,
             "cpu_flags": ["avx2"], "gpus": [], "target": "other-cpu-2of2c"}
    for hardware in (None, other):
        rec = recommend(workload, hardware=hardware, records=two, knowledge_base=kb, storage=None)
        assert rec.framework == "numpy" and {a.config.framework for a in rec.alternatives} <= {"numpy"}
        assert {d.config.framework for d in rec.defaults} == {"numpy"}
    with pytest.raises(ParameterError, match=(
            r"The 'frameworks' parameter names pytensor, of which the surrogates have 2 runs on 2 workloads: "
            r"too few to predict its training time \(at least 60 runs on 6 workloads, or half the workloads "
            r"and a tenth of the runs of the most measured framework\)")):
        recommend(workload, records=two, frameworks=["pytensor"], knowledge_base=kb, storage=None)


def test_runs_measured_on_another_machine_calibrate_its_recommendation(kb, workload, tiny_kb):
    """Records of another machine (what ``dltune kb calibrate`` writes there) scale its predicted
    training times and stop the "never measured" flag; without them it is flagged."""
    from dltune.kb import RecordStore

    other = {"cpu_model": "Other CPU", "logical_cores": 2, "usable_cores": 2, "memory_gb": 16.0,
             "cpu_flags": ["avx2"], "gpus": [], "target": "other-cpu-2of2c"}
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok][::2]
    runs = [dict(d, id=f"there-{i}", hardware=dict(d["hardware"], **other),
                 metrics=dict(d["metrics"], train_time_s=3.0 * d["metrics"]["train_time_s"]))
            for i, d in enumerate(records)]
    plain = recommend(workload, hardware=other, knowledge_base=kb, storage=None, objective="accuracy")
    assert any("'Other CPU [avx2]' was never measured" in r for r in plain.ood_reasons)
    rec = recommend(workload, hardware=other, records=runs, knowledge_base=kb, storage=None,
                    objective="accuracy")
    assert not any("never measured" in r for r in rec.ood_reasons)
    assert "scaled to this machine's measured speed" in rec.reason
    here = recommend(workload, records=runs, knowledge_base=kb, storage=None, objective="accuracy")
    assert "scaled to" not in here.reason
    assert rec.config == here.config
    # Exactly 3x what the same runs at this machine's speed give that machine (the factor is a
    # median over its runs of the ratio to the model, so 3x the runs make it 3x whatever the
    # freshly measured runs' scatter; against this machine's own prediction it is about 3x).
    as_fast = [dict(d, metrics=dict(d["metrics"], train_time_s=d["metrics"]["train_time_s"] / 3.0)) for d in runs]
    same = recommend(workload, hardware=other, records=as_fast, knowledge_base=kb, storage=None,
                     objective="accuracy")
    assert same.config == rec.config
    assert rec.predicted["train_time_s"][0] == pytest.approx(3.0 * same.predicted["train_time_s"][0], rel=1e-9)


def test_candidate_epochs_are_spaced_by_ratio_with_both_ends():
    """Short training gets as fine a grid as long: 1, 2, 4, ... rather than 1, 11, 20, 30."""
    from dltune.recommend._candidates import candidate_configs

    def epochs(low: int, high: int) -> list[int]:
        return sorted({c.epochs for c in candidate_configs(["numpy"], 1, (low, high)) if c.preset_name is None})

    assert epochs(1, 30) == [1, 2, 4, 8, 15, 30]
    assert epochs(1, 6) == [1, 2, 3, 4, 6]
    assert epochs(3, 3) == [3]


def test_more_threads_than_a_calibrated_machine_measured_are_not_proposed(kb, workload, tiny_kb, monkeypatch):
    """A 16-core machine calibrated at 1 and 2 threads: its candidates keep to them (its thread
    grid, 1, 2, 4, 8, 16, is what runs with all its cores would support)."""
    from dltune.kb import RecordStore
    from dltune.recommend import _recommend
    from dltune.recommend._candidates import candidate_configs

    assert {c.threads.intra_op for c in candidate_configs(["numpy"], 16, (1, 4))} == {1, 2, 4, 8, 16}
    assert {c.threads.intra_op for c in candidate_configs(["numpy"], 12, (1, 4))} == {1, 2, 4, 8, 12}
    assert {c.threads.intra_op for c in candidate_configs(["numpy"], 2, (1, 4))} == {1, 2}
    assert {c.threads.intra_op for c in candidate_configs(["numpy"], 1, (1, 4))} == {1}
    big = {"cpu_model": "Big CPU", "logical_cores": 16, "usable_cores": 16, "memory_gb": 24.0,
           "cpu_flags": ["avx2"], "gpus": [], "target": "big-cpu-16of16c", "blas": []}
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok][::2]
    # Its 1-thread runs are pinned to one core (that target's usable cores: 1); 2-thread ones not.
    runs = [dict(d, id=f"big-{i}", hardware=dict(d["hardware"], **dict(
        big, usable_cores=1 if d["hardware"]["usable_cores"] == 1 else 16)))
        for i, d in enumerate(records)]

    _grid_only(monkeypatch)  # the candidates of one thread setting: none measured

    def only(n, records=runs):
        monkeypatch.setattr(_recommend, "_predictions", {})
        monkeypatch.setattr(_recommend, "candidate_configs", lambda *a, **k: [
            c for c in candidate_configs(*a, **k) if c.threads.intra_op == n])
        return recommend(workload, hardware=big, records=records, knowledge_base=kb, storage=None)

    monkeypatch.setattr(_recommend, "_predictions", {})
    capped = recommend(workload, hardware=big, records=runs, knowledge_base=kb, storage=None)
    assert max(c.threads.intra_op for c in capped.configs) <= 2 and not capped.out_of_distribution
    assert capped.threads_note.startswith("at most 2 of 16 cores: more were never measured")
    # Calibrated at all 16 cores too (as `dltune kb calibrate` runs on more than 2 cores): a
    # pick of 16 threads is measured, not hedged, and its time is the extrapolation from 1-2
    # threads scaled by what 16 threads gained there (every other configuration once more: the
    # knowledge base's machine keeps the most runs). 16-thread runs that take twice as long
    # make it exactly twice as long (the factor is their median, whatever the model's errors).
    from dltune.config import ThreadConfig
    from dltune.surrogate import fitted_model, record_row
    from dltune.surrogate._machines import machine_key

    model = fitted_model(storage=None, kb_path=kb, records=runs)
    wide = [dict(d, id=f"big16-{i}", config=dict(d["config"], threads=ThreadConfig.uniform(16).to_dict()),
                 hardware=dict(d["hardware"], usable_cores=16)) for i, d in enumerate(runs[::2])]
    extrapolated = model.predict([record_row(d) for d in wide])["train_time_s"]

    def at(gain):
        return [dict(d, metrics=dict(d["metrics"], train_time_s=float(t) * gain))
                for d, t in zip(wide, extrapolated, strict=True)]

    fast, slow = only(16, runs + at(0.6)), only(16, runs + at(1.2))
    for rec in (fast, slow):
        assert not rec.out_of_distribution, rec.ood_reasons
        assert rec.interval_notes == []
        assert "at 16 threads (what its runs with more threads than the knowledge base's gained: " in rec.reason, rec.reason
    assert fast.config == slow.config
    assert fast.predicted["train_time_s"][0] == pytest.approx(0.5 * slow.predicted["train_time_s"][0], rel=1e-9)
    entry = fitted_model(storage=None, kb_path=kb, records=runs + at(0.6)).machine_speed_[machine_key(big)]
    twice = fitted_model(storage=None, kb_path=kb, records=runs + at(1.2)).machine_speed_[machine_key(big)]
    assert entry["@"] == twice["@"] == 2
    assert twice["numpy@16"] - entry["numpy@16"] == pytest.approx(np.log(2.0), abs=1e-9)
    # The 1-2-thread factor is the same either way.
    assert entry["numpy"] == twice["numpy"]
    # The same machine calibrated later (`dltune kb calibrate` in its cache, all 16 cores among
    # its runs): its speed now is a factor of its own, and so is what 16 threads gain now; the
    # reason quotes both. 16-thread calibration runs twice as long give exactly twice the time.
    calibration = [dict(d, id=f"now-{d['id']}", kb=dict(d.get("kb") or {}, suite="calibration"),
                        started_at="2026-12-04T14:00:00+00:00") for d in runs[:12]]

    def now(gain):
        return only(16, runs + calibration + [dict(d, id=f"now-{d['id']}", kb=dict(d.get("kb") or {}, suite="calibration"))
                                               for d in at(gain)])

    quick, slower = now(0.6), now(1.2)
    for rec in (quick, slower):
        assert f"This machine's calibration ({len(calibration)} runs, 2026-12-04) ran " in rec.reason
        assert ("x as long as this machine ran them for the knowledge base, for numpy at 16 threads "
                "(what its runs with more threads than the knowledge base's gained: ") in rec.reason, rec.reason
    assert quick.config == slower.config
    assert quick.predicted["train_time_s"][0] == pytest.approx(0.5 * slower.predicted["train_time_s"][0], rel=1e-9)


def test_a_calibration_of_the_measured_machine_scales_its_times_to_its_speed_now(kb, workload, tiny_kb):
    """The machine that measured the knowledge base, calibrated on a day it runs 2x slower."""
    from dltune.kb import RecordStore

    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok][::2]
    later = [dict(d, id=f"later-{i}", started_at="2026-12-04T14:00:00+00:00",
                  kb=dict(d.get("kb") or {}, suite="calibration"),
                  metrics=dict(d["metrics"], train_time_s=2.0 * d["metrics"]["train_time_s"]))
             for i, d in enumerate(records)]
    plain = recommend(workload, knowledge_base=kb, storage=None, objective="accuracy")
    rec = recommend(workload, records=later, knowledge_base=kb, storage=None, objective="accuracy")
    assert f"This machine's calibration ({len(later)} runs, 2026-12-04) ran " in rec.reason
    assert "x as long as this machine ran them for the knowledge base, for numpy" in rec.reason
    assert rec.config == plain.config
    assert 1.5 < rec.predicted["train_time_s"][0] / plain.predicted["train_time_s"][0] < 2.7
    # Shipped, the same calibration was made on another machine of the kind on another day:
    # times are scaled halfway and the interval reaches both speeds.
    shipped = [dict(d, kb=dict(d["kb"], shipped=True)) for d in later]
    other_day = recommend(workload, records=shipped, knowledge_base=kb, storage=None, objective="accuracy")
    assert f"A machine of this kind ran the shipped calibration ({len(later)} runs, 2026-12-04) " in other_day.reason
    assert "its speed varies from day to day" in other_day.reason
    assert other_day.config == plain.config
    point, low, high = other_day.predicted["train_time_s"]
    assert 1.2 < point / plain.predicted["train_time_s"][0] < 1.7
    # The interval reaches both speeds' intervals; where the scatter makes an end coincide with
    # one of theirs, the two are the same sum in another order (equal up to the last bit).
    assert low <= plain.predicted["train_time_s"][1] * (1 + 1e-12)
    assert high >= rec.predicted["train_time_s"][2] * (1 - 1e-12)


def test_hardware_from_json_file(kb, workload, tmp_path):
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(ALIEN))
    assert recommend(workload, hardware=str(path), knowledge_base=kb, storage=None).hardware_target.endswith("gh200")


def test_arrays_are_a_workload(kb):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 1, 8, 8)).astype(np.float32)
    y = np.arange(120) % 3
    rec = recommend((x[:90], y[:90], x[90:], y[90:]), model="mlp", knowledge_base=kb, storage=None)
    assert rec.workload == "arrays" and rec.model == "mlp"


def test_second_call_reuses_the_fitted_model(kb, workload, monkeypatch):
    from dltune.surrogate import PerformanceModel

    recommend(workload, knowledge_base=kb, storage=None)

    def no_fit(self, records):
        raise AssertionError("refitted")

    monkeypatch.setattr(PerformanceModel, "fit", no_fit)
    monkeypatch.setattr(PerformanceModel, "load", classmethod(lambda cls, path: (_ for _ in ()).throw(AssertionError("reloaded"))))
    recommend(workload, knowledge_base=kb, storage=None)


@pytest.mark.parametrize("kwargs, message", [
    ({"objective": "fast"}, "The 'objective' parameter must be one of {'accuracy', 'time', 'balanced'}. Got 'fast' instead."),
    ({"top_k": 0}, "The 'top_k' parameter must be an int in [1, 100]. Got 0 instead."),
    ({"constraints": {"max_time": 3}}, "The 'constraints' parameter must be one of {'max_train_time_s', 'max_memory_mb', 'min_accuracy'}. Got 'max_time' instead."),
    ({"constraints": {"max_train_time": 3}}, "The 'constraints' parameter no longer accepts 'max_train_time': use 'max_train_time_s'."),
    ({"constraints": {"min_accuracy": 2}}, "The 'constraints['min_accuracy']' parameter must be a float in [0.0, 1.0]. Got 2 instead."),
    ({"objective": "both"}, "The 'objective' parameter no longer accepts 'both': use 'balanced'."),
    ({"include_legacy": 1}, "The 'include_legacy' parameter must be a bool. Got 1 instead."),
    ({"hardware": 3}, "The 'hardware' parameter must be None (this machine), a Hardware, a dict or a JSON file path. Got int instead."),
    ({"frameworks": ["torch"]}, "The 'frameworks' parameter must be one of {'numpy'}. Got 'torch' instead."),
])
def test_bad_input_messages(kb, workload, kwargs, message):
    with pytest.raises(ParameterError) as info:
        recommend(workload, knowledge_base=kb, storage=None, **kwargs)
    assert str(info.value) == message


def test_pick_and_pareto_front():
    acc = np.array([0.9, 0.95, 0.8, 0.95, 0.5])
    time = np.array([10.0, 40.0, 1.0, 20.0, 0.5])
    assert list(pareto_front(acc, time)) == [4, 2, 0, 3]
    assert pick("accuracy", acc, time) == 3  # ties on accuracy go to the faster
    assert pick("time", acc, time) == 3  # fastest within 2 points of the best
    # balanced: one accuracy point is worth one halving of the time
    assert pick("balanced", acc, time) == 3  # 95 - log2(20) = 90.7 beats 90 - log2(10) = 86.7
    assert pick("balanced", np.array([0.95, 0.945]), np.array([100.0, 1.0])) == 1
    assert pick("accuracy", np.array([0.95, 0.944]), np.array([100.0, 1.0])) == 0
    # Within half a point (RecommendPolicy.accuracy_tie) is a tie: without points, the faster wins...
    assert pick("accuracy", np.array([0.95, 0.9455]), np.array([100.0, 1.0])) == 1
    assert pick("accuracy", np.array([0.95, 0.944, 0.9455]), np.array([100.0, 1.0, 2.0])) == 2
    # ... with them (as recommend and kb validate pass), the highest predicted point of the tied,
    # and equal points go to the faster.
    low, t = np.array([0.95, 0.944, 0.9455, 0.947]), np.array([100.0, 1.0, 2.0, 3.0])
    assert pick("accuracy", low, t, np.array([0.96, 0.999, 0.97, 0.98])) == 3  # 1 is not tied
    assert pick("accuracy", low, t, np.array([0.99, 0.999, 0.97, 0.98])) == 0
    assert pick("accuracy", low, t, np.array([0.98, 0.999, 0.98, 0.98])) == 2
    # time ignores the points; balanced weighs them too (tests/recommend/test_select.py).
    assert pick("time", low, t, np.array([0.96, 0.999, 0.97, 0.98])) == pick("time", low, t)
    assert pick("balanced", low, t, np.array([0.96, 0.999, 0.97, 0.98])) == pick("balanced", low, t) == 1


def test_alternatives_are_spread_over_the_useful_part_of_the_front():
    """Not the front's fast end (a one-epoch run far below the pick): its members within
    RecommendPolicy.alternatives_within (5 points) of the pick, then the most accurate of the rest."""
    acc = np.array([0.30, 0.60, 0.86, 0.88, 0.90, 0.91, 0.92, 0.85])
    time = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9])  # the last is dominated
    assert alternatives_of(5, acc, time, 2) == [2, 6]  # the ends of 0.86..0.92, fastest first
    assert alternatives_of(5, acc, time, 1) == [2]
    assert alternatives_of(5, acc, time, 4) == [2, 3, 4, 6]
    assert alternatives_of(5, acc, time, 6) == [0, 1, 2, 3, 4, 6]  # 0.60, then 0.30 fill in
    assert alternatives_of(5, acc, time, 10) == [0, 1, 2, 3, 4, 6]  # never a dominated one
    assert alternatives_of(5, acc, time, 0) == []
    assert alternatives_of(0, acc, time, 2) == [1, 6]  # the pick at the fast end: all near it


def test_parent_process_imports_no_framework(kb):
    code = (
        "import sys, dltune; "
        f"r = dltune.recommend('digits', model='mlp', knowledge_base={str(kb)!r}, storage=None); "
        # Importing the package of the same name binds it as dltune.recommend: still callable.
        "from dltune.recommend import Recommendation; "
        f"r2 = dltune.recommend('digits', model='mlp', knowledge_base={str(kb)!r}, storage=None); "
        "assert isinstance(r2, Recommendation) and r2.config == r.config; "
        "bad = [m for m in ('torch', 'tensorflow', 'mxnet', 'theano') if m in sys.modules]; "
        "assert not bad, bad; print(r.framework)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "numpy"


def test_cli_json_and_verify(kb, cli):
    done = cli("recommend", "--workload", "digits", "--model", "mlp", "--data", "n_train=300",
               "--data", "n_test=150", "--kb", str(kb), "--storage", "none", "--json", "--verify")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["framework"] == "numpy"
    for key in ("accuracy", "train_time_s", "peak_rss_mb"):
        v = data["verify"][key]
        assert v["measured"] is not None and v["low"] <= v["predicted"] <= v["high"]
        assert v["inside"] == (v["low"] <= v["measured"] <= v["high"])


def test_a_verified_time_outside_its_interval_points_at_calibration():
    from dltune.cli._recommend import _verify_hint

    inside = {"predicted": 1.0, "low": 0.8, "high": 1.3, "measured": 1.2, "inside": True}
    assert _verify_hint(inside) is None
    slow = _verify_hint(dict(inside, measured=1.9, inside=False))
    assert slow.startswith("The training time took 1.9x the prediction") and "consistently slower" in slow
    assert "`dltune kb calibrate`" in slow and "kb_speed_drift.py" in slow
    assert "consistently faster" in _verify_hint(dict(inside, measured=0.5, inside=False))


def test_cli_table_and_errors(kb, cli):
    done = cli("recommend", "--workload", "digits", "--model", "mlp", "--kb", str(kb), "--storage", "none",
               "--objective", "time", "--max-train-time-s", "100")
    assert done.returncode == 0, done.stderr
    assert "pick: numpy" in done.stdout and "predicted accuracy" in done.stdout
    old = cli("recommend", "--workload", "digits", "--kb", str(kb), "--max-train-time", "100")
    assert old.returncode == 2 and "'--max-train-time-s'" in old.stderr
    bad = cli("recommend", "--workload", "digits", "--kb", str(kb), "--objective", "fast")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "'objective'" in bad.stderr
    both = cli("recommend", "--workload", "digits", "--kb", str(kb), "--verify", "--hardware", "x.json")
    assert both.returncode == 2 and "--hardware" in both.stderr


def test_a_records_file_of_no_records_is_refused(kb, workload, tmp_path):
    empty = tmp_path / "runs.jsonl"
    empty.write_text("\n")
    with pytest.raises(ParameterError, match=f"The 'records' file '{empty}' holds no records."):
        recommend(workload, records=[str(empty)], knowledge_base=kb, storage=None)


def test_a_data_set_larger_than_any_measured_is_flagged_and_its_time_and_memory_intervals_widened(kb, workload, monkeypatch):
    from dltune import Workload
    from dltune.hardware import Hardware
    from dltune.surrogate import fitted_model
    policy = RecommendPolicy()
    model = fitted_model(storage=None, kb_path=kb)
    large = Workload.from_name("digits", "mlp")  # all 1,797 samples of 8x8
    ratio, size, largest = model.data_size_ratio(large.meta_features())
    # The tiny suite's largest: 400 + 100 synthetic samples of 8x8.
    assert (size, largest) == (1797 * 64, 500 * 64) and ratio > policy.data_size_ood
    assert model.data_size_ratio(workload.meta_features())[0] == pytest.approx(450 / 500)
    rec = recommend(large, knowledge_base=kb, storage=None)
    assert rec.out_of_distribution
    assert f"the data set is {ratio:.3g}x the largest measured (115,008 training and test input values against 32,000)" in rec.ood_reasons[-1]
    # Widened: here by the distance (1,797 samples are also unlike the 200-450 measured), at
    # least as much as the size's 1 + ln(ratio) would (the larger of the two applies).
    unlike = 1 + model.nearest_workloads(large.meta_features(), k=1)[0][1] / model.ood_threshold_
    assert rec.interval_notes == [f"intervals {unlike:.1f}x wider: the workload is unlike every measured one of its model",
                                  "accuracy intervals reach the configuration's interval averaged over the "
                                  "measured workloads of its model"]
    assert unlike >= 1 + np.log(ratio)
    # The widening itself: the log distances from the point to the time and memory interval
    # ends times 1 + ln(ratio); accuracy's unchanged (alone, without the distance's stretch).
    monkeypatch.setattr(type(model), "nearest_workloads", lambda self, meta, k=3: [("alike", 0.0)])
    pred = {"accuracy": np.array([0.9]), "accuracy_low": np.array([0.8]), "accuracy_high": np.array([0.95]),
            "train_time_s": np.array([1.0]), "train_time_s_low": np.array([0.5]), "train_time_s_high": np.array([2.0]),
            "peak_rss_mb": np.array([100.0]), "peak_rss_mb_low": np.array([80.0]), "peak_rss_mb_high": np.array([125.0])}
    here = Hardware.detect().to_dict()
    wide, notes = model.widen(pred, large.meta_features(), here, policy)
    s = 1 + np.log(ratio)
    assert wide["train_time_s_low"][0] == pytest.approx(0.5 ** s) and wide["train_time_s_high"][0] == pytest.approx(2.0 ** s)
    assert wide["peak_rss_mb_low"][0] == pytest.approx(100 * 0.8 ** s) and wide["peak_rss_mb_high"][0] == pytest.approx(100 * 1.25 ** s)
    assert (wide["accuracy_low"][0], wide["accuracy_high"][0]) == (0.8, 0.95)
    assert len(notes) == 1
    same, none = model.widen(pred, workload.meta_features(), here, policy)
    assert none == [] and all(np.array_equal(same[k], pred[k]) for k in pred if k != "peak_rss_mb_high")
    assert same["peak_rss_mb_high"][0] == pytest.approx(130.0)  # another installation's pages: 1.3x


def test_a_pair_of_arrays_is_a_workload(kb):
    """``recommend((x, y))``: the arrays' own meta-features, a fifth held out as the test set."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rec = recommend((x[:450], y[:450]), model="mlp", knowledge_base=kb, storage=None)
    assert rec.workload == "arrays" and rec.model == "mlp" and rec.framework == "numpy"
    assert rec.nearest_workloads[0][0].startswith("digits")  # 8x8 digits, as measured


def test_each_framework_s_own_defaults_are_shown_for_comparison(kb, workload, monkeypatch):
    """Each candidate framework's own default preset, predicted as every candidate is (or as
    measured, where the knowledge base measured it on the workload), beside the pick."""
    from dltune.config import default_preset
    from dltune.recommend import _recommend
    from dltune.surrogate import fitted_model
    from dltune.surrogate._seed_noise import measured_key

    rec, pred, _ = _candidates(monkeypatch, lambda: recommend(workload, knowledge_base=kb, storage=None))
    (entry,) = _recommend._predictions.values()
    (default,) = rec.defaults  # the tiny knowledge base measured numpy alone
    assert default.config.framework == "numpy" and default.config.preset_name == "caffe"
    measured_here = entry.scored.measured
    i = next(j for j, c in enumerate(entry.configs) if c == default.config and
             (measured_here is None or (j in measured_here.index) == bool(default.measured_runs)))
    assert default.accuracy == (pred["accuracy"][i], pred["accuracy_low"][i], pred["accuracy_high"][i])
    assert default.train_time_s[0] == pred["train_time_s"][i]
    # The tiny build measured Caffe's preset on this very data set: shown as measured.
    runs, _ = fitted_model(storage=None, kb_path=kb).measured_runs(workload.dataset.fingerprint(), "mlp")
    by_key = {measured_key(r["config"]): r for r in runs}
    measured = by_key.get(measured_key(default.config.to_dict()))
    assert measured is not None and measured["config"]["preset_name"] == "caffe"
    assert default.measured_runs == measured["runs"] and default.accuracy[0] == measured["accuracy"]
    text = rec.details().replace("\n    ", " ")
    assert (f"own defaults of numpy (caffe's): {default.config.optimizer} "
            f"lr={default.config.learning_rate:.3g} batch={default.config.batch_size}") in text
    assert f"own default presets: numpy (caffe's) {100 * default.accuracy[0]:.1f}%" in str(rec)
    assert f"-> {100 * default.accuracy[0]:.1f}% (at least {100 * default.accuracy[1]:.1f}%, measured)" in text
    assert rec.to_dict()["defaults"][0]["config"]["preset_name"] == "caffe"
    # Which preset is a framework's own: its own where it has one, else Caffe's.
    assert [default_preset(f) for f in ("torch", "tensorflow", "theano", "mxnet", "numpy")] == [
        "torch", "tensorflow", "theano", "caffe", "caffe"]
    assert default_preset("theano", "cifar10") == "caffe" and default_preset("torch", "cifar10") == "torch"


def test_default_candidates_prefer_the_measured_preset():
    from dltune.recommend._recommend import default_candidates

    torch = TrainConfig.preset("torch", framework="torch")
    caffe = TrainConfig.preset("caffe", framework="mxnet")
    configs = [torch, torch.replace(epochs=3), caffe, TrainConfig(framework="tensorflow"),
               TrainConfig.preset("torch", framework="tensorflow")]
    frameworks = ["tensorflow", "torch", "mxnet"]
    # TensorFlow has only torch's preset among them, not its own: left out.
    assert default_candidates(configs, frameworks, "mnist") == [0, 2]
    assert default_candidates(configs, frameworks, "mnist", np.array([0, 2, 0, 0, 0])) == [1, 2]


def test_a_knowledge_base_file_that_holds_no_records_is_refused_before_any_fit(tmp_path, monkeypatch):
    """A folder was an IsADirectoryError traceback, a JSON list of ints an AttributeError."""
    import dltune.surrogate

    def no_fit(*args, **kwargs):
        raise AssertionError("the surrogates were fitted before the knowledge base was checked")

    monkeypatch.setattr(dltune.surrogate, "fitted_model", no_fit)
    (tmp_path / "ints.json").write_text("[1, 2, 3]")
    (tmp_path / "empty.jsonl").write_text("")
    for name, says in [("missing.jsonl", "does not exist"), (".", "must be a file. Got the folder"),
                       ("ints.json", "must hold measurement records"), ("empty.jsonl", "holds no records")]:
        with pytest.raises(ParameterError, match=f"The 'knowledge_base' (file|parameter).*{says}"):
            recommend("digits", model="mlp", storage=None, knowledge_base=tmp_path / name)
    with pytest.raises(ParameterError, match="The 'frameworks' parameter must name at least one framework"):
        recommend("digits", model="mlp", storage=None, frameworks=[])
