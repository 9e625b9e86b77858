"""The measurement records shipped in the package and kept in the cache: the knowledge base
(one file per shipped suite, ``dltune/kb/<suite>.jsonl.gz``) and the calibrations
(``dltune/kb/calibrations/``, and ``<cache>/kb/calibration-*/``), as JSON lines of
:class:`~dltune.measure.Measurement` dicts.

Records layer: the knowledge base (``dltune.kb``) writes these files, and it and the
surrogates' loader read them here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# read_jsonl is the records' one JSON-lines reader, re-exported for the knowledge base.
from dltune.measure._record import Measurement, read_jsonl

__all__ = [
    "SHIPPED_NAME",
    "SHIPPED_SUITES",
    "calibration_records",
    "load_shipped_records",
    "package_kb_dir",
    "read_jsonl",
    "shipped_calibration_dir",
    "shipped_calibration_paths",
    "shipped_kb_path",
    "shipped_kb_paths",
    "shipped_provenance_path",
]

SHIPPED_NAME = "reference"
# The suites the package ships, each as ``<suite>.jsonl.gz``, read in this order: named, not
# discovered, so a build folder of another suite exported into the package is refused.
SHIPPED_SUITES = (SHIPPED_NAME, "families")


def package_kb_dir() -> Path:
    """The package's ``dltune/kb/`` folder, where the knowledge base is shipped."""
    return Path(__file__).resolve().parent.parent / "kb"


def shipped_kb_path() -> Path:
    """The reference suite's file of the shipped knowledge base (the suite the study report
    compares with the published study)."""
    return package_kb_dir() / f"{SHIPPED_NAME}.jsonl.gz"


def shipped_kb_paths() -> list[Path]:
    """The files of the shipped knowledge base, one per shipped suite present, reference first."""
    paths = [package_kb_dir() / f"{suite}.jsonl.gz" for suite in SHIPPED_SUITES]
    return [p for p in paths if p.exists()]


def shipped_provenance_path() -> Path:
    return package_kb_dir() / f"{SHIPPED_NAME}_provenance.json"


def load_shipped_records(path: str | Path | None = None) -> list[Measurement]:
    """The records of ``path``, else of every shipped suite (:func:`shipped_kb_paths`); empty
    when none is shipped."""
    paths = [Path(path)] if path is not None else shipped_kb_paths()
    return [Measurement.from_dict(e) for p in paths if p.exists() for e in read_jsonl(p)]


def shipped_calibration_dir() -> Path:
    return package_kb_dir() / "calibrations"


def shipped_calibration_paths(folder: str | Path | None = None) -> list[Path]:
    """The calibration records shipped in the package (``dltune/kb/calibrations/``, or
    ``folder``): one file per machine that ``dltune kb calibrate`` measured and
    :func:`dltune.kb.export_calibration` shipped, so that machine's speed is known without
    calibrating."""
    folder = Path(folder) if folder is not None else shipped_calibration_dir()
    return sorted(folder.glob("*.jsonl.gz")) if folder.is_dir() else []


def _records_of(path: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(path))


def calibration_records(shipped: bool = True, cache: bool = True) -> list[dict[str, Any]]:
    """Every calibration record in the cache (with ``cache``), and with ``shipped`` those
    shipped in the package (any machine's: each is calibrated on its own), marked
    ``kb.shipped``; a run in both counts once, as the cache's (made on this machine)."""
    from dltune._paths import cache_dir, while_unchanged

    here = sorted((cache_dir() / "kb").glob("calibration-*/records.jsonl")) if cache else []
    paths = [(p, False) for p in here] + [(p, True) for p in (shipped_calibration_paths() if shipped else [])]
    records: dict[str, dict[str, Any]] = {}
    for path, in_package in paths:
        # Parsed again only when the file changed: every recommend call reads them, to notice a
        # calibration made since, and parsing took 10 of a repeated call's 15 ms.
        for e in while_unchanged(path, _records_of, []):
            key = str(e.get("id"))
            if e.get("status") == "ok" and key not in records:
                # A copy each call: the parsed records are kept for the next.
                records[key] = dict(e, kb=dict(e.get("kb") or {}, shipped=True)) if in_package else dict(e)
    return list(records.values())
