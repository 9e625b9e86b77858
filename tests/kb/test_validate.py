from __future__ import annotations

import json

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune.kb import RecordStore, validate_kb
from dltune.surrogate._records import workload_label

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plain_report(tiny_kb):
    """``validate_kb`` of the tiny knowledge base, uncalibrated and unpatched: made once (a fit
    per held-out workload) for the tests that compare with it."""
    return validate_kb(RecordStore(tiny_kb).records(), calibrate=False)


def test_leave_one_workload_out_structure(tiny_kb, plain_report):
    records = RecordStore(tiny_kb).records()
    report = plain_report
    assert len(report.workloads) == 3
    for row in report.workloads:
        assert row["n"] >= 3
        assert row["train_time_mape_pct"] >= 0
        assert 0 <= row["train_time_coverage_pct"] <= 100
        assert row["accuracy_mae_points"] >= 0
        assert row["accuracy_spearman"] is None or -1 <= row["accuracy_spearman"] <= 1
        assert 0 <= row["regret_points"] <= 100 * row["best_measured_accuracy"]
        assert row["picked_accuracy"] <= row["best_measured_accuracy"]
        # The pick's place: 1 + the runs of its workload that measured more accurate.
        accuracies = [r.metrics["test_accuracy"] for r in records
                      if r.ok and workload_label(r.to_dict()) == row["label"]]
        assert len(accuracies) == row["n"]
        assert row["picked_place"] == 1 + sum(a > row["picked_accuracy"] for a in accuracies)
        assert (row["picked_place"] == 1) == (row["regret_points"] == 0)
    o = report.overall
    assert o["n"] == sum(r["n"] for r in report.workloads)
    # Interval coverage: accuracy over every run, memory over the runs in a new worker process.
    from dltune.surrogate._features import ran_in_new_process
    from dltune.surrogate._records import display_name

    fresh = {}
    for r in records:
        if r.ok and ran_in_new_process(r.to_dict()):
            fresh[display_name(r.workload)] = fresh.get(display_name(r.workload), 0) + 1
    assert {r["workload"]: r["memory_runs"] for r in report.workloads} == {
        r["workload"]: fresh.get(r["workload"], 0) for r in report.workloads}
    assert o["memory_runs"] == sum(fresh.values()) > 0
    for key, weight in (("accuracy_coverage_pct", "n"), ("memory_coverage_pct", "memory_runs"),
                        ("memory_mape_pct", "memory_runs")):
        assert all(0 <= r[key] <= (100 if "coverage" in key else np.inf) for r in report.workloads if r[weight])
        assert o[key] == pytest.approx(sum(r[key] * r[weight] for r in report.workloads if r[weight])
                                       / sum(r[weight] for r in report.workloads))
    assert o["regret_points_max"] == max(r["regret_points"] for r in report.workloads)
    assert o["picked_place_max"] == max(r["picked_place"] for r in report.workloads)
    # The random-run baseline: the best run less the mean of all the workload's runs.
    for row in report.workloads:
        accuracies = [r.metrics["test_accuracy"] for r in records
                      if r.ok and workload_label(r.to_dict()) == row["label"]]
        assert row["random_run_regret_points"] == pytest.approx(
            100 * (row["best_measured_accuracy"] - np.mean(accuracies)))
        # The preset baseline: each framework's default preset measured there (numpy runs Caffe's).
        preset_runs = [r.metrics["test_accuracy"] for r in records
                       if r.ok and workload_label(r.to_dict()) == row["label"] and r.config.get("preset_name")]
        assert set(row["presets"]) == ({"numpy"} if preset_runs else set())
        if preset_runs:
            assert row["presets"]["numpy"]["preset"] == "caffe"
            assert row["presets"]["numpy"]["runs"] == len(preset_runs)
            assert row["presets"]["numpy"]["regret_points"] == pytest.approx(
                100 * (row["best_measured_accuracy"] - np.mean(preset_runs)))
    assert set(o["presets"]) == {"numpy"}
    assert o["presets"]["numpy"]["workloads"] == sum("numpy" in r["presets"] for r in report.workloads)
    assert o["random_run_regret_points"] == pytest.approx(
        np.mean([r["random_run_regret_points"] for r in report.workloads]))
    text = report.table()
    assert "OVERALL" in text and "bar <= 15%" in text
    # Per model family: the tiny suite's workloads are all MLPs, so its one family scores as overall.
    assert {r["model_family"] for r in report.workloads} == {"mlp"}
    family = report.to_dict()["families"]["mlp"]
    assert family["workloads"] == 3 and family["n"] == o["n"]
    for key in ("train_time_mape_pct", "accuracy_coverage_pct", "memory_coverage_pct", "regret_points",
                "regret_points_max", "accuracy_spearman_min"):
        assert family[key] == (None if o[key] is None else pytest.approx(o[key])), key
    assert "Per model family of the held-out workloads" in text
    # One data modality (images): its scores would be the overall ones again, so no table.
    assert list(report.to_dict()["modalities"]) == ["image"] and "Per data modality" not in text
    assert (f"within 2.0 of it / time over the best run's in the median: numpy "
            f"{o['presets']['numpy']['regret_points']:.2f} / {o['presets']['numpy']['within_bar']} of") in text
    json.dumps(report.to_dict())


