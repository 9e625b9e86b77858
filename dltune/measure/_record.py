"""The versioned measurement record, and its JSON / CSV / DataFrame forms."""

from __future__ import annotations

import csv
import gzip
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import as_list_of, check_in_file
from dltune.backends._registry import BACKENDS

__all__ = [
    "SCHEMA_VERSION",
    "SUMMARY_COLUMNS",
    "Measurement",
    "current_revision",
    "html_table",
    "load_records",
    "read_csv",
    "read_jsonl",
    "revision_of",
    "save_records",
    "to_dataframe",
    "write_csv",
]

# 2: records keep their backend's revision (backend_revision).
SCHEMA_VERSION = 2

# Columns whose values stay strings in CSV even when they look like numbers.
_STRING_PREFIXES = ("versions.", "id", "status", "hardware.cpu_model", "hardware.fingerprint",
                    "hardware.target", "workload.fingerprint", "config.framework", "error.")


def current_revision(framework: str) -> int:
    """The revision a run of ``framework`` measures at now (0 for a backend dltune does not know)."""
    info = BACKENDS.get(framework)
    return info.revision if info is not None else 0


def revision_of(data: dict[str, Any]) -> int:
    """The backend revision a record's dict was measured at: 0 for one made before records
    kept it (schema version 1)."""
    return int(data.get("backend_revision") or 0)


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
    ``stderr_tail`` for failed runs. ``backend_revision`` is the revision of what its backend
    measured (:attr:`BackendInfo.revision <dltune.backends.BackendInfo>`), set when the record
    is made; a record of schema version 1, made before records kept it, reads as revision 0.
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
    backend_revision: int | None = None

    def __post_init__(self) -> None:
        if self.backend_revision is None:
            self.backend_revision = current_revision(self.framework)

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
        fields = {k: v for k, v in data.items() if k in known}
        fields["backend_revision"] = revision_of(data)
        return cls(**fields)

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

    def summary(self) -> dict[str, Any]:
        """The headline figures, :data:`SUMMARY_COLUMNS` (``to_dataframe``'s default columns)."""
        return {name: get(self) for name, get in _SUMMARY.items()}

    def __repr__(self) -> str:
        s = self.summary()
        text = (f"Measurement({_clip(s['status'])}: {_clip(s['framework'] or None)} on {_clip(s['workload'])} "
                f"(model {_clip(s['model'])}); {_clip(s['optimizer'])} lr={_num(s['learning_rate'])} "
                f"batch={_clip(s['batch_size'])} epochs={_clip(s['epochs'])} threads="
                f"{_clip(s['threads'])}; accuracy {_pct(s['accuracy'])}, train {_num(s['train_time_s'])} s, "
                f"test {_num(s['test_time_s'])} s, peak {_num(s['peak_memory_mb'])} MB; hardware "
                f"{_clip(s['hardware'])}; id {str(s['id'])[:8]}")
        if self.error:
            text += f"; {_clip(self.error.get('kind'))}: {_clip(self.error.get('message'), 160)}"
        return text + ")"

    def _repr_html_(self) -> str:
        summary = self.summary()
        rows = [(name, _pct(value) if name == "accuracy" else "-" if value is None else
                 _num(value) if isinstance(value, float) else value)
                for name, value in summary.items()]
        if self.error:
            rows.append(("error", f"{self.error.get('kind')}: {self.error.get('message')}"))
        return html_table(["field", "value"], rows, caption="Measurement")


# The summary columns: one name each, read from a record (threads: what the framework reported
# using, else what was asked).
_SUMMARY: dict[str, Callable[[Measurement], Any]] = {
    "framework": lambda r: r.framework,
    "workload": lambda r: r.workload.get("name"),
    "model": lambda r: r.workload.get("model"),
    "optimizer": lambda r: r.config.get("optimizer"),
    "learning_rate": lambda r: r.config.get("learning_rate"),
    "batch_size": lambda r: r.config.get("batch_size"),
    "epochs": lambda r: r.config.get("epochs"),
    "threads": lambda r: ((r.metrics.get("threads") or {}).get("intra_op")
                          or (r.config.get("threads") or {}).get("intra_op")),
    "accuracy": lambda r: r.metrics.get("test_accuracy"),
    "train_time_s": lambda r: r.metrics.get("train_time_s"),
    "test_time_s": lambda r: r.metrics.get("test_time_s"),
    "peak_memory_mb": lambda r: r.metrics.get("peak_rss_mb"),
    "status": lambda r: r.status,
    "hardware": lambda r: r.hardware.get("target"),
    "id": lambda r: r.id,
}
#: The columns of ``to_dataframe(records)``: accuracy a fraction, times in seconds, memory the
#: peak resident set in MB.
SUMMARY_COLUMNS = tuple(_SUMMARY)


def _clip(value: Any, chars: int = 48) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= chars else text[: chars - 3] + "..."


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else _clip(value)


def _pct(value: Any) -> str:
    return f"{100 * value:.2f}%" if isinstance(value, (int, float)) else "-"


