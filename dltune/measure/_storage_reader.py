"""Every record in an Optuna storage, read through Optuna or, for a SQLite file, directly."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dltune._storage_url import require_database, sqlite_path, unreadable_database
from dltune.measure._codec import RECORD_NAMES, STUDY_PREFIXES, decode

__all__ = ["read_storage", "read_storage_records"]


def read_storage(url: str, needed_by: str) -> list[dict[str, Any]]:
    """The records stored in the storage at ``url`` (:func:`read_storage_records`): a SQLite
    file read directly, any other database through Optuna, opened as ``tune`` opens it.

    Args:
        url: the storage URL.
        needed_by: what the storage should hold, said when a SQLite file does not exist.

    Raises:
        ParameterError: a URL that is no database URL, or a SQLite file that does not exist or
            is no whole database.
        StorageError: a storage that cannot be reached.
    """
    path = sqlite_path(require_database(url, needed_by))
    if path is not None:
        return read_storage_records(path)
    from dltune.measure._storage import open_storage

    return read_storage_records(open_storage(url, heartbeat=False))


def read_storage_records(storage: Path | Any) -> list[dict[str, Any]]:
    """The records held in a storage's study and trial user attributes (:func:`decode`), one per
    id (the first), study by study, each study's own before its trials'.

    Args:
        storage: a SQLite database file, read with one query on Optuna's tables (no Optuna
            import; ``benchmarks/storage_read_speed.py`` measures the gain), or an opened Optuna
            storage, read through Optuna's public API.

    Raises:
        ParameterError: the SQLite file cannot be read as a database.
    """
    groups = _sqlite_attrs(storage) if isinstance(storage, Path) else _optuna_attrs(storage)
    records: dict[str, dict[str, Any]] = {}
    for attrs in groups:
        for record in decode(attrs):
            records.setdefault(str(record.get("id")), record)
    return list(records.values())


def _optuna_attrs(storage: Any) -> Iterable[Mapping[str, Any]]:
    import optuna

    for name in optuna.get_all_study_names(storage=storage):
        study = optuna.load_study(study_name=name, storage=storage)
        yield study.user_attrs
        for trial in study.get_trials(deepcopy=False):
            yield trial.user_attrs


# The attributes that may hold a record or a chunk of one (decode has the last word), ordered as
# Optuna lists them: study by study, the study's own first, then trial by trial.
_QUERY = """
SELECT t.study_id, 1, a.trial_id, a.trial_user_attribute_id, a.key, a.value_json
  FROM trial_user_attributes AS a JOIN trials AS t ON t.trial_id = a.trial_id WHERE {where}
UNION ALL
SELECT study_id, 0, 0, study_user_attribute_id, key, value_json
  FROM study_user_attributes WHERE {where}
ORDER BY 1, 2, 3, 4
"""


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _sqlite_attrs(path: Path) -> list[dict[str, Any]]:
    prefixes = [*RECORD_NAMES, *STUDY_PREFIXES]
    where = "(" + " OR ".join(["key LIKE ? ESCAPE '\\'"] * len(prefixes)) + ")"
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
            rows = conn.execute(_QUERY.format(where=where), [_like(p) for p in prefixes] * 2).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise unreadable_database(path, f"cannot be read ({exc})") from None
        return []  # a database without Optuna's tables holds no records
    except sqlite3.DatabaseError as exc:  # damaged past what check_sqlite_file sees
        raise unreadable_database(path, f"cannot be read ({exc})") from None
    groups: dict[tuple[int, int, int], dict[str, Any]] = {}
    for study_id, kind, trial_id, _, key, text in rows:
        try:
            groups.setdefault((study_id, kind, trial_id), {})[key] = json.loads(text)
        except (TypeError, ValueError):
            continue
    return list(groups.values())
