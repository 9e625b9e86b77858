"""Study records as Optuna trials: stored, read back with phases, tuning's format understood."""

from __future__ import annotations

import json

import optuna
import pytest

from dltune._errors import ParameterError
from dltune.config import TrainConfig
from dltune.measure import Measurement
from dltune.measure._codec import decode_record
from dltune.study import StudyRecord, StudyStore, load_storage_records


def _measurement(ok: bool = True, **config) -> Measurement:
    return Measurement(
        status="ok" if ok else "failed",
        workload={"name": "digits-mlp", "dataset": "digits"},
        config=TrainConfig(framework="numpy", **config).to_dict(),
        hardware={"target": "t"},
        metrics={"test_accuracy": 0.9, "train_time_s": 1.5,
                 "curves": [{"epoch": 1, "test_accuracy": 0.9}]} if ok else {},
        error=None if ok else {"message": "boom"},
    )


def test_records_round_trip_with_phases(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = StudyStore(url, "digits-mlp")
    assert store.name == "dltune-study:digits-mlp"
    store.add(_measurement(batch_size=32), "k1", ["defaults", "cross_defaults"], "numpy", 2.0)
    store.add(_measurement(False, batch_size=8), "k2", ["sweep:batch_size"], "numpy b8", 1.0)
    # a failed run is retried: only COMPLETE trials count as stored
    assert set(store.stored()) == {"k1"}
    store.add(_measurement(batch_size=8), "k2", ["sweep:batch_size"], "numpy b8", 1.0)
    assert set(store.stored()) == {"k1", "k2"}
    # a later plan may put a stored run into another phase too
    store.merge_membership({"k1": ["threads"]})
    records = {r.key: r for r in store.records()}
    assert len(records) == 2 and records["k2"].measurement.ok  # the retry replaces the failure
    assert records["k1"].phases == ["defaults", "cross_defaults", "threads"]
    trial = store.study.get_trials()[0]
    assert trial.values == [0.9, 1.5] and trial.intermediate_values == {1: 0.9}
    assert store.study.directions == [optuna.study.StudyDirection.MAXIMIZE,
                                      optuna.study.StudyDirection.MINIMIZE]


def test_tuning_trials_are_read_as_the_tune_phase(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    text = _measurement(batch_size=16).to_json()
    study = optuna.create_study(storage=url, study_name="dltune:digits-mlp:numpy:t",
                                directions=["maximize", "minimize"])
    chunks = [text[i:i + 100] for i in range(0, len(text), 100)]
    attrs = {f"measurement.{i}": c for i, c in enumerate(chunks)}
    attrs["measurement.chunks"] = len(chunks)
    study.add_trial(optuna.trial.create_trial(values=[0.9, 1.5], user_attrs=attrs))
    assert decode_record(attrs).config["batch_size"] == 16
    assert decode_record({"record": json.loads(text)}).config["batch_size"] == 16
    assert decode_record({}) is None
    (rec,) = load_storage_records(url, ["digits-mlp"])
    assert rec.phases == ["tune"] and rec.source == "dltune:digits-mlp:numpy:t"
    assert load_storage_records(url, ["other-workload"]) == []


def test_a_record_whose_study_field_is_no_dict_is_refused_naming_the_field():
    data = _measurement().to_dict()
    assert StudyRecord.from_dict(dict(data, study={"phases": ["defaults"]})).phases == ["defaults"]
    for study, field in (("defaults", "'study'"), (["defaults"], "'study'"), ({"phases": 5}, "'study.phases'")):
        with pytest.raises(ParameterError, match=f"The {field} field of a study record must be"):
            StudyRecord.from_dict(dict(data, study=study))


def test_a_password_a_driver_error_quotes_alone_is_hidden(monkeypatch):
    """The driver's message may quote the password without the URL around it."""
    import dltune.measure._store as store

    url = "postgresql://dltune:pa@ss99Q@db.example:5432/dltune"

    def refuse(**kwargs):
        raise RuntimeError('FATAL: password "pa@ss99Q" authentication failed for user "dltune"')

    monkeypatch.setattr(store, "open_storage", lambda *args, **kwargs: object())
    monkeypatch.setattr(optuna, "get_all_study_names", refuse)
    with pytest.raises(ParameterError) as refused:
        load_storage_records(url)
    assert "pa@ss99Q" not in str(refused.value) and "ss99Q" not in str(refused.value)
    assert 'password "***" authentication failed' in str(refused.value)