def test_held_out_configurations_are_hedged_as_recommend_hedges_them(tiny_kb, plain_report, monkeypatch):
    """kb validate scores what recommend answers: the held-out configurations pass through the
    same hedges (threads, machines) before their times are scored and picked from."""
    from dltune.surrogate import PerformanceModel

    records = RecordStore(tiny_kb).records()
    plain = plain_report
    calls = []

    def hedge(self, pred, rows, hardware):  # every time 10x slower, as if another machine's
        calls.append(len(rows))
        out = dict(pred)
        for key in ("train_time_s", "train_time_s_low", "train_time_s_high"):
            out[key] = 10.0 * pred[key]
        return out, ["a test's hedge"]

    monkeypatch.setattr(PerformanceModel, "hedge_machines", hedge)
    slowed = validate_kb(records, calibrate=False)
    assert len(calls) >= len(slowed.workloads) == len(plain.workloads)
    for before, after in zip(plain.workloads, slowed.workloads, strict=True):
        assert after["train_time_mape_pct"] > max(100.0, before["train_time_mape_pct"])


def test_held_out_workloads_are_flagged_and_widened_as_recommend_would(tiny_kb, monkeypatch):
    """A held-out workload unlike the others is flagged out of distribution, and its intervals
    are widened before they are scored or picked from, as recommend's are."""
    from dltune.surrogate import PerformanceModel

    # The tiny knowledge base's 3, 5 and 10 classes: a held-out end lies outside the others'
    # range; this test is about the distance to the nearest workload only.
    monkeypatch.setattr(PerformanceModel, "outside_reasons", lambda self, meta: [])
    records = RecordStore(tiny_kb).records()
    plain = validate_kb(records, calibrate=False)
    assert all(r["nearest_distance"] > 0 for r in plain.workloads)
    flagged = sum(r["out_of_distribution"] for r in plain.workloads)
    assert plain.overall["out_of_distribution"] == flagged < 3
    # Say a workload that was not flagged lies far beyond the threshold from the others.
    first = next(r["label"] for r in plain.workloads if not r["out_of_distribution"])
    n_train = next(r.workload["meta"]["n_train"] for r in records if workload_label(r.to_dict()) == first)
    real = PerformanceModel.nearest_workloads

    def nearest(self, meta, k=3):
        out = real(self, meta, k)
        return [(name, 10 * self.ood_threshold_) for name, _ in out] if meta["n_train"] == n_train else out

    monkeypatch.setattr(PerformanceModel, "nearest_workloads", nearest)
    widened = []
    real_widen = PerformanceModel.widen

    def widen(self, pred, meta, hardware, policy, consensus=None):
        out, notes = real_widen(self, pred, meta, hardware, policy, consensus)
        if meta["n_train"] == n_train:
            widened.append((pred, out, notes))
        return out, notes

    monkeypatch.setattr(PerformanceModel, "widen", widen)
    report = validate_kb(records, calibrate=False)
    rows = {r["label"]: r for r in report.workloads}
    assert rows[first]["out_of_distribution"] is True
    assert sum(r["out_of_distribution"] for r in report.workloads) == report.overall["out_of_distribution"] == flagged + 1
    # Its intervals were widened 11x before they were scored (the training times' in log space:
    # a tiny knowledge base's runs of a few milliseconds may still stray beyond that).
    # The accuracy intervals also reach the consensus band of the others, whose picks it ranks by.
    assert widened and all(notes[0] == "intervals 11.0x wider: the workload is unlike every measured one of its model"
                           for _, _, notes in widened)
    # The scored intervals (the first call; the times of runs stopped early are asked again).
    assert widened[0][2][1:] == ["accuracy intervals reach the configuration's interval averaged over the "
                                 "measured workloads of its model"]
    for learnt, out, _ in widened:
        log_width = np.log(learnt["train_time_s_high"] / learnt["train_time_s"])
        assert np.log(out["train_time_s_high"] / out["train_time_s"]) == pytest.approx(11 * log_width)
    before = {r["label"]: r for r in plain.workloads}[first]
    assert rows[first]["accuracy_coverage_pct"] >= before["accuracy_coverage_pct"]
    assert rows[first]["train_time_coverage_pct"] >= before["train_time_coverage_pct"]
    # Its pick ranks 1/11 its own low ends, the rest the consensus of the others; the others'
    # picks rank their own alone.
    assert rows[first]["ranked_own_share"] == pytest.approx(1 / 11)
    assert all(r["ranked_own_share"] == 1.0 for r in plain.workloads if not r["out_of_distribution"])
    table = report.table()
    there = np.mean([r["regret_points"] for r in report.workloads if r["out_of_distribution"]])
    assert f"held out, {flagged + 1} of 3 workloads were flagged out of distribution" in table
    assert f"{there:.2f} points on average there" in table


