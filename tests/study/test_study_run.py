"""A real, tiny study end to end (numpy backend, mlp, a digits subset, 1 epoch): stored, resumed,
reported."""

from __future__ import annotations

import json
import re

import pytest

from dltune._errors import ParameterError
from dltune.measure._codec import decode_record
from dltune.study import PHASES, StudyStore, run_study
from dltune.tuning import tune

pytestmark = pytest.mark.slow

DATA = {"n_train": 200, "n_test": 60}


@pytest.fixture(scope="module")
def storage(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('study') / 'study.db'}"


@pytest.fixture(scope="module")
def first(storage):
    return run_study("digits", model="mlp", frameworks="numpy", time_budget_s=600, storage=storage,
                     epoch_cap=1, tune=tune, trials=2, dataset_params=DATA, progress=False)


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
        record = decode_record(trial.user_attrs)
        assert trial.values == [record.metrics["test_accuracy"], record.metrics["train_time_s"]]
        assert trial.params["batch_size"] == record.config["batch_size"]
        assert trial.user_attrs["phase"] == trial.user_attrs["phases"][0]
    # the cross-defaults runs of one framework differ only by preset
    cross = [r for r in first.records if "cross_defaults" in r.phases]
    assert sorted(r.measurement.config["preset_name"] for r in cross) == sorted(
        ["caffe", "mxnet", "tensorflow", "theano", "torch"])


def test_a_second_call_resumes_without_measuring_again(first, storage):
    again = run_study("digits", model="mlp", frameworks="numpy", time_budget_s=600, storage=storage,
                      epoch_cap=1, tune=tune, trials=2, dataset_params=DATA, progress=False)
    assert again.ran == 0
    assert again.resumed == len(first.plan.runs)
    assert len(again.records) == len(first.records)


def test_a_resumed_study_sizes_its_runs_by_the_stored_ones(first, storage, monkeypatch):
    """The cost model learns each stored run's wall time (it read a user attribute that the
    records' codec no longer writes, and so learnt nothing)."""
    from dltune.study._cost import CostModel

    walls = []
    observe = CostModel.observe

    def seen(self, config, wall, *args, **kwargs):
        walls.append(wall)
        return observe(self, config, wall, *args, **kwargs)

    monkeypatch.setattr(CostModel, "observe", seen)
    run_study("digits", model="mlp", frameworks="numpy", time_budget_s=600, storage=storage,
              epoch_cap=1, tune=tune, trials=2, dataset_params=DATA, progress=False)
    assert len(walls) == len(first.plan.runs) and all(w > 0 for w in walls)


def test_cli_writes_records_and_a_report_from_the_real_study(first, storage, tmp_path, cli):
    out = tmp_path / "out"
    proc = cli("study", "--workload", "digits", "--model", "mlp", "--frameworks", "numpy",
               "--data", "n_train=200", "--data", "n_test=60", "--time-budget", "10m",
               "--max-epochs", "1", "--no-tune", "--quiet", "--storage", storage, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "0 runs measured" in proc.stdout and f"report in {out / 'report.html'}" in proc.stdout
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
    # numpy has no published preset: its own defaults are Caffe's (config.default_preset)
    row = next(line for line in text.splitlines() if line.startswith("| numpy | caffe |"))
    assert f"{100 * default.metrics['test_accuracy']:.1f}" in row


def test_cli_errors_are_one_line(cli, tmp_path):
    proc = cli("study", "--workload", "digits", "--frameworks", "caffe", "--time-budget", "1m")
    assert proc.returncode == 2
    assert "'frameworks' parameter must be 'all' or a subset" in proc.stderr
    proc = cli("report", "--storage", f"sqlite:///{tmp_path / 'none.db'}")
    assert proc.returncode == 2 and "does not exist" in proc.stderr


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"frameworks": "nope"}, "'frameworks'"),
    ({"frameworks": ""}, "'frameworks'"),
    ({"workload": "nope"}, "'workload'"),
    ({"model": "nope"}, "'model'"),
    ({"dataset_params": {"n_train": "abc"}}, "'n_train'"),
    ({"storage": "sqlite:///{tmp}/text.db"}, "'storage'"),
    ({"storage": "foo"}, "'storage'"),
    ({"out": "{tmp}/text.db"}, "'out'"),
    ({"tune": True}, "'tune' parameter must be a tune function"),
])
def test_nothing_is_written_before_every_argument_is_checked(tmp_path, kwargs, says):
    """The --out folder was made, and the storage opened, before the frameworks, the workload
    or the storage were refused."""
    (tmp_path / "text.db").write_text("not a database\n")
    args = {"workload": "digits", "model": "mlp", "frameworks": "numpy", "time_budget_s": 6,
            "storage": "sqlite:///{tmp}/s.db", "out": "{tmp}/out", "tune": False, "progress": False,
            **kwargs}
    args = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in args.items()}
    with pytest.raises(ParameterError, match=says):
        run_study(**args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.db"]
