"""The report's input: study records from a storage or a file, as one tidy DataFrame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._storage_url import default_storage_url, require_database
from dltune.measure._store import StudyRecord

__all__ = ["load_study_records", "records_frame", "thread_label"]


def thread_label(threads: dict[str, Any] | None) -> str:
    """A short name for a thread setting: ``default``, ``intra 2, blas 1``, ``1 core``..."""
    t = threads or {}
    if all(t.get(k) is None for k in ("intra_op", "inter_op", "blas", "cores")):
        return "default"
    if t.get("cores") is not None:
        return f"{t['cores']} core" + ("s" if t["cores"] > 1 else "")
    parts = [f"intra {t.get('intra_op') or '-'}"]
    if (t.get("inter_op") or 1) != 1:
        parts.append(f"inter {t['inter_op']}")
    blas = t.get("blas") if t.get("blas") is not None else t.get("intra_op")
    parts.append(f"blas {blas or '-'}")
    return ", ".join(parts)


def _read_file(path: Path) -> list[StudyRecord]:
    from dltune.measure import load_records

    # recommend's reader (and its refusals), keeping the study phases written beside each record.
    return load_records(path, parse=StudyRecord.from_dict)


def load_study_records(
    storage: str | None = None, records: str | Path | None = None, workload: str | None = None
) -> list[StudyRecord]:
    """Records of one workload from a storage URL or a records file (not both).

    ``workload`` may be the workload name (``digits-lenet``) or the data set name; it is needed
    only when the source holds more than one workload.
    """
    from dltune.measure._store import load_storage_records

    if storage is not None and records is not None:
        raise ParameterError("Give either 'storage' or 'records', not both.")
    if records is not None:
        recs = _read_file(Path(records))
        source = str(records)
    else:
        url = require_database(storage or default_storage_url(),
                               "run 'dltune study' first, or pass --records")
        recs = load_storage_records(url)
        source = url
    names = sorted({r.measurement.workload.get("name", "?") for r in recs})
    if workload is not None:
        recs = [r for r in recs if workload in (r.measurement.workload.get("name"),
                                                r.measurement.workload.get("dataset"))]
    elif len(names) > 1:
        raise ParameterError(
            f"The source holds several workloads ({', '.join(names)}); choose one with "
            f"--workload. Got none."
        )
    if not recs:
        wanted = f" for workload {workload!r}" if workload else ""
        raise ParameterError(f"No records{wanted} in {source}. Run 'dltune study' first.")
    return recs


def records_frame(records: list[StudyRecord]):
    """One row per record: configuration, phases, metrics (accuracy in %), thread label."""
    import pandas as pd

    rows = []
    for rec in records:
        m = rec.measurement
        c, x = m.config, m.metrics
        th = c.get("threads") or {}
        acc = x.get("test_accuracy")
        rows.append({
            "id": m.id,
            "key": rec.key,
            "label": rec.label,
            "phases": tuple(rec.phases),
            "framework": m.framework,
            "preset": c.get("preset_name") or c.get("preset"),
            "status": m.status,
            "ok": m.ok and acc is not None,
            "optimizer": c.get("optimizer"),
            "learning_rate": c.get("learning_rate"),
            "batch_size": c.get("batch_size"),
            "epochs": c.get("epochs"),
            "epochs_run": x.get("epochs_run"),
            "intra_op": th.get("intra_op"),
            "inter_op": th.get("inter_op"),
            "blas": th.get("blas") if th.get("blas") is not None else th.get("intra_op"),
            "cores": th.get("cores"),
            "threads": thread_label(th),
            "train_time_s": x.get("train_time_s"),
            "test_time_s": x.get("test_time_s"),
            "accuracy_pct": None if acc is None else 100.0 * acc,
            "cpu_pct": x.get("cpu_percent_mean"),
            "peak_mb": x.get("peak_rss_mb"),
            "error": (m.error or {}).get("message"),
            "started_at": m.started_at,
        })
    frame = pd.DataFrame(rows)
    for col in ("learning_rate", "train_time_s", "test_time_s", "accuracy_pct", "cpu_pct", "peak_mb"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame
