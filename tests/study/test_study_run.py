"""A real, tiny study end to end (numpy backend, mlp, a digits subset, 1 epoch): stored, resumed,
reported."""

from __future__ import annotations

import json
import re

import pytest

from dltune.study import PHASES, StudyStore, run_study

pytestmark = pytest.mark.slow

DATA = {"n_train": 200, "n_test": 60}


@pytest.fixture(scope="module")
def storage(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('study') / 'study.db'}"


@pytest.fixture(scope="module")
def first(storage):
    return run_study("digits", model="mlp", frameworks="numpy", budget_minutes=10, storage=storage,
                     epoch_cap=1, tune_trials=2, dataset_params=DATA, progress=False)


def test_every_phase_is_measured_and_stored(first, storage):
    assert first.skipped == [] and first.failed == 0
    assert first.ran == len(first.plan.runs)
    phases = {p for r in first.records for p in r.phases}
    assert phases == set(PHASES)
    assert sum("tune" in r.phases for r in first.records) == 2
    assert all(r.measurement.ok for r in first.records)
    assert all(r.measurement.config["epochs"] == 1 for r in first.records if "tune" not in r.phases)
    store = StudyStore(storage, "digits-mlp")
    trials = store.study.get_trials()
    assert len(trials) == len(first.plan.runs)
    for trial in trials:
        record = trial.user_attrs["record"]
        assert trial.values == [record["metrics"]["test_accuracy"], record["metrics"]["train_time_s"]]
        assert trial.params["batch_size"] == record["config"]["batch_size"]
        assert trial.user_attrs["phase"] == trial.user_attrs["phases"][0]
    # the cross-defaults runs of one framework differ only by preset
    cross = [r for r in first.records if "cross_defaults" in r.phases]
    assert sorted(r.measurement.config["preset_name"] for r in cross) == sorted(
        ["caffe", "mxnet", "tensorflow", "theano", "torch"])


def test_a_second_call_resumes_without_measuring_again(first, storage):
    again = run_study("digits", model="mlp", frameworks="numpy", budget_minutes=10, storage=storage,
                      epoch_cap=1, tune_trials=2, dataset_params=DATA, progress=False)
    assert again.ran == 0
    assert again.resumed == len(first.plan.runs)
    assert len(again.records) == len(first.records)


def test_cli_writes_records_and_a_report_from_the_real_study(first, storage, tmp_path, cli):
    out = tmp_path / "out"
    proc = cli("study", "--workload", "digits", "--model", "mlp", "--frameworks", "numpy",
               "--data", "n_train=200", "--data", "n_test=60", "--budget-minutes", "10",
               "--max-epochs", "1", "--no-tune", "--quiet", "--storage", storage, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "0 runs measured" in proc.stdout
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(first.records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed"] == len(first.plan.runs)
    html = (out / "report.html").read_text()
    assert "Framework comparison" in html and "data:image/png;base64," in html

    md = tmp_path / "md" / "report.md"
    proc = cli("report", "--records", str(out / "records.jsonl"), "--format", "md", "--out", str(md))
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (md.parent / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    default = next(r for r in first.records if "defaults" in r.phases).measurement
    row = next(line for line in text.splitlines() if line.startswith("| numpy | torch |"))
    assert f"{100 * default.metrics['test_accuracy']:.1f}" in row


def test_cli_errors_are_one_line(cli, tmp_path):
    proc = cli("study", "--workload", "digits", "--frameworks", "caffe", "--budget-minutes", "1")
    assert proc.returncode == 2
    assert "'frameworks' parameter must be 'all' or a subset" in proc.stderr
    proc = cli("report", "--storage", f"sqlite:///{tmp_path / 'none.db'}")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
