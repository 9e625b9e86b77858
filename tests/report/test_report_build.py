"""The report built from constructed records: tables, figures, and findings that match the data."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest

from dltune._errors import ParameterError
from dltune.config import default_preset
from dltune.report import load_study_records, published_figures, render_html
from dltune.report._model import fmt_mb, fmt_pct, fmt_s

EXPECTED_TABLES = {"comparison", "cross_defaults", "sweep_batch_size", "sweep_learning_rate",
                   "sweep_epochs", "threads", "correlation", "pareto", "tuning", "failed"}
EXPECTED_FIGURES = {"train_time", "test_time", "accuracy", "cross_defaults", "sweep_batch_size",
                    "sweep_learning_rate", "sweep_epochs", "threads", "resources_batch_size",
                    "pareto", "tuning"}


def _defaults(records):
    return {r.measurement.framework: r.measurement for r in records if "defaults" in r.phases}


def _fmt(key: str, value: float) -> str:
    if key == "rho":
        return f"{value:+.2f}"
    if key.endswith("_mb"):
        return fmt_mb(value)
    if key.endswith("_s"):
        return fmt_s(value)
    return fmt_pct(value)


def test_every_table_and_figure_is_produced(report):
    assert set(report.tables) == EXPECTED_TABLES
    assert set(report.figures) == EXPECTED_FIGURES
    for fig in report.figures.values():
        assert fig.png[:8] == b"\x89PNG\r\n\x1a\n" and len(fig.png) > 5000


def test_comparison_table_puts_measured_next_to_published(records, report):
    table = report.tables["comparison"]
    rows = {row[0]: dict(zip(table.columns, row, strict=True)) for row in table.rows}
    published = published_figures("mnist")
    assert set(rows) == {"torch", "tensorflow", "mxnet", "theano", "caffe"}
    for fw, m in _defaults(records).items():
        row = rows[fw]
        assert row["preset"] == default_preset(fw)
        assert row["train s"] == fmt_s(m.metrics["train_time_s"])
        assert row["accuracy %"] == fmt_pct(100 * m.metrics["test_accuracy"])
        assert row["peak MB"] == fmt_mb(m.metrics["peak_rss_mb"])
        if fw in published:
            assert row["published CPU train s"] == fmt_s(published[fw]["train_time_cpu_s"])
            assert row["published CPU acc %"] == fmt_pct(published[fw]["accuracy_cpu_pct"])
    assert rows["caffe"]["train s"] == "–" and rows["caffe"]["published CPU train s"] == "512"
    assert rows["theano"]["epochs"] == "5 (of 200)"
    notes = [i for s in report.sections for i in s.items if isinstance(i, str)]
    assert "Epochs capped at 5: the own presets ask for more (mxnet 11, tensorflow 18, theano 200, " \
        "torch 20)." in notes


def test_findings_match_the_records(records, report):
    findings = {f.topic: f for f in report.findings}
    d = _defaults(records)
    times = {fw: m.metrics["train_time_s"] for fw, m in d.items()}
    accs = {fw: 100 * m.metrics["test_accuracy"] for fw, m in d.items()}
    fastest = findings["fastest"]
    assert fastest.values["fastest_train_s"] == min(times.values())
    assert fastest.values["slowest_train_s"] == max(times.values())
    assert min(times, key=times.get) in fastest.text
    assert findings["most_accurate"].values["best_accuracy_pct"] == pytest.approx(max(accs.values()))
    assert max(accs, key=accs.get) in findings["most_accurate"].text
    mems = {fw: m.metrics["peak_rss_mb"] for fw, m in d.items()}
    assert findings["frugal"].values["min_peak_mb"] == min(mems.values())
    # the borrowed-defaults loss is the largest own-minus-other accuracy gap in the matrix
    gaps = []
    for r in records:
        m = r.measurement
        if "cross_defaults" in r.phases and m.config["preset_name"] != default_preset(m.framework):
            gaps.append(accs[m.framework] - 100 * m.metrics["test_accuracy"])
    borrowed = findings["borrowed"].values
    assert borrowed["own_pct"] - borrowed["borrowed_pct"] == pytest.approx(max(gaps))
    # tuning: best tuned trial against the defaults, per framework
    tuning = [f for f in report.findings if f.topic == "tuning"]
    assert len(tuning) == 4
    for f in tuning:
        fw = f.text.split(" moved ")[1].split(" from ")[0]
        tuned = [100 * r.measurement.metrics["test_accuracy"] for r in records
                 if "tune" in r.phases and r.measurement.framework == fw]
        assert f.values["tuned_pct"] == pytest.approx(max(tuned))
        assert f.values["default_pct"] == pytest.approx(accs[fw])
    assert "transfer" in findings and "batch_size" in findings
    # these records' times do not depend on threads: a 1.0x "change" is no finding
    assert "threads" not in findings


def test_every_number_a_finding_states_is_in_a_table(report):
    cells = " | ".join(str(c) for t in report.tables.values() for row in t.rows for c in row)
    for finding in report.findings:
        assert finding.values, finding.text
        for key, value in finding.values.items():
            text = _fmt(key, value)
            assert text in finding.text, (key, text, finding.text)
            assert text in cells, (key, text, finding.text)


def test_pareto_front_is_not_dominated(records, report):
    table = report.tables["pareto"]
    front = [(float(r[2]), float(r[3])) for r in table.rows]
    ok = [(100 * r.measurement.metrics["test_accuracy"], r.measurement.metrics["train_time_s"])
          for r in records if r.measurement.ok]
    for acc, time in front:
        assert not any(a > acc + 0.05 and t < time * 0.99 for a, t in ok)
    best = max(a for a, _ in ok)
    assert max(a for a, _ in front) == pytest.approx(best, abs=0.05)


def test_html_is_self_contained(report):
    page = render_html(report)
    sources = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(sources) == len(report.figures)
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in page and "https://" not in page
    assert "worker died" in page  # failed runs are listed, not hidden


def test_records_file_round_trip_and_errors(records, tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(json.dumps(r.to_dict()) for r in records))
    loaded = load_study_records(records=path)
    assert len(loaded) == len(records) and loaded[0].phases == records[0].phases
    # Compressed as kb export writes them: read once, phases kept.
    packed = tmp_path / "records.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert [r.phases for r in load_study_records(records=packed)] == [r.phases for r in records]
    with pytest.raises(ParameterError, match="does not exist"):
        load_study_records(records=tmp_path / "missing.jsonl")
    other = records[0].to_dict()
    other["workload"] = {**other["workload"], "name": "synthetic-mlp", "dataset": "synthetic"}
    path.write_text(path.read_text() + "\n" + json.dumps(other))
    assert len(load_study_records(records=path)) == len(records) + 1  # every workload
    assert len(load_study_records(records=path, workload="mnist-lenet")) == len(records)
    with pytest.raises(ParameterError, match="No records for workload 'cifar10'"):
        load_study_records(records=path, workload="cifar10")
    with pytest.raises(ParameterError, match="does not exist"):
        load_study_records(storage=f"sqlite:///{tmp_path / 'none.db'}")


@pytest.mark.parametrize("text", ["[1, 2, 3]", "1\n2\n", '["a"]', '[{"status": "ok"}]'])
def test_a_records_file_of_no_records_is_refused_as_recommend_refuses_it(cli, tmp_path, text):
    """A JSON list of ints ended in an AttributeError traceback; report reads records files
    with recommend's reader (dltune.measure.load_records) and says what is wrong in one line."""
    path = tmp_path / ("records.json" if text.startswith("[") else "records.jsonl")
    path.write_text(text)
    for command in (["report", "--out", str(tmp_path / "r.html")], ["recommend", "--workload", "digits"]):
        done = cli(*command, "--records", str(path), env={"DLTUNE_CACHE": str(tmp_path / "cache")})
        assert done.returncode == 2, done.stderr[-2000:]
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"dltune {command[0]}: error: The 'records' file {str(path)!r} must "
                               "hold measurement records as JSON, JSON lines or CSV"), line
    assert not (tmp_path / "r.html").exists()


