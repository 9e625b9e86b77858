"""load_records(source): a storage URL, a SQLite file, or a file of records; one JSON-lines rule."""

from __future__ import annotations

import gzip

import pytest

from dltune._errors import ParameterError
from dltune.measure import Measurement, load_records, save_records


def _record(framework="numpy", accuracy=0.9):
    return Measurement(
        status="ok",
        workload={"name": "digits-mlp", "dataset": "digits", "model": "mlp"},
        config={"framework": framework, "optimizer": "sgd", "learning_rate": 0.1, "batch_size": 32,
                "epochs": 1, "threads": {"intra_op": 1}},
        hardware={"target": "test-1of2c"},
        metrics={"test_accuracy": accuracy, "train_time_s": 0.5, "test_time_s": 0.01, "peak_rss_mb": 90.0},
    )


@pytest.fixture
def storage(tmp_path):
    """A SQLite storage holding two records as ``dltune bench`` stores them."""
    from dltune.measure._store import BENCH_PREFIX, StudyStore

    url = f"sqlite:///{tmp_path / 'dltune.db'}"
    store = StudyStore(url, "digits-mlp", prefix=BENCH_PREFIX)
    records = [_record(), _record("torch", 0.95)]
    for number, record in enumerate(records):
        store.add(record, f"key{number}", ["bench"], "bench", 1.0)
    return url, tmp_path / "dltune.db", records


def test_a_storage_url_and_its_sqlite_file_give_its_records(storage, monkeypatch):
    url, path, records = storage
    assert load_records(url) == records
    assert load_records(path) == records  # told a database by its header, not its name
    monkeypatch.chdir(path.parent)
    assert load_records("dltune.db") == records
    assert load_records(url, limit=1) == records[:1]


def test_a_missing_database_and_a_text_file_named_db_are_refused(tmp_path):
    with pytest.raises(ParameterError, match="does not exist: load_records reads"):
        load_records(f"sqlite:///{tmp_path / 'none.db'}")
    with pytest.raises(ParameterError, match="URL scheme must be one of"):
        load_records("ftp://host/records")
    text = tmp_path / "text.db"
    text.write_text("not a database\n")
    with pytest.raises(ParameterError, match="must hold measurement records as JSON, JSON lines or CSV"):
        load_records(text)


@pytest.mark.parametrize("name", ["r.json", "r.csv", "r.jsonl", "r.jsonl.gz"])
def test_files_dltune_writes(tmp_path, name):
    records = [_record(), _record("torch", 0.95)]
    path = tmp_path / name
    if name.startswith("r.jsonl"):
        with (gzip.open if name.endswith(".gz") else open)(path, "wt") as fh:
            fh.write("".join(r.to_json() + "\n" for r in records))
    else:
        save_records(records, path)
    assert [r.to_dict() for r in load_records(str(path))] == [r.to_dict() for r in records]


def test_one_json_lines_rule_a_torn_last_line_is_skipped_any_other_bad_line_refused(tmp_path):
    from dltune.measure import _shipped
    from dltune.measure._record import read_jsonl

    assert _shipped.read_jsonl is read_jsonl
    good = _record().to_json()
    torn = tmp_path / "torn.jsonl"
    torn.write_text(good + "\n" + good[:40])
    assert len(load_records(torn)) == 1 and len(list(_shipped.read_jsonl(torn))) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + "\n{torn\n" + good + "\n")
    with pytest.raises(ParameterError, match="At line 2: Expecting property name"):
        load_records(bad)
    with pytest.raises(ParameterError, match=f"The file {str(bad)!r} must hold JSON lines. At line 2"):
        list(_shipped.read_jsonl(bad))


def test_dltune_load_records_is_this_function():
    import dltune

    assert dltune.load_records is load_records
