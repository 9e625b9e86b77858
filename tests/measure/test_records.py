from __future__ import annotations

import json
import re

import pytest

from dltune._errors import ParameterError
from dltune.measure import SCHEMA_VERSION, Measurement, load_records, save_records, to_dataframe


def _record(framework="torch", status="ok", accuracy=0.95):
    return Measurement(
        status=status,
        workload={"name": "digits-mlp", "dataset": "digits", "fingerprint": "00ab12", "meta": {"n_train": 10}},
        config={"framework": framework, "batch_size": 64, "learning_rate": 0.05,
                "threads": {"intra_op": 1, "inter_op": 1, "blas": None, "cores": None}},
        hardware={"cpu_model": "Xeon 1234", "fingerprint": "0123456789ab", "usable_cores": 2},
        versions={"framework": "2.13.0", "numpy": "2.0"},
        metrics={"test_accuracy": accuracy, "train_time_s": 1.5, "curves": [{"epoch": 1, "test_accuracy": accuracy}]}
        if status == "ok" else {},
        error=None if status == "ok" else {"kind": "signal", "message": "worker killed by SIGSEGV"},
    )


def test_json_round_trip():
    record = _record()
    assert Measurement.from_json(record.to_json()) == record
    assert record.schema_version == SCHEMA_VERSION


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_file_round_trip(tmp_path, suffix):
    records = [_record(), _record("tensorflow", accuracy=0.9), _record("torch", status="failed")]
    path = save_records(records, tmp_path / f"r{suffix}")
    back = load_records(path)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in records]


def test_json_lines(tmp_path):
    records = [_record(), _record("tensorflow")]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(r.to_json() for r in records))
    assert load_records(path) == records


def test_dataframe_of_every_field():
    frame = to_dataframe([_record(), _record("tensorflow", accuracy=0.8)], columns="all")
    assert list(frame["config.framework"]) == ["torch", "tensorflow"]
    assert frame["metrics.test_accuracy"].tolist() == [0.95, 0.8]
    assert list(frame.columns) == list(_record().flat())


def test_dataframe_of_the_summary_by_default_or_of_named_columns():
    from dltune.measure import SUMMARY_COLUMNS

    records = [_record(), _record("tensorflow", status="failed")]
    frame = to_dataframe(records)
    assert list(frame.columns) == list(SUMMARY_COLUMNS) and len(SUMMARY_COLUMNS) <= 15
    assert frame["framework"].tolist() == ["torch", "tensorflow"]
    assert frame["accuracy"].tolist()[0] == 0.95 and frame["batch_size"].tolist() == [64, 64]
    assert frame["status"].tolist() == ["ok", "failed"] and frame["workload"].tolist()[0] == "digits-mlp"
    assert list(to_dataframe([]).columns) == list(SUMMARY_COLUMNS)
    picked = to_dataframe(records, columns=["framework", "config.learning_rate", "metrics.gpu_peak_mb"])
    assert list(picked.columns) == ["framework", "config.learning_rate", "metrics.gpu_peak_mb"]
    assert picked["config.learning_rate"].tolist() == [0.05, 0.05]
    for bad, says in [("everything", "'summary', 'all' or a list of column names. Got 'everything'"),
                      ([], "Got [] instead"), ([3], "Got [3] instead"),
                      (["accuracy_pct"], "columns of 'summary' (framework, workload, model, ")]:
        with pytest.raises(ParameterError, match=re.escape(says)):
            to_dataframe(records, columns=bad)


def test_repr_is_short_and_says_what_ran_and_how_it_went():
    record = _record()
    text = repr(record)
    for part in ("Measurement(ok: torch on digits-mlp", "lr=0.05 batch=64", "accuracy 95.00%",
                 "train 1.5 s", f"id {record.id[:8]}"):
        assert part in text, text
    failed = _record(status="failed")
    failed.error["message"] = "x" * 5000
    failed.workload["name"] = "w" * 5000
    failed.metrics["curves"] = [{"epoch": i} for i in range(1000)]
    assert len(repr(failed)) < 600 and "signal: xxx" in repr(failed)
    assert len(repr([record])) < 600  # a list of records shows each so


def test_repr_html_is_a_small_escaped_table():
    record = _record()
    record.workload["name"] = "<b>digits</b>"
    page = record._repr_html_()
    assert page.startswith("<table>") and page.count("<tr>") == 16 and len(page) < 2000
    assert "&lt;b&gt;digits&lt;/b&gt;" in page and "<b>" not in page and "95.00%" in page


def test_newer_schema_is_refused():
    data = _record().to_dict()
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ParameterError, match="newer than this dltune"):
        Measurement.from_dict(data)


def test_missing_file(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        load_records(tmp_path / "none.csv")
    with pytest.raises(ParameterError, match="must be a file. Got the folder"):
        load_records(tmp_path)


def test_a_file_of_no_records_is_refused_with_where(tmp_path):
    good = _record().to_json()
    cases = {"lines.jsonl": (good + "\nnot json\n", "At line 2: Expecting value"),
             "other.json": ('{"a": 1}', "At line 1: Measurement.__init__() missing"),
             "table.csv": ("a,b\n1,2\n", "missing 4 required positional arguments"),
             "bytes.json": (b"\xff\xfe", "codec can't decode")}
    for name, (content, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(ParameterError) as err:
            load_records(path)
        assert str(err.value).startswith(
            f"The 'records' file {str(path)!r} must hold measurement records as JSON, JSON lines or CSV")
        assert says in str(err.value)


def test_summary_row():
    row = _record().summary_row()
    assert row["accuracy_pct"] == pytest.approx(95.0)
    assert json.dumps(row)


def test_to_dataframe_takes_records_or_their_dicts_and_refuses_others():
    assert len(to_dataframe([_record().to_dict(), _record("tensorflow", accuracy=0.8)])) == 2
    assert len(to_dataframe(_record())) == 1
    with pytest.raises(ParameterError, match="must hold Measurement objects or dicts of their fields. Got int instead"):
        to_dataframe([_record(), 3])
    with pytest.raises(ParameterError, match="must be a Measurement, a dict of its fields or a list of them. Got int"):
        to_dataframe(3)


def test_a_file_of_other_json_is_refused_naming_its_parameter(tmp_path):
    """A list of ints read as records was an AttributeError ("'int' object has no attribute 'get'")."""
    path = tmp_path / "ints.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(ParameterError) as err:
        load_records(path, "calibrations")
    assert str(err.value).startswith(f"The 'calibrations' file {str(path)!r} must hold measurement records")
    assert str(err.value).endswith("A measurement record must be a dict of its fields. Got int instead.")
    with pytest.raises(ParameterError, match="must be a dict of its fields. Got list instead"):
        Measurement.from_dict([1])


def test_gzip_json_lines_as_a_knowledge_base_is_shipped_and_a_first_look(tmp_path):
    import gzip

    records = [_record(), _record("tensorflow"), _record("numpy")]
    path = tmp_path / "kb.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(r.to_json() for r in records) + "\n")
    assert load_records(path) == records
    assert load_records(path, limit=1) == records[:1]
    (tmp_path / "torn.jsonl").write_text(records[0].to_json() + "\n{torn")
    assert load_records(tmp_path / "torn.jsonl", limit=1) == records[:1]
