"""The one codec between a :class:`Measurement` and Optuna user attributes.

A trial holds its record under :data:`RECORD_ATTR`; a study holds extra records under one name
each (:data:`PRESET_PREFIX` + preset label, :data:`REPEAT_PREFIX` + trial number). Under a name
``n`` a record is either the JSON object itself (``n``) or, when its JSON text is longer than
:data:`CHUNK_CHARS`, that text cut into ``n.0``, ``n.1``, ... with their count in ``n.chunks``.
Reading also accepts :data:`LEGACY_ATTR`, the name the study's trials used before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from dltune._errors import ParameterError
from dltune.measure._record import Measurement

__all__ = [
    "CHUNK_CHARS",
    "LEGACY_ATTR",
    "PRESET_PREFIX",
    "RECORD_ATTR",
    "RECORD_NAMES",
    "REPEAT_PREFIX",
    "STUDY_PREFIXES",
    "decode",
    "decode_record",
    "encode",
    "set_record",
]

RECORD_ATTR = "measurement"
LEGACY_ATTR = "record"
PRESET_PREFIX = "preset_measurement:"
REPEAT_PREFIX = "repeat_measurement:"
#: The names a trial's record is read under; the study's records' names start with a prefix.
RECORD_NAMES = (RECORD_ATTR, LEGACY_ATTR)
STUDY_PREFIXES = (PRESET_PREFIX, REPEAT_PREFIX)
# Characters per attribute: well inside every database's text column.
CHUNK_CHARS = 50_000
_COUNT = ".chunks"
_PART = re.compile(r"(?P<name>.*)\.\d+")
# What every record has, whatever its status: how a stored value is told from other attributes.
_RECORD_KEYS = frozenset({"workload", "config", "metrics", "status"})


def _is_record_name(name: str) -> bool:
    """Whether ``name`` (without a chunk suffix) is one that records are stored under."""
    return name in RECORD_NAMES or name.startswith(STUDY_PREFIXES)


def encode(record: Measurement, name: str = RECORD_ATTR) -> dict[str, Any]:
    """The user attributes that store ``record`` under ``name``: the JSON object, or its text in
    chunks when longer than :data:`CHUNK_CHARS`."""
    if name != RECORD_ATTR and not name.startswith(STUDY_PREFIXES):
        raise ParameterError(
            f"The 'name' parameter must be {RECORD_ATTR!r} or start with one of "
            f"{', '.join(map(repr, STUDY_PREFIXES))}. Got {name!r} instead."
        )
    text = record.to_json()
    if len(text) <= CHUNK_CHARS:
        return {name: json.loads(text)}
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]
    attrs: dict[str, Any] = {f"{name}.{i}": chunk for i, chunk in enumerate(chunks)}
    attrs[name + _COUNT] = len(chunks)
    return attrs


def set_record(target: Any, record: Measurement, name: str = RECORD_ATTR) -> None:
    """Store ``record`` on an Optuna trial or study (anything with ``set_user_attr``)."""
    for key, value in encode(record, name).items():
        target.set_user_attr(key, value)


def _stored(attrs: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The record dict stored under ``name``, or None: absent, a chunk missing, not JSON, or
    not a record."""
    if name in attrs:
        value = attrs[name]
    elif name + _COUNT in attrs:
        try:
            count = int(attrs[name + _COUNT])
            value = "".join(attrs[f"{name}.{i}"] for i in range(count))
        except (KeyError, TypeError, ValueError):
            return None
    else:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict) and _RECORD_KEYS <= value.keys():
        return value
    return None


def decode(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every record held in one trial's or study's user attributes, as the dicts
    :meth:`Measurement.to_dict` makes, in the order of their names; a damaged one is skipped."""
    names: dict[str, None] = {}
    for key in attrs:
        if key.endswith(_COUNT):
            names.setdefault(key[: -len(_COUNT)])
            continue
        part = _PART.fullmatch(key)
        if part is None or part["name"] + _COUNT not in attrs:
            names.setdefault(key)
    return [record for name in names
            if _is_record_name(name) and (record := _stored(attrs, name)) is not None]


def decode_record(attrs: Mapping[str, Any], name: str = RECORD_ATTR) -> Measurement | None:
    """The record stored under ``name`` (for :data:`RECORD_ATTR`, also under
    :data:`LEGACY_ATTR`), or None when there is none or it is damaged.

    Raises:
        ParameterError: the record's schema is newer than this dltune reads.
    """
    for candidate in (name, LEGACY_ATTR) if name == RECORD_ATTR else (name,):
        record = _stored(attrs, candidate)
        if record is not None:
            return Measurement.from_dict(record)
    return None
