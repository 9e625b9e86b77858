"""Every command that reads or writes an Optuna storage opens it as ``tune`` does.

``study`` and ``report`` (``dltune.study``) and ``recommend`` (the surrogates' user records) once
handed the URL to Optuna as it was: a bare ``postgresql://`` URL then failed (SQLAlchemy 2.1
reads it as psycopg 3; dltune's ``postgres`` extra installs psycopg2), and a URL of another
scheme, or no URL at all, ended in a traceback from SQLAlchemy.
"""

from __future__ import annotations

import pytest

from dltune.config import TrainConfig
from dltune.measure import Measurement


def _measurement(run_id: str, batch_size: int) -> Measurement:
    return Measurement(
        status="ok",
        id=run_id,
        workload={"name": "digits-mlp", "dataset": "digits"},
        config=TrainConfig(framework="numpy", batch_size=batch_size).to_dict(),
        hardware={"target": "t"},
        metrics={"test_accuracy": 0.9, "train_time_s": 1.5},
    )


def test_study_report_and_recommend_read_a_postgresql_storage(postgres_url):
    import optuna

    from dltune.report import load_study_records
    from dltune.study import StudyStore
    from dltune.study import load_storage_records as study_records
    from dltune.surrogate import load_storage_measurements as user_records
    from dltune.tuning import open_storage

    store = StudyStore(postgres_url, "digits-mlp")  # the study's own record
    store.add(_measurement("study-run", 32), "k1", ["defaults"], "numpy", 2.0)
    # A tune trial's record, as dltune.tuning stores it.
    tuned = optuna.create_study(storage=open_storage(postgres_url, heartbeat=False),
                                study_name="dltune:digits-mlp:numpy:t")
    trial = tuned.ask()
    trial.set_user_attr("measurement", _measurement("tune-run", 64).to_dict())
    tuned.tell(trial, 0.9)

    found = study_records(postgres_url, ["digits-mlp"])
    assert sorted((r.measurement.id, tuple(r.phases)) for r in found) == [
        ("study-run", ("defaults",)), ("tune-run", ("tune",))]
    assert len(load_study_records(storage=postgres_url)) == 2  # what `dltune report` reads
    assert sorted(r["id"] for r in user_records(postgres_url)) == ["study-run", "tune-run"]


@pytest.mark.parametrize("command", [["recommend", "--workload", "digits"], ["study", "--workload", "digits"],
                                     ["report"]])
@pytest.mark.parametrize(("url", "says"), [
    ("foo://bar", "The 'storage' URL scheme must be one of {sqlite, postgresql, postgres, mysql}. Got 'foo'"),
    ("notaurl", "The 'storage' parameter must be a database URL such as 'sqlite:///dltune.db'"),
])
def test_a_storage_that_is_no_database_url_is_refused_in_one_line(cli, command, url, says, tmp_path):
    done = cli(*command, "--storage", url, env={"DLTUNE_CACHE": str(tmp_path)})
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"dltune {command[0]}: error: {says}")


def _sqlite_files(folder):
    """A JSON file, a real SQLite database cut in half, and the whole one (sqlite:/// URLs)."""
    import sqlite3

    (folder / "records.json").write_text('[{"a": 1}]')
    whole = folder / "whole.db"
    with sqlite3.connect(whole) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 100,)] * 2000)
    conn.close()
    data = whole.read_bytes()
    (folder / "half.db").write_bytes(data[: len(data) // 2])
    return {name: f"sqlite:///{folder / name}" for name in ("records.json", "half.db", "whole.db")}


@pytest.mark.parametrize("command", [
    ["recommend", "--workload", "digits", "--model", "mlp"],
    ["report"],
    ["tune", "--workload", "digits", "--model", "mlp", "--frameworks", "numpy", "--trials", "1"],
    ["worker", "--study", "dltune:x"],
    ["dashboard"],
])
def test_every_command_refuses_a_storage_file_that_is_no_whole_sqlite_database(cli, command, tmp_path):
    """recommend read its SQLite file directly and took a foreign or truncated file for one
    holding no records (exit 0, the storage ignored); every command now says what is wrong."""
    urls = _sqlite_files(tmp_path)
    for name, why in (("records.json", "which is not a SQLite database"),
                      ("half.db", "which is cut short")):
        before = sorted(p.name for p in tmp_path.iterdir())
        done = cli(*command, "--storage", urls[name], env={"DLTUNE_CACHE": str(tmp_path / "cache")})
        assert done.returncode == 2, done.stderr[-2000:]
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"dltune {command[0]}: error: The 'storage' parameter must name a "
                               f"SQLite database. Got {str(tmp_path / name)!r}, {why}"), line
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside it


def test_check_sqlite_file_accepts_empty_and_whole_databases_and_interrupted_writes(tmp_path):
    from dltune._errors import ParameterError
    from dltune._storage_url import check_sqlite_file
    from dltune.surrogate import load_storage_measurements

    urls = _sqlite_files(tmp_path)
    assert check_sqlite_file(tmp_path / "whole.db") == tmp_path / "whole.db"
    assert load_storage_measurements(urls["whole.db"]) == []  # a database without Optuna's tables
    empty = tmp_path / "empty.db"
    empty.touch()
    assert check_sqlite_file(empty) == empty  # SQLite's empty database
    with pytest.raises(ParameterError, match="cut short"):
        check_sqlite_file(tmp_path / "half.db")
    # A hot journal beside it: a write was cut off, and SQLite rolls it back on opening.
    (tmp_path / "half.db-journal").write_bytes(b"\0" * 512)
    assert check_sqlite_file(tmp_path / "half.db") == tmp_path / "half.db"
    with pytest.raises(ParameterError, match="cannot be read"):
        check_sqlite_file(tmp_path)  # a folder
