"""The report's input: every kind of record from a storage or a file, as one tidy DataFrame.

A storage holds the study's records (their phases: ``defaults``, ``sweep:batch_size``, ...),
``dltune bench``'s (phase ``bench``), ``dltune tune``'s trials (``tune``), the framework's own
preset tune measured beside them (``tune_preset``) and its best trials measured again with
another seed (``tune_repeat``). The shipped knowledge base is read for the same workload.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._storage_url import default_storage_url, require_database
from dltune.measure._store import StudyRecord

__all__ = ["BENCH_PHASE", "OUTSIDE_STUDY", "REPEAT_PHASE", "TUNE_PHASE", "TUNE_PRESET_PHASE", "kb_entries",
           "load_1m", "load_study_records", "load_tag", "records_frame", "thread_label"]

BENCH_PHASE = "bench"
TUNE_PHASE = "tune"
TUNE_PRESET_PHASE = "tune_preset"
REPEAT_PHASE = "tune_repeat"
#: The phases of records measured outside a study; their labels name no configuration.
OUTSIDE_STUDY = frozenset({BENCH_PHASE, TUNE_PHASE, TUNE_PRESET_PHASE, REPEAT_PHASE})


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
    """Every record from a storage URL or a records file (not both), of every workload or of
    ``workload`` only (its name, ``digits-lenet``, or its data set's, ``digits``).
    """
    if storage is not None and records is not None:
        raise ParameterError("Give either 'storage' or 'records', not both.")
    if records is not None:
        recs = _read_file(Path(records))
        source = str(records)
    else:
        url = require_database(storage or default_storage_url(),
                               "measure with 'dltune bench', 'dltune tune' or "
                               "'dltune study' first, or pass --records")
        recs = _storage_records(url)
        source = url
    if workload is not None:
        recs = [r for r in recs if workload in (r.measurement.workload.get("name"),
                                                r.measurement.workload.get("dataset"))]
    if not recs:
        wanted = f" for workload {workload!r}" if workload else ""
        raise ParameterError(f"No records{wanted} in {source}. Measure some first: 'dltune bench', "
                             "'dltune tune' or 'dltune study'.")
    return recs


def _storage_records(url: str) -> list[StudyRecord]:
    """Every record in the storage at ``url``, each with the phases that say what measured it."""
    from dltune.measure._codec import PRESET_PREFIX, REPEAT_PREFIX, STUDY_PREFIXES, decode_record
    from dltune.measure._storage import open_storage
    from dltune.measure._store import (
        BENCH_PREFIX,
        STUDY_PREFIX,
        _optuna,
        _study_records,
        load_storage_records,
    )

    recs = load_storage_records(url)  # the study's and tune's trials; checks the URL
    optuna = _optuna()
    opened = open_storage(url, heartbeat=False)
    for name in optuna.get_all_study_names(storage=opened):
        study = optuna.load_study(study_name=name, storage=opened)
        if name.startswith(BENCH_PREFIX):
            recs += _study_records(study, BENCH_PHASE)
            continue
        if name.startswith(STUDY_PREFIX):
            continue
        attrs = study.user_attrs
        for attr in sorted(attrs):
            # A long record is stored in chunks under ``<name>.<i>`` with ``<name>.chunks``.
            record_name = attr.removesuffix(".chunks")
            if not record_name.startswith(STUDY_PREFIXES):
                continue
            record = decode_record(attrs, record_name)
            if record is None:
                continue
            if record_name.startswith(PRESET_PREFIX):
                phase, label = TUNE_PRESET_PHASE, record_name[len(PRESET_PREFIX):]
            else:
                phase, label = REPEAT_PHASE, f"trial {record_name[len(REPEAT_PREFIX):]} again"
            recs.append(StudyRecord(record, [phase], None, label, name))
    return recs


def load_1m(entry: dict[str, Any]) -> float | None:
    """The 1-minute load average a record was measured under, where it carries one: the knowledge
    base's ``kb.load_1m``, else ``metrics.load_1m``."""
    for part in ("kb", "metrics"):
        value = (entry.get(part) or {}).get("load_1m")
        if isinstance(value, (int, float)):
            return float(value)
    return None


def load_tag(rows) -> str:
    """``, under 1-minute load 1.0–1.3 on 2 cores``: the load ``rows`` (of ``records_frame``)
    started under, named by every finding on time or CPU use; empty when none recorded it."""
    known = rows[rows["load_1m"].notna()]
    if known.empty:
        return ""
    lo, hi = f"{known['load_1m'].min():.1f}", f"{known['load_1m'].max():.1f}"
    cores = known["usable_cores"].max()
    return f", under 1-minute load {lo if lo == hi else f'{lo}–{hi}'}" + (
        "" if cores != cores else f" on {int(cores)} cores")


def kb_entries(workloads: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Workload name -> the shipped knowledge base's records (dicts with their ``kb`` entry) of
    that workload: the same name and, where both say, the same data fingerprint."""
    from dltune.measure._shipped import read_jsonl, shipped_kb_path

    path = shipped_kb_path()
    wanted = {w.get("name"): w.get("fingerprint") for w in workloads}
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in read_jsonl(path) if path.exists() else []:
        w = entry.get("workload") or {}
        name = w.get("name")
        if name in wanted and (wanted[name] is None or w.get("fingerprint") in (None, wanted[name])):
            out.setdefault(name, []).append(entry)
    return out


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
            "source": rec.source,
            "seed": c.get("seed"),
            # The configuration but its seed: a repeat is its trial's setting with another seed.
            "setting": json.dumps({k: v for k, v in c.items() if k != "seed"}, sort_keys=True,
                                  default=str),
            "repeats": len(x.get("repeats") or []) or 1,
            "train_time_min_s": x.get("train_time_s_min"),
            "train_time_max_s": x.get("train_time_s_max"),
            "load_1m": load_1m({"metrics": x}),
            "usable_cores": (m.hardware or {}).get("usable_cores"),
        })
    frame = pd.DataFrame(rows)
    for col in ("learning_rate", "train_time_s", "test_time_s", "accuracy_pct", "cpu_pct", "peak_mb",
                "train_time_min_s", "train_time_max_s", "load_1m", "usable_cores"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame
