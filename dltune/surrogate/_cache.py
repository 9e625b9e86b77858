"""The default fitted model: the shipped knowledge base plus the user's own records (their
storage's, and this cache's ``dltune kb calibrate`` records).

Fitted models are cached as ``<cache>/surrogates/<key>.npz`` where the key hashes everything
the fit depends on (model format, the knowledge-base files, the ids of the user's stored
records, extra records); a change in any of them means a new key and a refit. A fit on the
shipped knowledge base and calibrations alone ships in the package (``kb/surrogates/``), so a
fresh install does not fit on its first ``recommend``. Loading reads only arrays and JSON (no
pickle). The cache keeps the :data:`CACHE_KEEP` fits used last (about 1.4 MB each with the
shipped knowledge base): every change of the user's records means a new key, and the fits of
older keys would otherwise pile up, one per ``tune`` session.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._log import logger
from dltune._paths import while_unchanged
from dltune.measure._shipped import (
    calibration_records,
    load_shipped_records,
    package_kb_dir,
    shipped_kb_path,
    shipped_kb_paths,
)
from dltune.measure._storage_reader import read_storage
from dltune.surrogate._model import FORMAT_VERSION, PerformanceModel
from dltune.surrogate._records import is_probe
from dltune.surrogate._split import with_probes

__all__ = ["default_storage", "export_shipped_model", "fitted_model", "load_storage_measurements",
           "clear_memory_cache", "shipped_model_dir", "shipped_model_key"]

_MEMORY: dict[str, PerformanceModel] = {}
# Cached fits kept on disk, the most recently used first (loaded or written).
CACHE_KEEP = 8


def clear_memory_cache() -> None:
    """Forget the models fitted or loaded in this process (the disk cache stays)."""
    _MEMORY.clear()


def default_storage() -> str | None:
    """The user's storage: ``$DLTUNE_STORAGE``, else ``./dltune.db`` when it exists."""
    env = os.environ.get("DLTUNE_STORAGE")
    if env:
        return env
    return "sqlite:///dltune.db" if Path("dltune.db").exists() else None


def load_storage_measurements(storage: str) -> list[dict[str, Any]]:
    """Measurement records stored in an Optuna storage
    (:func:`dltune.measure._storage_reader.read_storage`), one per id.

    Raises:
        ParameterError: a URL that is no database URL, or no whole SQLite database.
        StorageError: a storage that cannot be reached.
    """
    return read_storage(
        storage, "recommend fits on the records 'dltune tune', 'study' and 'bench' stored there")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _shipped_digest(path: Path) -> str:
    # Hashed again only when the file changed: every recommend call keys its fit on it.
    return while_unchanged(path, _sha256, "none")


def _fit_key(kb_files: Path | Sequence[Path], stored: Sequence[dict[str, Any]],
             extra: Sequence[dict[str, Any]]) -> str:
    """What a fit depends on: the model format, the knowledge-base file(s), the ids of the stored
    (and calibration) records, whether a calibration record was shipped or made here, and the
    extra records."""
    files = [kb_files] if isinstance(kb_files, Path) else list(kb_files)
    digests = [_shipped_digest(path) for path in files] or ["none"]
    key_parts = [
        FORMAT_VERSION,
        digests,
        sorted(str(r.get("id")) + ("@shipped" if (r.get("kb") or {}).get("shipped") else "") for r in stored),
        hashlib.sha256(json.dumps(list(extra), sort_keys=True, default=str).encode()).hexdigest(),
    ]
    return hashlib.sha256(json.dumps(key_parts, default=str).encode()).hexdigest()[:24]


def shipped_model_dir() -> Path:
    """The package's ``kb/surrogates/``: the surrogates fitted on the shipped knowledge base and
    the shipped calibrations, written by :func:`export_shipped_model`."""
    return package_kb_dir() / "surrogates"


def shipped_model_key() -> str:
    """The cache key of a fit on the shipped knowledge base and the shipped calibrations alone:
    what ``recommend`` fits on an install with no records of its own and no calibration in its
    cache."""
    return _fit_key(shipped_kb_paths(), calibration_records(shipped=True, cache=False), [])


def export_shipped_model(out: str | Path | None = None) -> dict[str, Any]:
    """Fit the surrogates on the shipped knowledge base (every shipped suite) and the shipped
    calibrations and write them to ``out`` (default: :func:`shipped_model_dir`) as
    ``<key>.npz``, removing the files of other keys there; returns a summary.

    A fresh install then loads them on its first ``recommend`` instead of fitting (about 16 s
    on 2 cores). ``dltune kb export`` calls this after shipping records; a change of the model
    format, the knowledge base or the shipped calibrations changes the key, and until this runs
    again the first ``recommend`` fits as before.
    """
    kb_files = shipped_kb_paths()
    calibrations = calibration_records(shipped=True, cache=False)
    key = _fit_key(kb_files, calibrations, [])
    records = _unique([r.to_dict() for r in load_shipped_records()] + calibrations)
    if not records:
        raise ParameterError(f"No shipped knowledge base to fit on: {str(shipped_kb_path())!r} is missing.")
    out = Path(out) if out is not None else shipped_model_dir()
    path = PerformanceModel().fit(records).save(out / f"{key}.npz")
    for old in out.glob("*.npz"):
        if old != path:
            old.unlink()
    return {"key": key, "records": len(records), "path": str(path),
            "bytes": path.stat().st_size}


