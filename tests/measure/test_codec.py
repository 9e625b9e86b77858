"""The one codec between records and Optuna user attributes: every shape ever written reads back."""

from __future__ import annotations

import json

import pytest

from dltune._errors import ParameterError
from dltune.measure import Measurement, _codec
from dltune.measure._codec import (
    CHUNK_CHARS,
    decode,
    decode_record,
    encode,
    set_record,
)


def _record(run_id: str = "run-1", pad: str = "", **fields) -> Measurement:
    return Measurement(
        status="ok", id=run_id,
        workload={"name": "digits-mlp", "dataset": "digits"},
        config={"framework": "numpy", "batch_size": 32, "epochs": 1},
        hardware={"target": "t"},
        metrics={"test_accuracy": 0.9, "train_time_s": 1.5, "pad": pad,
                 "curves": [{"epoch": 1, "test_accuracy": 0.9}]},
        **fields,
    )


def _sized(run_id: str, chars: int) -> Measurement:
    """A record whose JSON text is exactly ``chars`` characters long."""
    short = len(_record(run_id).to_json())
    record = _record(run_id, pad="x" * (chars - short))
    assert len(record.to_json()) == chars
    return record


def test_a_record_round_trips_as_one_json_object():
    record = _record()
    attrs = encode(record)
    assert attrs == {"measurement": record.to_dict()}
    assert decode(attrs) == [record.to_dict()]
    assert decode_record(attrs) == record


def test_chunked_above_the_chunk_size_and_not_at_it():
    at = _sized("at", CHUNK_CHARS)
    assert list(encode(at)) == ["measurement"]
    above = _sized("above", CHUNK_CHARS + 1)
    attrs = encode(above)
    assert attrs["measurement.chunks"] == 2 and "measurement" not in attrs
    assert [len(attrs[f"measurement.{i}"]) for i in range(2)] == [CHUNK_CHARS, 1]
    assert attrs["measurement.0"] + attrs["measurement.1"] == above.to_json()
    assert decode_record(attrs) == above and decode(attrs) == [above.to_dict()]


def test_study_records_are_chunked_under_their_own_name(monkeypatch):
    monkeypatch.setattr(_codec, "CHUNK_CHARS", 100)
    record = _record("preset")
    attrs = encode(record, "preset_measurement:torch")
    count = attrs["preset_measurement:torch.chunks"]
    assert count > 1 and len(attrs) == count + 1
    assert decode_record(attrs, "preset_measurement:torch") == record
    assert decode_record(attrs) is None  # no trial record there
    assert decode(attrs) == [record.to_dict()]


def test_set_record_sets_each_attribute():
    class Target:
        def __init__(self):
            self.user_attrs = {}

        def set_user_attr(self, key, value):
            self.user_attrs[key] = value

    target, record = Target(), _record()
    set_record(target, record, "repeat_measurement:3")
    assert target.user_attrs == {"repeat_measurement:3": record.to_dict()}


@pytest.mark.parametrize("name", ["record", "note", "measurement.0", "preset_measurement"])
def test_records_are_written_only_under_the_codec_names(name):
    with pytest.raises(ParameterError, match=f"The 'name' parameter must be 'measurement' .* Got {name!r}"):
        encode(_record(), name)


def _chunks(name: str, text: str, size: int = 90) -> dict[str, object]:
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return {**{f"{name}.{i}": p for i, p in enumerate(parts)}, f"{name}.chunks": len(parts)}


def test_every_shape_written_before_reads():
    a, b, c, d, e = (_record(f"run-{i}") for i in range(5))
    # tune's trials (a JSON object, or its text in chunks), the study's trials (``record``, once
    # also as text), and tune's study-level preset and repeat records.
    assert decode_record({"measurement": a.to_dict()}) == a
    assert decode_record(_chunks("measurement", b.to_json())) == b
    assert decode_record({"record": c.to_dict(), "key": "k", "phases": ["defaults"]}) == c
    assert decode_record({"record": d.to_json()}) == d
    study_attrs = {"workload": {"name": "digits-mlp", "fingerprint": "f"},
                   "preset_measurement:caffe": d.to_dict(), "repeat_measurement:7": e.to_dict(),
                   "stale_trial:2": "stale: no heartbeat", "hardware_fingerprint": "h"}
    assert [r["id"] for r in decode(study_attrs)] == ["run-3", "run-4"]
    assert decode_record(study_attrs, "repeat_measurement:7") == e


def test_what_is_no_record_is_left_out():
    record = _record()
    attrs = {
        "note": "not a record",
        "config": record.config,
        "plan": {"frameworks": ["numpy"]},
        "measurement": {"status": "ok"},  # a record's name, but no record
        "preset_measurement:x": "{not json",
        "test_accuracy": 0.9,
    }
    assert decode(attrs) == []
    assert decode_record(attrs) is None and decode_record({}) is None


@pytest.mark.parametrize("damage", ["a chunk missing", "a count that is no number", "text cut short"])
def test_a_damaged_chunk_set_is_skipped(damage):
    good, bad = _record("good"), _record("bad")
    broken = _chunks("measurement", bad.to_json())
    if damage == "a chunk missing":
        del broken["measurement.1"]
    elif damage == "a count that is no number":
        broken["measurement.chunks"] = "many"
    else:
        broken["measurement.chunks"] -= 1
    assert decode_record(broken) is None
    study_attrs = {**{k.replace("measurement", "preset_measurement:torch"): v for k, v in broken.items()},
                   "repeat_measurement:1": good.to_dict()}
    assert [r["id"] for r in decode(study_attrs)] == ["good"]


def test_a_name_that_looks_like_a_chunk_is_a_name_without_a_count():
    record = _record()
    attrs = {"preset_measurement:v.1": record.to_dict()}
    assert decode(attrs) == [record.to_dict()]
    assert decode_record(attrs, "preset_measurement:v.1") == record


def test_a_record_of_a_newer_schema_is_refused_by_name():
    data = {**_record().to_dict(), "schema_version": 99}
    with pytest.raises(ParameterError, match="schema_version 99 is newer"):
        decode_record({"measurement": json.loads(json.dumps(data))})


def test_a_new_record_keeps_its_backends_revision_and_an_old_one_reads_as_revision_0():
    from dltune.backends._registry import BACKENDS
    from dltune.measure._record import SCHEMA_VERSION

    record = Measurement(status="ok", workload={"name": "digits-mlp"}, hardware={},
                         config={"framework": "tensorflow", "epochs": 1}, metrics={"train_time_s": 1.0})
    assert record.backend_revision == BACKENDS["tensorflow"].revision == 1
    assert decode_record(encode(record)).backend_revision == 1
    assert _record().backend_revision == BACKENDS["numpy"].revision == 0
    old = {k: v for k, v in record.to_dict().items() if k != "backend_revision"}
    old["schema_version"] = 1
    decoded = decode_record({"measurement": old})
    assert decoded.backend_revision == 0 and decoded.schema_version == 1
    assert SCHEMA_VERSION == 2