def test_validation_needs_two_workloads(tiny_kb):
    records = RecordStore(tiny_kb).records()
    one = [r for r in records if r.workload["fingerprint"] == records[0].workload["fingerprint"]]
    with pytest.raises(ParameterError, match="must cover at least 2 workloads. Got 1 instead."):
        validate_kb(one)



def test_calibration_files_are_read_before_any_fit(tiny_kb, tmp_path, monkeypatch, cli):
    """A missing --calibrations file was read only after the 50 held-out fits (minutes)."""
    from dltune.surrogate import PerformanceModel

    def no_fit(*args, **kwargs):
        raise AssertionError("a held-out fit ran before the calibration files were read")

    monkeypatch.setattr(PerformanceModel, "fit", no_fit)
    records = RecordStore(tiny_kb).records()
    missing = str(tmp_path / "missing.jsonl")
    with pytest.raises(ParameterError, match=f"The 'calibrations' file {missing!r} does not exist."):
        validate_kb(records, calibrations=[missing])
    ints = tmp_path / "ints.json"
    ints.write_text("[1, 2]")
    with pytest.raises(ParameterError, match="must hold measurement records"):
        validate_kb(records, calibrations=[str(ints)])
    done = cli("kb", "validate", "--calibrations", missing, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"dltune kb validate: error: The 'calibrations' file {missing!r} does not exist."]

@pytest.fixture(scope="module")
def validated(tiny_kb, cli):
    """``dltune kb validate --records TINY --json``, run once (a new process fitting once per
    held-out workload) for the tests that read what it printed."""
    return cli("kb", "validate", "--records", str(tiny_kb / "records.jsonl"), "--json")


def test_cli_validate_json(validated):
    done = validated
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= {"workloads", "overall", "bars", "n_records", "calibrations"}
    assert len(data["workloads"]) == 3
    assert data["calibrations"] == []  # other records than the shipped ones: no calibrations
    # Progress on stderr, one step per held-out workload; stdout is the JSON alone.
    assert "validate: 3/3 workloads" in done.stderr


def test_cli_validate_objective(tiny_kb, cli, validated):
    records = str(tiny_kb / "records.jsonl")
    by_time = json.loads(cli("kb", "validate", "--records", records, "--objective", "time",
                             "--json").stdout)
    by_acc = json.loads(validated.stdout)  # the default objective
    # The report says which objective its picks were made for: the flag reached validate_kb.
    assert by_time["objective"] == "time" and by_acc["objective"] == "accuracy"
    # Same folds: everything but the picks agrees.
    for a, b in zip(by_time["workloads"], by_acc["workloads"], strict=True):
        assert a["accuracy_spearman"] == b["accuracy_spearman"]
        assert a["train_time_mape_pct"] == b["train_time_mape_pct"]
    bad = cli("kb", "validate", "--records", records, "--objective", "fast")
    assert bad.returncode != 0 and "invalid choice: 'fast'" in bad.stderr


