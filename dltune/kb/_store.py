"""Knowledge-base storage: an append-only JSON-lines file of measurement records.

Each line is a :class:`~dltune.measure.Measurement` dict plus a ``kb`` entry (the run's key,
suite, kind and round). Appends are flushed and fsync'ed line by line, so a build killed at
any moment leaves every finished run on disk and at most one torn last line, which readers
skip. The shipped knowledge base is the same format, gzip-compressed, inside the package: one
file per suite.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_out_dir
from dltune.measure import Measurement
from dltune.measure._shipped import (  # re-exported: the knowledge base's readers
    SHIPPED_NAME,
    SHIPPED_SUITES,
    load_shipped_records,
    package_kb_dir,
    read_jsonl,
    shipped_calibration_dir,
    shipped_calibration_paths,
    shipped_kb_path,
    shipped_kb_paths,
    shipped_provenance_path,
)

__all__ = [
    "RecordStore",
    "SHIPPED_NAME",
    "SHIPPED_SUITES",
    "read_jsonl",
    "shipped_kb_path",
    "shipped_kb_paths",
    "shipped_provenance_path",
    "load_shipped_records",
    "export_kb",
    "export_calibration",
    "shipped_calibration_paths",
]

class RecordStore:
    """The records of one knowledge-base build folder (``records.jsonl``).

    Not safe for two writers at once; :func:`~dltune.kb.build_kb` holds a lock file for that.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "records.jsonl"

    def entries(self) -> list[dict[str, Any]]:
        """Every stored line (measurement dict with its ``kb`` entry)."""
        return list(read_jsonl(self.path)) if self.path.exists() else []

    def done_keys(self) -> set[str]:
        return {e["kb"]["key"] for e in self.entries() if isinstance(e.get("kb"), dict)}

    def records(self) -> list[Measurement]:
        return [Measurement.from_dict(e) for e in self.entries()]

    def append(self, record: Measurement, kb: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**record.to_dict(), "kb": kb}, sort_keys=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def export_kb(source: str | Path, out: str | Path | None = None) -> dict[str, Any]:
    """Compress a build folder's records and provenance into ``out`` (default: the package).

    Writes ``<suite>.jsonl.gz`` (records, in the order measured) and ``<suite>_provenance.json``,
    named after the folder's suite (:func:`folder_suite`), so one suite never replaces
    another's file; returns a summary with the suite.

    Raises:
        ParameterError: a folder with no records, mixing suites, or, exported into the
            package, of a suite the package does not ship (``SHIPPED_SUITES``).
    """
    source = Path(source)
    suite = folder_suite(source)
    target = check_out_dir("out", out if out is not None else package_kb_dir())
    if suite not in SHIPPED_SUITES and target.resolve() == package_kb_dir().resolve():
        raise ParameterError(
            f"The 'source' folder's suite must be one of {_listed(SHIPPED_SUITES)} to ship in the "
            f"package. Got {suite!r} instead.")
    return {**_export(source, target, ok_only=False, name=suite), "suite": suite}


def folder_suite(source: str | Path) -> str:
    """The suite of a build folder's runs: its provenance's (``dltune kb build --suite``) and its
    records' ``kb.suite``. Runs of a suite the package does not ship on its own (``many-cores``:
    reference workloads at more threads) go with the one shipped suite among them.

    Raises:
        ParameterError: no records, or runs of two shipped suites, or of two other suites.
    """
    source = Path(source)
    store = _store_of(source)
    provenance = source / "provenance.json"
    named = json.loads(provenance.read_text()).get("suite") if provenance.exists() else None
    suites = {str(s) for s in [named, *((e.get("kb") or {}).get("suite") for e in store.entries())] if s}
    shipped = suites & set(SHIPPED_SUITES)
    one = shipped if shipped else suites
    if len(one) != 1:
        raise ParameterError(f"The 'source' folder must hold the runs of one suite. "
                             f"Got {_listed(sorted(one)) or 'none'} instead.")
    return one.pop()


def _listed(names: Any) -> str:
    return ", ".join(repr(n) for n in names)


def _store_of(source: Path) -> RecordStore:
    store = RecordStore(source)
    if not store.path.exists():
        raise ParameterError(f"The 'source' folder {str(source)!r} holds no records.jsonl.")
    return store


def _export(source: Path, out: Path, ok_only: bool, name: str) -> dict[str, Any]:
    store = _store_of(source)
    entries = [e for e in store.entries() if not ok_only or e.get("status") == "ok"]
    target = out / f"{name}.jsonl.gz"
    # mtime=0 keeps the compressed file byte-identical for identical records.
    with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        for entry in entries:
            fh.write((json.dumps(entry, sort_keys=True) + "\n").encode())
    provenance_src = source / "provenance.json"
    provenance = json.loads(provenance_src.read_text()) if provenance_src.exists() else {}
    provenance["shipped_records"] = len(entries)
    provenance["shipped_ok"] = sum(1 for e in entries if e.get("status") == "ok")
    (out / f"{name}_provenance.json").write_text(json.dumps(provenance, indent=1, sort_keys=True))
    return {"records": len(entries), "ok": provenance["shipped_ok"], "path": str(target)}


def export_calibration(source: str | Path, out: str | Path | None = None) -> dict[str, Any]:
    """Ship a ``dltune kb calibrate`` folder: its records (successful runs only) and provenance
    go to ``out`` (default: the package's ``kb/calibrations/``), named after the folder
    (``calibration-<machine digest>``)."""
    source = Path(source)
    out = check_out_dir("out", out if out is not None else shipped_calibration_dir())
    return _export(source, out, ok_only=True, name=source.name)