def html_table(header: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> str:
    """A small HTML table (a notebook's ``_repr_html_``), every cell escaped."""
    from html import escape

    cells = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
    return ("<table>" + (f"<caption>{escape(caption)}</caption>" if caption else "")
            + "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>" + cells + "</table>")


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


class _BadLine(ValueError):
    """A line of a JSON-lines file that is not JSON; its text says which."""


def _json_items(path: Path) -> Iterator[tuple[str, Any]]:
    """Each item of a JSON list, or each line's value of JSON lines (gzip-compressed when the name
    ends in ``.gz``), with where it is (``"At line 3: "``).

    The one JSON-lines rule: a torn last line (one without its newline: an append cut off, as a
    killed ``kb build`` leaves it) is skipped; any other line that is not JSON raises
    :class:`_BadLine`.
    """
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as fh:
        first = True
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if first and line.lstrip().startswith("["):
                for index, item in enumerate(json.loads(line + fh.read()), 1):
                    yield f"At item {index}: ", item
                return
            first = False
            try:
                value = json.loads(line)
            except ValueError as exc:
                if not line.endswith("\n"):
                    return
                raise _BadLine(f"At line {number}: {exc}") from None
            yield f"At line {number}: ", value


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Each record dict of a JSON-lines file (or a JSON list), gzip-compressed when the name ends
    in ``.gz``, as the knowledge base and the calibrations are kept; a torn last line is skipped.

    Raises:
        ParameterError: a line before the last one is not JSON.
    """
    path = Path(path)
    try:
        for _, value in _json_items(path):
            yield value
    except ValueError as exc:
        raise ParameterError(f"The file {str(path)!r} must hold JSON lines. {exc}") from None


def _is_sqlite(path: Path) -> bool:
    """Whether the file starts as a SQLite database does (an unreadable one is read as records,
    to say why)."""
    from dltune._storage_url import _SQLITE_MAGIC

    try:
        with path.open("rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def load_records(source: str | Path, name: str = "records", limit: int | None = None,
                 parse: Callable[[dict[str, Any]], Any] | None = None) -> list[Any]:
    """Load measurement records from a storage or a file.

    Args:
        source: an Optuna storage URL (``"sqlite:///dltune.db"``, ``"postgresql://..."``), a
            SQLite database file (told by its header, such as ``"dltune.db"``), or a file of
            records: CSV (``.csv``), a JSON list, or JSON lines, gzip-compressed when the name ends
            in ``.gz`` (as ``dltune bench --out``, ``kb build`` and ``kb calibrate`` write them).
        name: the parameter that gave ``source``, named by the errors.
        limit: read no more than this many records: a quick look at what a large file holds.
        parse: makes each record of its dict (default :meth:`Measurement.from_dict`); a reader
            of records with more fields (a study's) passes its own.

    Returns:
        The records, a storage's study by study (each study's own before its trials').

    Raises:
        ParameterError: a missing file, a folder, a file that does not hold records, or a URL
            that is no database URL.
        StorageError: a storage that cannot be reached.
    """
    parse = parse or Measurement.from_dict
    url = source if isinstance(source, str) and "://" in source else None
    path = None if url else check_in_file(name, source)
    if path is not None and _is_sqlite(path):
        url = f"sqlite:///{path.resolve()}"
    if url:
        from dltune.measure._storage_reader import read_storage

        stored = read_storage(url, "load_records reads the records dltune stored there")
        return [parse(d) for d in stored[:limit]]
    where = ""
    try:
        if path.suffix == ".csv":
            return [parse(m.to_dict()) for m in read_csv(path)[:limit]]
        records = []
        for place, data in _json_items(path):
            where = place
            records.append(parse(data))
            if limit is not None and len(records) >= limit:
                break
        return records
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ParameterError(
            f"The '{name}' file {str(path)!r} must hold measurement records as JSON, JSON lines or "
            f"CSV (as `dltune bench --out`, `kb build` and `kb calibrate` write them). "
            f"{'' if isinstance(exc, _BadLine) else where}{detail}"
        ) from None


def to_dataframe(records: Iterable[Measurement | dict[str, Any]],
                 columns: str | Sequence[str] = "summary"):
    """A pandas DataFrame, one row per record (a :class:`Measurement` or its dict).

    Args:
        records: the records.
        columns: ``"summary"``: the headline figures, :data:`SUMMARY_COLUMNS` (accuracy a
            fraction, times in seconds, memory in MB); ``"all"``: every field, nested ones by
            dotted names (``"config.momentum"``, ``"metrics.cpu_percent_mean"``); or a list of
            names from either.

    Raises:
        ParameterError: ``records`` holds something else than records, or ``columns`` is no
            such value.
    """
    import pandas as pd

    records = as_list_of("records", records, Measurement, Measurement.from_dict)
    if isinstance(columns, str) and columns in ("summary", "all"):
        if columns == "all":
            return pd.DataFrame([r.flat() for r in records])
        return pd.DataFrame([r.summary() for r in records], columns=list(SUMMARY_COLUMNS))
    names = [] if isinstance(columns, str) else list(columns) if isinstance(columns, Iterable) else None
    if not names or not all(isinstance(n, str) for n in names):
        raise ParameterError("The 'columns' parameter must be 'summary', 'all' or a list of column "
                             f"names. Got {columns!r} instead.")
    for name in names:
        # A column of 'all' is a field's name, or a nested one's dotted (a record may lack it).
        if name not in SUMMARY_COLUMNS and name.partition(".")[0] not in Measurement.__dataclass_fields__:
            raise ParameterError(
                f"The 'columns' parameter must name columns of 'summary' ({', '.join(SUMMARY_COLUMNS)}) "
                f"or of 'all' (such as 'config.momentum'). Got {name!r} instead.")
    return pd.DataFrame([{**r.flat(), **r.summary()} for r in records], columns=names)