def test_a_calibration_is_scored_on_the_workloads_it_did_not_run(tiny_kb, tmp_path, cli):
    # Another machine, 3x slower, calibrated on the tiny knowledge base's three workloads: each
    # held-out workload's runs are predicted 3x too fast from the knowledge base alone, and
    # about right from the machine's runs of the other two.
    from dltune.kb import validate_calibrations

    other = {"cpu_model": "Other CPU", "logical_cores": 2, "usable_cores": 2, "memory_gb": 16.0,
             "cpu_flags": ["avx2"], "gpus": [], "target": "other-cpu-2of2c"}
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    runs = [dict(d, id=f"cal-{i}", kb={"suite": "calibration", "shipped": True},
                 hardware={**d["hardware"], **other, "usable_cores": d["hardware"]["usable_cores"]},
                 metrics=dict(d["metrics"], train_time_s=3.0 * d["metrics"]["train_time_s"]))
            for i, d in enumerate(records)]
    rows = validate_calibrations(records, runs, calibrate=False)
    assert len(rows) == 3 and all(r["machine"] == "Other CPU [avx2], 2 cores" for r in rows)
    assert sorted(r["n"] for r in rows) == sorted(
        sum(1 for d in records if d["workload"]["fingerprint"] == f) for f in
        {d["workload"]["fingerprint"] for d in records})
    # The same runs at the knowledge base's speed: uncalibrated, exactly a third of the ratio
    # (the same predictions); calibrated, the same ratio (a 3x factor on 3x the runs): the
    # calibration takes out the 3x whole, whatever the freshly measured runs' scatter (which
    # both share, and which decides how close to 1 either comes).
    as_fast = validate_calibrations(records, [dict(d, metrics=dict(d["metrics"], train_time_s=d["metrics"]["train_time_s"] / 3.0))
                                              for d in runs], calibrate=False)
    for r, f in zip(rows, as_fast, strict=True):
        assert r["workload"] == f["workload"]
        assert r["uncalibrated_median_ratio"] == pytest.approx(3.0 * f["uncalibrated_median_ratio"], rel=1e-9)
        assert r["calibrated_median_ratio"] == pytest.approx(f["calibrated_median_ratio"], rel=1e-6)
    for r in rows:
        assert r["uncalibrated_mape_pct"] > 40  # 3x slower: predicted a third of the time
        # Uncalibrated, the CPU was never measured: its interval is widened 3x, and mostly holds.
        assert r["uncalibrated_coverage_pct"] > 60
    # One workload only: nothing to hold out.
    one = [d for d in runs if d["workload"]["fingerprint"] == runs[0]["workload"]["fingerprint"]]
    assert validate_calibrations(records, one, calibrate=False) == []
    # The CLI scores them with --calibrations.
    path = tmp_path / "calibration.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in runs))
    done = cli("kb", "validate", "--records", str(tiny_kb / "records.jsonl"), "--calibrations", str(path))
    assert done.returncode == 0, done.stderr
    assert "Calibrations, leave one calibration workload out" in done.stdout
    assert done.stdout.count("Other CPU [avx2], 2 cores") == 3


def test_cli_build_plan_json(cli):
    done = cli("kb", "build", "--suite", "tiny", "--frameworks", "numpy", "--plan", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {r["framework"] for r in rows} == {"numpy"} and len(rows) == len({r["key"] for r in rows})


def test_cli_bad_suite_is_one_line_exit_2(cli):
    done = cli("kb", "build", "--suite", "huge", "--plan")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "dltune kb build: error: The 'suite' parameter must be one of {'calibration', 'families', 'many-cores', 'quick', 'reference', 'tiny'}. Got 'huge' instead."
    ]
    for command in ("build", "calibrate"):  # --plan checks the budget too
        done = cli("kb", command, "--frameworks", "numpy", "--time-budget", "-1", "--plan")
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [
            f"dltune kb {command}: error: argument --time-budget: The 'time_budget' parameter must be a "
            f"positive duration such as 90, 90s, 20m or 1.5h. Got '-1' instead. (see 'dltune kb {command} --help')"]


def _run(lr, seed, seconds, accuracy):
    return {"config": {"framework": "numpy", "learning_rate": lr, "seed": seed},
            "metrics": {"train_time_s": seconds, "test_accuracy": accuracy}}


