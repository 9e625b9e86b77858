"""The report uses every kind of record: bench runs, tune's trials, preset and repeats, the
knowledge base; it prints no section without data and the published figures only beside MNIST."""

from __future__ import annotations

import pytest

from dltune.config import TrainConfig
from dltune.report import build_report, load_study_records
from dltune.report._model import Figure, Table, fmt_pct, fmt_s

from .conftest import _record

DIGITS = {"name": "digits-lenet", "dataset": "digits", "model": "lenet",
          "meta": {"n_train": 1437, "n_test": 360, "param_count": 131080},
          "model_spec": {"input_shape": [1, 8, 8], "num_classes": 10}}


def _data(section) -> list:
    return [i for i in section.items if isinstance(i, (Table, Figure))]


def test_demo_report_has_data_in_every_section(demo_storage, demo_report):
    phases = {p for r in load_study_records(storage=demo_storage) for p in r.phases}
    assert phases == {"bench", "tune", "tune_preset", "tune_repeat"}
    for section in demo_report.sections:
        assert _data(section), section.title
        for table in (i for i in section.items if isinstance(i, Table)):
            assert table.rows, (section.title, table.title)
    titles = {s.title for s in demo_report.sections}
    assert {"digits-lenet: Benchmark runs", "digits-mlp: Tuning",
            "digits-mlp: Framework comparison"} <= titles
    tables = demo_report.tables
    # bench: one configuration measured twice, its median and range
    (bench,) = tables["digits-lenet-bench"].rows
    assert bench[0] == "numpy" and bench[2] == "2" and "–" in bench[3]
    # tune: 3 trials against the framework's own preset (caffe's, epochs capped), 2 again
    (tuning,) = tables["digits-mlp-tuning"].rows
    assert tuning[3] == "3"
    (comparison,) = tables["digits-mlp-comparison"].rows
    assert comparison[1] == "caffe" and comparison[4] == "1 (of 11)"
    assert len(tables["digits-mlp-repeats"].rows) == 2
    assert not any(c.startswith("published") for t in tables.values() for c in t.columns)
    (missing,) = [m for m in demo_report.meta if m.startswith("Not measured")]
    assert "for digits-lenet, each framework with its own defaults" in missing
    assert "thread settings" in missing and "Benchmark runs" not in missing
    # bench runs are not a view of the study: the line names the command that measures them
    assert "for digits-mlp, benchmark runs ('dltune bench')" in missing, missing
    assert missing.endswith("('dltune study' measures the study's views)."), missing


def test_one_workload_of_a_storage_is_reported_from_its_bench_runs(demo_storage):
    records = load_study_records(storage=demo_storage, workload="digits-lenet")
    report = build_report(records, knowledge_base=False)
    assert report.title == "dltune report: digits-lenet"
    assert [s.title for s in report.sections] == ["Benchmark runs", "Accuracy / training-time trade-off"]
    bench = next(r.measurement for r in records)
    assert report.tables["bench"].rows[0][5] == fmt_pct(100 * bench.metrics["test_accuracy"])


@pytest.fixture(scope="module")
def digits_bench():
    """Bench runs on digits: two frameworks with the same settings, one measured under load."""
    same = [_record(TrainConfig(framework=fw, epochs=5), ["bench"], fw, workload=DIGITS,
                    extra_metrics={"load_1m": 3.5 if fw == "torch" else 0.4})
            for fw in ("torch", "tensorflow")]
    return same, build_report(same)


def test_same_settings_bench_finding_states_numbers_of_the_bench_table(digits_bench):
    records, report = digits_bench
    (finding,) = [f for f in report.findings if f.topic == "bench"]
    times = {r.measurement.framework: r.measurement.metrics["train_time_s"] for r in records}
    assert finding.values["bench_fastest_s"] == min(times.values())
    assert f"{min(times, key=times.get)} trained fastest ({fmt_s(min(times.values()))} s)" in finding.text
    cells = {c for row in report.tables["bench"].rows for c in row}
    assert fmt_s(min(times.values())) in cells and fmt_s(max(times.values())) in cells


def test_published_figures_stand_only_beside_their_own_data_set(digits_bench, report):
    _, digits = digits_bench
    assert "comparison" not in digits.tables  # no framework ran its own preset
    assert not any("published" in c for t in digits.tables.values() for c in t.columns)
    assert "caffe" not in {row[0] for t in digits.tables.values() for row in t.rows}
    assert "published CPU train s" in report.tables["comparison"].columns  # the MNIST records


def test_knowledge_base_runs_of_the_workload_are_shown_with_their_machine_and_load(digits_bench):
    _, report = digits_bench
    kb = report.tables["kb"]
    assert {row[0] for row in kb.rows} >= {"torch", "tensorflow", "mxnet", "theano"}
    assert "not on this machine" in kb.note and "load average above the usable cores" in kb.note
    assert "Retired (no longer maintained), shown for comparison: mxnet, theano." in report.meta


def test_runs_measured_under_load_are_said_to_be(digits_bench, report):
    _, digits = digits_bench
    (line,) = [m for m in digits.meta if "load average" in m]
    assert line.startswith("Load: the 1-minute load average was 0.4–3.5 (median 1.9) as the 2 runs "
                           "that recorded it started, on 2 usable cores"), line
    assert line.endswith(" 1 started above the usable cores (up to 3.5): where that was other work, "
                         "their times are slower than this machine is."), line
    (bench,) = [f.text for f in digits.findings if f.topic == "bench"]
    assert "longer, under 1-minute load 0.4–3.5 on 2 cores;" in bench, bench
    assert not any("load average" in m for m in report.meta)  # none recorded there