def test_storage_errors_never_show_the_password():
    from dltune.study import StudyStore
    from dltune.tuning import StorageError

    # No server there: the storage cannot be opened, as tune says of it.
    url = "postgresql://bob:s3cret-pw@127.0.0.1:1/nodb"
    with pytest.raises(StorageError) as err:
        load_study_records(storage=url)
    assert "s3cret-pw" not in str(err.value) and "bob:***@" in str(err.value)
    with pytest.raises(StorageError) as err:
        StudyStore(url, "digits-mlp")
    assert "s3cret-pw" not in str(err.value)


def test_records_without_phases_still_make_a_report(records):
    """Plain benchmark records (no study phases): every view uses all successful runs."""
    from dltune.report import build_report
    from dltune.study import StudyRecord

    plain = [StudyRecord(r.measurement) for r in records
             if r.measurement.framework in ("torch", "tensorflow") and "tune" not in r.phases]
    report = build_report(plain)
    rows = {row[0]: row for row in report.tables["comparison"].rows}
    # the comparison falls back to each framework's run with its own preset
    assert rows["torch"][1] == "torch" and rows["tensorflow"][1] == "tensorflow"
    # the preset unchanged (not a sweep point), the longest such run, default threads
    assert rows["torch"][2:5] == ["10", "0.05", "5 (of 20)"]
    own = next(r.measurement for r in records
               if "defaults" in r.phases and r.measurement.framework == "torch")
    assert rows["torch"][5] == fmt_s(own.metrics["train_time_s"])
    assert {"comparison", "cross_defaults", "pareto"} <= set(report.tables)
    assert {"train_time", "cross_defaults", "pareto"} <= set(report.figures)
    assert "tuning" not in report.tables
