"""The direct SQLite query reads what Optuna's public API reads, on Optuna's current schema."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from dltune.measure import Measurement, _codec
from dltune.measure._codec import encode, set_record
from dltune.measure._storage_reader import read_storage_records


def _record(run_id: str, ok: bool = True) -> Measurement:
    return Measurement(
        status="ok" if ok else "failed", id=run_id,
        workload={"name": "digits-mlp", "dataset": "digits"},
        config={"framework": "numpy", "optimizer": "sgd", "learning_rate": 0.1, "batch_size": 32,
                "epochs": 2},
        hardware={"target": "t"},
        metrics={"test_accuracy": 0.9, "train_time_s": 1.5,
                 "curves": [{"epoch": 1, "test_accuracy": 0.8}, {"epoch": 2, "test_accuracy": 0.9}]}
        if ok else {},
        error=None if ok else {"kind": "exit", "message": "boom"},
    )


@pytest.fixture
def storage(tmp_path, monkeypatch):
    """A SQLite storage holding every shape: records written through the codec (plain, chunked,
    study-level preset and repeat, a failed trial, the study's store), an old ``record`` one, a
    running trial, a trial without a record, and a record stored twice."""
    from dltune.study import StudyStore

    url = f"sqlite:///{tmp_path / 'dltune.db'}"
    monkeypatch.setattr(_codec, "CHUNK_CHARS", 300)  # chunked: every record longer than this
    tuned = optuna.create_study(storage=url, study_name="dltune:digits-mlp:numpy:t")
    set_record(tuned, _record("preset"), f"{_codec.PRESET_PREFIX}numpy")
    set_record(tuned, _record("repeat"), f"{_codec.REPEAT_PREFIX}0")
    tuned.set_user_attr("workload", {"name": "digits-mlp", "fingerprint": "f"})
    trial = tuned.ask()
    chunked = _record("chunked")
    set_record(trial, chunked)
    assert trial.user_attrs["measurement.chunks"] > 1
    trial.set_user_attr("test_accuracy", 0.9)
    tuned.tell(trial, 0.9)
    trial = tuned.ask()
    set_record(trial, _record("failed", ok=False))
    tuned.tell(trial, state=TrialState.FAIL)
    tuned.ask()  # running: no record yet
    trial = tuned.ask()
    trial.set_user_attr("note", "not a record")
    tuned.tell(trial, 0.5)
    monkeypatch.setattr(_codec, "CHUNK_CHARS", 50_000)
    old = optuna.create_study(storage=url, study_name="old")
    set_record(old, _record("old-preset"), f"{_codec.PRESET_PREFIX}caffe")
    old.add_trial(optuna.trial.create_trial(value=0.9, user_attrs={"record": _record("old").to_dict()}))
    old.add_trial(optuna.trial.create_trial(value=0.9, user_attrs=encode(_record("plain"))))
    # the same run stored twice (a preset also kept as a trial): read once
    old.add_trial(optuna.trial.create_trial(value=0.9, user_attrs=encode(_record("preset"))))
    StudyStore(url, "digits-mlp").add(_record("study"), "k1", ["defaults"], "numpy", 2.0)
    return tmp_path / "dltune.db", url, chunked


def test_the_direct_query_reads_what_optuna_reads(storage):
    path, url, chunked = storage
    opened = optuna.storages.RDBStorage(url)
    through_optuna = read_storage_records(opened)
    direct = read_storage_records(path)
    assert direct == through_optuna
    # study by study, the study's own records before its trials'
    assert [r["id"] for r in direct] == ["preset", "repeat", "chunked", "failed", "old-preset", "old",
                                         "plain", "study"]
    assert direct[2] == chunked.to_dict()


def test_a_database_without_optuna_tables_holds_no_records(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
    conn.close()
    assert read_storage_records(path) == []