def test_scores_per_model_family_are_over_its_workloads_runs():
    from dltune.kb._validate_report import by_family

    def row(family, n, mape, regret, ood=False):
        return {"model_family": family, "n": n, "memory_runs": 0, "train_time_mape_pct": mape,
                "accuracy_spearman": 0.5, "regret_points": regret, "picked_time_ratio": 1.0,
                "out_of_distribution": ood}

    families = by_family([row("rnn", 10, 30.0, 1.0, True), row("mlp", 5, 10.0, 0.0), row("rnn", 30, 10.0, 3.0)])
    assert list(families) == ["mlp", "rnn"]
    rnn = families["rnn"]
    assert (rnn["workloads"], rnn["n"], rnn["out_of_distribution"]) == (2, 40, 1)
    assert rnn["train_time_mape_pct"] == pytest.approx(15.0)  # over its 40 runs, as the overall MAPE
    assert (rnn["regret_points"], rnn["regret_points_max"]) == (2.0, 3.0)
    assert rnn["memory_coverage_pct"] is None and families["mlp"]["regret_points"] == 0.0


def test_a_knowledge_base_of_several_modalities_is_scored_per_modality(plain_report):
    import dataclasses

    rows = [dict(r, modality="tabular" if i == 0 else r["modality"]) for i, r in enumerate(plain_report.workloads)]
    report = dataclasses.replace(plain_report, workloads=rows)
    modalities = report.to_dict()["modalities"]
    assert list(modalities) == ["image", "tabular"]
    assert (modalities["tabular"]["workloads"], modalities["tabular"]["n"]) == (1, rows[0]["n"])
    assert modalities["image"]["workloads"] == len(rows) - 1
    table = report.table().split("Per data modality of the held-out workloads\n")[1]
    assert [line.split()[0] for line in table.splitlines()[2:4]] == ["image", "tabular"]


def test_noise_floor_from_repeats():
    from dltune.kb._validate_noise import noise_scores as _noise
    from dltune.kb._validate_noise import repeat_pairs as _repeat_pairs

    runs = [_run(0.1, 0, 1.0, 0.90), _run(0.1, 1, 3.0, 0.92),
            _run(0.2, 0, 2.0, 0.80), _run(0.2, 1, 2.0, 0.78),
            _run(0.3, 0, 4.0, 0.50), _run(0.3, 1, 4.0, 0.54),
            _run(0.4, 0, 1.0, 0.70)]
    assert len(_repeat_pairs(runs)) == 3
    spread = _noise(runs, np.linspace(0.1, 0.9, 40))
    assert spread["repeats"] == 3
    # Pair (1 s, 3 s): each is (1/1 + 1/3) / 2 off the mean; the other pairs agree.
    assert spread["repeat_time_ape_pct"] == pytest.approx(100 * (1 + 1 / 3) / 2 / 3)
    assert spread["accuracy_noise_points"] == pytest.approx(100 * 0.02 / 0.6745 / np.sqrt(2))
    assert spread["accuracy_spearman_ceiling"] > 0.95  # 2-point noise hardly reorders a wide spread
    flat = _noise(runs, np.full(40, 0.9) + np.linspace(0, 0.01, 40))
    assert flat["accuracy_spearman_ceiling"] < 0.5  # but does reorder configurations 0.03 points apart
    assert _noise(runs[-1:], np.ones(3))["accuracy_spearman_ceiling"] is None


def test_regret_floor_is_what_seed_noise_alone_costs_a_perfect_predictor():
    from dltune.kb._validate_noise import noise_scores as _noise
    from dltune.kb._validate_noise import regret_floor as _regret_floor

    clear = np.r_[0.95, np.linspace(0.5, 0.7, 39)]
    crowded = np.r_[0.95, np.full(39, 0.94)]
    assert _regret_floor(clear, 0.0) == 0.0
    # A winner 25 points ahead of the rest stays ahead of 1-point noise.
    assert _regret_floor(clear, 0.01) == pytest.approx(0.0, abs=0.05)
    # 39 runs a point behind: the best of 40 noisy runs beats the expected best by about
    # sigma * E[max of 40 normals] (2.25 sigma) less the one point, here 1.25 points.
    assert 0.8 < _regret_floor(crowded, 0.01) < 1.7
    assert _regret_floor(crowded, 0.01) > _regret_floor(crowded, 0.005)
    runs = [_run(0.1, 0, 1.0, 0.90), _run(0.1, 1, 1.0, 0.92), _run(0.2, 0, 1.0, 0.80),
            _run(0.2, 1, 1.0, 0.78)]
    assert _noise(runs, crowded)["regret_floor_points"] == pytest.approx(
        _regret_floor(crowded, 0.02 / 0.6745 / np.sqrt(2)))
    assert _noise(runs[:1], crowded)["regret_floor_points"] is None


