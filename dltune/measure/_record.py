"""The versioned measurement record, and its JSON / CSV / DataFrame forms."""

from __future__ import annotations

import csv
import gzip
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import as_list_of, check_in_file

__all__ = [
    "SCHEMA_VERSION",
    "Measurement",
    "load_records",
    "read_csv",
    "save_records",
    "to_dataframe",
    "write_csv",
]

SCHEMA_VERSION = 1

# Columns whose values stay strings in CSV even when they look like numbers.
_STRING_PREFIXES = ("versions.", "id", "status", "hardware.cpu_model", "hardware.fingerprint",
                    "hardware.target", "workload.fingerprint", "config.framework", "error.")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Measurement:
    """One measured run: what was trained, where, how it went.

    ``metrics`` holds (for ``ok`` runs) ``train_time_s``, ``test_time_s``, ``test_accuracy``,
    ``compile_time_s``, ``cpu_percent_mean``, ``cpu_percent_p95``, ``cpu_fraction_mean``,
    ``peak_rss_mb``, ``gpu_peak_mb``, ``param_count``, ``threads`` (what the framework
    reported using), ``curves`` (per epoch) and, with repeats, ``repeats`` (each run's
    figures) with medians as the headline values. ``error`` holds ``kind``, ``message``,
    ``stderr_tail`` for failed runs.
    """

    status: str
    workload: dict[str, Any]
    config: dict[str, Any]
    hardware: dict[str, Any]
    versions: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    started_at: str = field(default_factory=now_iso)
    finished_at: str = field(default_factory=now_iso)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    schema_version: int = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def framework(self) -> str:
        return self.config.get("framework", "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        if not isinstance(data, dict):
            raise ParameterError(
                f"A measurement record must be a dict of its fields. Got {type(data).__name__} instead.")
        version = data.get("schema_version", SCHEMA_VERSION)
        if version > SCHEMA_VERSION:
            raise ParameterError(
                f"Measurement schema_version {version} is newer than this dltune "
                f"understands ({SCHEMA_VERSION}); upgrade dltune."
            )
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Measurement:
        return cls.from_dict(json.loads(text))

    def flat(self) -> dict[str, Any]:
        """Dotted keys to scalars; lists and nested objects below the second level as JSON."""
        out: dict[str, Any] = {}
        for key, value in self.to_dict().items():
            if isinstance(value, dict):
                for sub, item in value.items():
                    out[f"{key}.{sub}"] = item
            else:
                out[key] = value
        return out

    def summary_row(self) -> dict[str, Any]:
        """The study's table columns for this record."""
        m = self.metrics
        return {
            "framework": self.framework,
            "status": self.status,
            "train_s": m.get("train_time_s"),
            "test_s": m.get("test_time_s"),
            "accuracy_pct": None if m.get("test_accuracy") is None else 100 * m["test_accuracy"],
            "cpu_pct": m.get("cpu_percent_mean"),
            "peak_mb": m.get("peak_rss_mb"),
            "gpu_mb": m.get("gpu_peak_mb"),
        }


_MISSING = object()


def _cell(value: Any) -> str:
    """A CSV cell: "" for a key the record does not have, JSON ``null`` for an explicit None."""
    if value is _MISSING:
        return ""
    if value is None:
        return "null"
    if isinstance(value, (dict, list, tuple, bool)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _uncell(column: str, text: str) -> Any:
    if text == "":
        return _MISSING
    if text == "null":
        return None
    if column.startswith(_STRING_PREFIXES):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def write_csv(records: Iterable[Measurement], path: str | Path) -> Path:
    """Write records as CSV, one row each, dotted column names."""
    rows = [r.flat() for r in records]
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    path = Path(path)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c, _MISSING)) for c in columns])
    return path


def read_csv(path: str | Path) -> list[Measurement]:
    """Read records written by :func:`write_csv`."""
    with Path(path).open(newline="") as fh:
        reader = csv.reader(fh)
        columns = next(reader)
        records = []
        for row in reader:
            data: dict[str, Any] = {}
            for column, text in zip(columns, row, strict=True):
                value = _uncell(column, text)
                if value is _MISSING:
                    continue
                if "." in column:
                    top, sub = column.split(".", 1)
                    if not isinstance(data.get(top), dict):
                        data[top] = {}
                    data[top][sub] = value
                else:
                    data[column] = value
            records.append(Measurement.from_dict(data))
    return records


def save_records(records: Iterable[Measurement], path: str | Path) -> Path:
    """Save records as CSV (``.csv``) or a JSON list (anything else); missing folders are made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        return write_csv(records, path)
    path.write_text(json.dumps([r.to_dict() for r in records], indent=1, sort_keys=True))
    return path


def load_records(path: str | Path, name: str = "records", limit: int | None = None,
                 parse: Callable[[dict[str, Any]], Any] | None = None) -> list[Any]:
    """Load records from CSV, a JSON list, or JSON lines (gzip-compressed if the name ends in
    ``.gz``, as a knowledge base is shipped).

    Args:
        path: the file.
        name: the parameter that gave the file, named by the errors.
        limit: read no more than this many records of JSON lines: a quick look at what a large
            file holds.
        parse: makes each record of its dict (default :meth:`Measurement.from_dict`); a reader
            of records with more fields (a study's) passes its own.

    Raises:
        ParameterError: a missing file, a folder, or a file that does not hold records.
    """
    path = check_in_file(name, path)
    parse = parse or Measurement.from_dict
    where = ""
    try:
        if path.suffix == ".csv":
            return [parse(m.to_dict()) for m in read_csv(path)[:limit]]
        records = []
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                if not records and line.lstrip().startswith("["):
                    return [parse(d) for d in json.loads(line + fh.read())][:limit]
                where = f"At line {number}: "
                records.append(parse(json.loads(line)))
                if limit is not None and len(records) >= limit:
                    break
        return records
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ParameterError(
            f"The '{name}' file {str(path)!r} must hold measurement records as JSON, JSON lines or "
            f"CSV (as `dltune bench --out`, `kb build` and `kb calibrate` write them). {where}{detail}"
        ) from None


def to_dataframe(records: Iterable[Measurement | dict[str, Any]]):
    """A pandas DataFrame, one row per record (a :class:`Measurement` or its dict), dotted
    column names."""
    import pandas as pd

    records = as_list_of("records", records, Measurement, Measurement.from_dict)
    return pd.DataFrame([r.flat() for r in records])