def _unique(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with distinct ids, the first of each kept: one run counts once."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        out.setdefault(str(record.get("id")), record)
    return list(out.values())


def _load(path: Path) -> PerformanceModel | None:
    if not path.exists():
        return None
    try:
        return PerformanceModel.load(path)
    except (OSError, ValueError, KeyError):
        return None  # a torn or foreign file: refit (and, in the cache, overwrite it)


def fitted_model(
    records: Sequence[Any] | None = None,
    storage: str | None = "default",
    kb_path: str | Path | None = None,
    refit: bool = False,
    calibration: bool | None = None,
) -> PerformanceModel:
    """The surrogate model for ``recommend``: fitted once, then loaded from the cache.

    With no records of the user's own and no calibration in the cache, the model is the one
    shipped in the package (:func:`export_shipped_model`), when it was fitted on the same
    knowledge base and calibrations; else it is fitted here on first use and cached.

    Args:
        records: extra measurement records (:class:`Measurement`, dicts, or paths of record
            files) to fit on besides the knowledge base.
        storage: an Optuna storage URL whose trials' records are added; ``"default"`` means
            :func:`default_storage`; None: none.
        kb_path: the knowledge-base file (default: the shipped ones, every suite's).
        refit: ignore the caches and the shipped model.
        calibration: add the records ``dltune kb calibrate`` keeps in the cache (they teach
            the training-time surrogate how fast those machines run the shipped knowledge
            base's workloads); default: when fitting on the shipped knowledge base.
    """
    kb_files = [Path(kb_path)] if kb_path is not None else shipped_kb_paths()
    storage = default_storage() if storage == "default" else storage
    extra = _extra_records(records)
    # The user's records are read every time (SQLite directly: milliseconds); the key hashes
    # their ids, so a storage that changes only by other studies' trials does not force a refit.
    stored = load_storage_measurements(storage) if storage else []
    if calibration or (calibration is None and kb_path is None):
        stored = stored + calibration_records()
    key = _fit_key(kb_files, stored, extra)
    path = _cache_path(key)
    model = None if refit else _at_hand(key)
    if model is None and not refit and not extra:
        model = _with_new_probes(kb_files, stored)
        if model is not None:
            _save(model, path)
    if model is None:
        all_records = _unique(_kb_records(kb_files) + extra + stored)
        if not all_records:
            missing = str(kb_path) if kb_path is not None else str(shipped_kb_path())
            raise ParameterError(
                "No measurements to fit the surrogates on: the knowledge base file "
                f"{missing!r} is missing and no records were given."
            )
        # Seconds on 2 cores with the shipped knowledge base: say why nothing seems to happen.
        why = ("asked to refit" if refit else "the records it learns from changed"
               if any(path.parent.glob("*.npz")) else "first use")
        logger.info("fitting the surrogates on %s records (%s; cached afterwards) ...",
                    f"{len(all_records):,}", why)
        started = time.perf_counter()
        model = PerformanceModel().fit(all_records)
        logger.info("fitted in %.1f s", time.perf_counter() - started)
        _save(model, path)
    _MEMORY[key] = model
    return model


def _cache_path(key: str) -> Path:
    from dltune._paths import cache_dir

    return cache_dir() / "surrogates" / f"{key}.npz"


def _at_hand(key: str) -> PerformanceModel | None:
    """The fit of ``key`` made in this process, in the cache (marked used now) or shipped in
    the package; None where there is none."""
    if key in _MEMORY:
        return _MEMORY[key]
    path = _cache_path(key)
    model = _load(path)
    if model is not None:
        _touch(path)  # used now: the last to be pruned
        return model
    return _load(shipped_model_dir() / f"{key}.npz")


def _save(model: PerformanceModel, path: Path) -> None:
    try:
        model.save(path)
        _prune(path.parent, CACHE_KEEP)
    except OSError:
        pass  # a read-only cache only costs a refit next time


def _kb_records(kb_files: Sequence[Path]) -> list[dict[str, Any]]:
    return [r.to_dict() for f in kb_files for r in load_shipped_records(f)]


def _with_new_probes(kb_files: Sequence[Path], stored: Sequence[dict[str, Any]]) -> PerformanceModel | None:
    """The fit on the knowledge base and ``stored`` made from the fit without the quick
    calibration's probes made here (at hand: :func:`_at_hand`) in seconds, or None where that
    fit is not at hand: probes teach the machine layers only (:func:`~dltune.surrogate._split.with_probes`)."""
    new = [r for r in stored if is_probe(r) and not (r.get("kb") or {}).get("shipped")]
    if not new:
        return None
    added = {id(r) for r in new}
    base = _at_hand(_fit_key(kb_files, [r for r in stored if id(r) not in added], []))
    if base is None:
        return None
    started = time.perf_counter()
    model = with_probes(base, _unique(_kb_records(kb_files) + list(stored)))
    if model is not None:
        logger.info("updated the fit with %d calibration probes in %.1f s", len(new), time.perf_counter() - started)
    return model


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache: pruning then goes by when each fit was written


def _prune(folder: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used fits in ``folder``."""
    fits = []
    for path in folder.glob("*.npz"):
        if path.name.endswith(".tmp.npz"):
            continue  # another process writing its fit
        try:
            fits.append((path.stat().st_mtime, path.name, path))
        except OSError:
            continue  # deleted meanwhile by another process
    for _, _, path in sorted(fits, reverse=True)[keep:]:
        try:
            path.unlink()
        except OSError:
            pass  # deleted meanwhile by another process


def _extra_records(records: Iterable[Any] | None) -> list[dict[str, Any]]:
    from dltune.measure import load_records

    out: list[dict[str, Any]] = []
    for item in records or []:
        if isinstance(item, (str, os.PathLike)):
            loaded = load_records(item)
            if not loaded:  # a wrong file, most likely: the fit would silently leave it out
                raise ParameterError(f"The 'records' file {str(item)!r} holds no records.")
            out.extend(r.to_dict() for r in loaded)
        elif isinstance(item, dict):
            out.append(item)
        else:
            out.append(item.to_dict())
    return out