def test_the_ceiling_counts_the_ties_a_predictor_of_expected_accuracy_cannot_make():
    """Repeats that agree leave no noise, yet 36 runs at exactly 100 % tie where expected
    accuracies differ: no predictor without ties orders them better than the ceiling says."""
    from dltune.kb._validate_noise import noise_scores as _noise
    from dltune.kb._validate_noise import spearman as _spearman

    agree = [_run(lr, seed, 1.0, 1.0) for lr in (0.1, 0.2) for seed in (0, 1)]
    accuracy = np.r_[np.linspace(0.5, 0.9, 4), np.ones(36)]
    tied = _noise(agree, accuracy)
    assert tied["accuracy_noise_points"] == 0 and tied["accuracy_tied_top_pct"] == 90
    # Any strict order that puts the 4 below the 36 scores the same, and that is the most.
    best_strict = _spearman(np.arange(40.0), accuracy)
    assert tied["accuracy_spearman_ceiling"] == pytest.approx(best_strict) and best_strict < 0.6
    assert _noise(agree, np.linspace(0.5, 1.0, 40))["accuracy_spearman_ceiling"] == pytest.approx(1.0)


def test_cli_calibrate_plan_repeats_the_reference_suites_first_configurations(cli):
    done = cli("kb", "calibrate", "--full", "--frameworks", "numpy", "--plan", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    from dltune.kb import plan_suite

    reference = {p.key for p in plan_suite("reference", ["numpy"], configs_per_pair=4, repeats=0, fresh=0)}
    # 3 workloads x (4 space-filling + the preset), each one the knowledge base measured too.
    assert len(rows) == 15 and {r["key"] for r in rows} <= reference
    assert {r["workload"] for r in rows} == {"digits-mlp", "digits-lenet",
                                             "synthetic[channels=3,classes=10,difficulty=0.4,height=32,"
                                             "n_test=200,n_train=800,width=32]-cifar_quick"}


def test_own_runs_are_drawn_per_configuration_and_left_out_of_the_scores(tiny_kb):
    """``own_runs``: k configurations of the held-out workload drawn at random, one run of each
    fitted on; every run of those configurations (at any thread count, as recommend's measured
    candidates count them) left out of the scores."""
    from dltune.kb._validate import _own_runs
    from dltune.kb._validate_noise import by_config as _by_config
    from dltune.surrogate._seed_noise import measured_key

    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    label = workload_label(records[0])
    held = [d for d in records if workload_label(d) == label]
    given, scored = _own_runs(held, 3, 0, label)
    keys = {measured_key(d["config"]) for d in given}
    assert len(given) == len(keys) == 3 and all(any(d is h for h in held) for d in given)
    # Scored: exactly the runs of the configurations not drawn.
    assert scored.tolist() == [measured_key(d["config"]) not in keys for d in held]
    # One run per configuration, its first on record.
    groups = _by_config(held, measured_key)
    assert all(held[groups[measured_key(d["config"])][0]] is d for d in given)
    # The draw depends on the seed and the workload alone.
    again, _ = _own_runs(list(held), 3, 0, label)
    assert [measured_key(d["config"]) for d in again] == [measured_key(d["config"]) for d in given]
    draws = {tuple(sorted(measured_key(d["config"]) for d in _own_runs(held, 3, s, label)[0])) for s in range(6)}
    assert len(draws) > 1
    assert _own_runs(held, 0, 0, label)[0] == [] and _own_runs(held, 0, 0, label)[1].all()
    # Each run again at another thread count: left out with its configuration, not scored on
    # what the drawn run measured.
    twins = [dict(d, id=f"twin-{i}", config=dict(d["config"], threads={
        "intra_op": 3, "inter_op": 1, "blas": 3, "cores": None})) for i, d in enumerate(held)]
    both = held + twins
    given, scored = _own_runs(both, 3, 0, label)
    keys = {measured_key(d["config"]) for d in given}
    assert len(keys) == 3 and (~scored).sum() == 2 * sum(measured_key(d["config"]) in keys for d in held)
    assert scored.tolist() == [measured_key(d["config"]) not in keys for d in both]


def test_validation_with_own_runs_fits_on_them(tiny_kb, monkeypatch):
    from dltune.surrogate import PerformanceModel
    from dltune.surrogate._seed_noise import measured_key

    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    fitted: list[list[dict]] = []
    fit = PerformanceModel.fit

    def spy(self, train, *args, **kwargs):
        fitted.append(list(train))
        return fit(self, train, *args, **kwargs)

    monkeypatch.setattr(PerformanceModel, "fit", spy)
    report = validate_kb(records, calibrate=False, own_runs=2, seed=1)
    assert report.own_runs == 2 and report.to_dict()["own_runs"] == 2
    assert len(report.workloads) == len(fitted) == 3
    for row, train in zip(report.workloads, fitted, strict=True):
        held = [d for d in records if workload_label(d) == row["label"]]
        own = [d for d in train if workload_label(d) == row["label"]]
        # The fit saw 2 runs of the held-out workload, of 2 configurations, and every run of
        # the other workloads; the scores count the runs of its other configurations.
        assert row["own_runs"] == 2 and len({measured_key(d["config"]) for d in own}) == len(own) == 2
        assert len(train) == len(records) - len(held) + 2
        keys = {measured_key(d["config"]) for d in own}
        assert row["n"] == sum(measured_key(d["config"]) not in keys for d in held)
        # The pick is made among all of its configurations: the regret counts them all.
        best = max(d["metrics"]["test_accuracy"] for d in held)
        assert row["best_measured_accuracy"] == best
        assert row["regret_points"] == pytest.approx(100 * (best - row["picked_accuracy"]))
        assert isinstance(row["picked_own_run"], bool)
    text = report.table()
    assert "2 runs of each held-out workload (configurations drawn with seed 1) fitted on" in text
    picks = sum(r["picked_own_run"] for r in report.workloads)
    assert f"the pick was one of those 2 on {picks} of 3 workloads" in text


def test_own_runs_checked(tiny_kb, cli):
    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    with pytest.raises(ParameterError, match="The 'own_runs' parameter must be an int in"):
        validate_kb(records, own_runs=-1)
    with pytest.raises(ParameterError, match=r"No workload has 1003 configurations or more to hold "
                                             r"out with 'own_runs' 1000 \(the most any has: \d+\)"):
        validate_kb(records, own_runs=1000)
    done = cli("kb", "validate", "--records", str(tiny_kb / "records.jsonl"), "--own-runs", "1000")
    assert done.returncode != 0 and "'own_runs' 1000" in done.stderr and "Traceback" not in done.stderr


def test_own_runs_are_scored_as_recommend_scores_measured_candidates(tiny_kb):
    """The held-out workload's runs at a configuration of its own runs take what those measured
    (recommend's measured candidates), the others what the surrogates predict."""
    from dltune.kb._validate import _measured, _own_runs
    from dltune.surrogate import PerformanceModel
    from dltune.surrogate._seed_noise import measured_key

    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    label = workload_label(records[0])
    held = [d for d in records if workload_label(d) == label]
    others = [d for d in records if workload_label(d) != label]
    assert _measured(PerformanceModel(max_iter=20).fit(others), held) is None
    given, scored = _own_runs(held, 2, 0, label)
    model = PerformanceModel(max_iter=20).fit(others + given)
    measured = _measured(model, held)
    assert measured.index.tolist() == np.flatnonzero(~scored).tolist() and measured.configs == 2
    accuracy = {measured_key(d["config"]): d["metrics"]["test_accuracy"] for d in given}
    assert measured.accuracy.tolist() == [accuracy[measured_key(held[i]["config"])] for i in measured.index]
    assert measured.runs.tolist() == [1] * len(measured.index)


def test_presets_are_a_baseline_scored_like_the_pick():
    """Each framework's default preset, as measured on the held-out workload: the best run's
    accuracy less the mean of the preset's runs, and their mean time over the best run's."""
    from dltune.kb._validate import _overall_presets, _presets

    runs = [_run(0.1, 0, 2.0, 0.95), _run(0.2, 0, 1.0, 0.90), _run(0.05, 0, 8.0, 0.94),
            _run(0.05, 1, 12.0, 0.92), _run(0.01, 0, 4.0, 0.70)]
    for r, name, framework in zip(runs, (None, None, "torch", "torch", "caffe"),
                                  ("torch", "mxnet", "torch", "torch", "mxnet"), strict=True):
        r["config"].update(preset_name=name, framework=framework)
    accuracy = np.array([r["metrics"]["test_accuracy"] for r in runs])
    seconds = np.array([r["metrics"]["train_time_s"] for r in runs])
    presets = _presets(runs, accuracy, seconds, best=0)
    # Keyed by the framework that ran it (MXNet runs Caffe's); the other runs are not presets.
    assert presets == {
        "mxnet": {"regret_points": pytest.approx(25.0), "time_ratio": pytest.approx(2.0), "runs": 1,
                  "preset": "caffe"},
        "torch": {"regret_points": pytest.approx(2.0), "time_ratio": pytest.approx(5.0), "runs": 2,
                  "preset": "torch"},
    }
    rows = [{"presets": presets, "regret_points": 1.0, "picked_time_ratio": 1.0},
            {"presets": {"torch": {"regret_points": 0.5, "time_ratio": 3.0, "runs": 1}},
             "regret_points": 3.0, "picked_time_ratio": 2.0}]
    overall = _overall_presets(rows)
    # Each compared with the pick on the workloads that measured it.
    assert overall["mxnet"] == {"workloads": 1, "regret_points": pytest.approx(25.0), "within_bar": 0,
                                "time_ratio": pytest.approx(2.0), "picked_regret_points": 1.0,
                                "picked_within_bar": 1, "picked_time_ratio": 1.0}
    assert overall["torch"]["workloads"] == 2 and overall["torch"]["within_bar"] == 2
    assert overall["torch"]["regret_points"] == pytest.approx(1.25)
    assert overall["torch"]["time_ratio"] == pytest.approx(4.0)
    assert overall["torch"]["picked_regret_points"] == pytest.approx(2.0)
    assert overall["torch"]["picked_within_bar"] == 1
    assert _presets(runs[:2], accuracy[:2], seconds[:2], best=0) == {}


@pytest.mark.parametrize("objective", ["accuracy", "balanced"])
def test_the_pick_gets_the_point_that_breaks_accuracy_ties(tiny_kb, monkeypatch, objective):
    """As recommend picks: ranked by the low end, the accuracy objective's ties broken by the
    predicted point (passed for every objective; only accuracy uses it)."""
    from dltune.recommend import RecommendPolicy
    from dltune.recommend._pipeline import ScoredCandidates

    calls = []
    real = ScoredCandidates.pick

    def spy(self, objective, among=None):
        chosen = real(self, objective, among)
        calls.append((objective, self, chosen))
        return chosen

    monkeypatch.setattr(ScoredCandidates, "pick", spy)  # the pipeline's, recommend's too
    report = validate_kb(RecordStore(tiny_kb).records(), objective=objective, calibrate=False)
    assert len(calls) == len(report.workloads)
    for name, scored, chosen in calls:
        assert name == objective and scored.policy == RecommendPolicy()
        low, time, point = scored.ranked_by, scored.predicted["train_time_s"], scored.predicted["accuracy"]
        assert point.shape == low.shape
        # The point itself, not the ranking's low end (which, for a workload unlike the others,
        # is mixed with the consensus and may lie above the workload's own point).
        assert np.all((point >= 0) & (point <= 1))
        if objective == "accuracy":
            tied = np.flatnonzero(low >= low.max() - scored.policy.accuracy_tie)
            top = tied[point[tied] == point[tied].max()]
            assert chosen in top and time[chosen] == time[top].min()  # equal points: the faster


def test_calibrations_are_scored_as_recommend_scores_them(tiny_kb, monkeypatch):
    """validate_calibrations' time scores pass through recommend's pipeline, hedges included:
    a hedge that makes every time 10x longer divides each measured over predicted ratio by 10."""
    from dltune.kb import validate_calibrations
    from dltune.surrogate import PerformanceModel

    records = [r.to_dict() for r in RecordStore(tiny_kb).records() if r.ok]
    runs = [dict(d, id=f"cal-{i}", hardware={**d["hardware"], "cpu_model": "Other CPU"})
            for i, d in enumerate(records)]
    plain = validate_calibrations(records, runs, calibrate=False)

    def hedge(self, pred, rows, hardware):
        return {k: 10.0 * v if k.startswith("train_time_s") else v for k, v in pred.items()}, []

    monkeypatch.setattr(PerformanceModel, "hedge_machines", hedge)
    hedged = validate_calibrations(records, runs, calibrate=False)
    assert len(hedged) == len(plain) == 3
    for before, after in zip(plain, hedged, strict=True):
        for kind in ("uncalibrated", "calibrated"):
            assert after[f"{kind}_median_ratio"] == pytest.approx(before[f"{kind}_median_ratio"] / 10, rel=1e-6)
