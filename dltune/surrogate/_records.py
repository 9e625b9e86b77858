"""The measurement records the surrogates fit on: which are usable, and what they say (their
workload's label, intra-op threads, epochs run, runs measured again)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from dltune.measure._record import current_revision
from dltune.surrogate._features import _threads, memory_as_now, ran_in_new_process

__all__ = ["display_name", "epochs_ran", "intra_threads", "is_calibration", "is_probe", "remeasured", "usable_records",
           "workload_label"]


def _as_dict(record: Any) -> dict[str, Any]:
    return record if isinstance(record, dict) else record.to_dict()


def usable_records(records: Iterable[Any]) -> list[dict[str, Any]]:
    """The ``ok`` records with the metrics and meta-features the surrogates need, as dicts."""
    out = []
    for record in records:
        data = _as_dict(record)
        m = data.get("metrics") or {}
        meta = (data.get("workload") or {}).get("meta") or {}
        if data.get("status") != "ok" or not meta.get("flops_per_sample"):
            continue
        if not (m.get("train_time_s") or 0) > 0 or m.get("test_accuracy") is None:
            continue
        if not (m.get("peak_rss_mb") or 0) > 0:
            continue
        out.append(data)
    return out


def is_calibration(data: dict[str, Any]) -> bool:
    """A run of ``dltune kb calibrate --full``: a knowledge-base configuration measured again
    for this machine's speed."""
    return (data.get("kb") or {}).get("suite") == "calibration"


def is_probe(data: dict[str, Any]) -> bool:
    """A probe of the quick calibration (``dltune kb calibrate``): speed only, at one fixed rate."""
    return (data.get("kb") or {}).get("suite") == "quick"


def workload_label(data: dict[str, Any]) -> str:
    """A unique label of a record's workload (its data set's fingerprint tells apart equal names)."""
    w = data["workload"]
    return f"{display_name(w)}#{w.get('fingerprint', '')[:6]}"


def display_name(workload: dict[str, Any]) -> str:
    """A readable workload name: data set, its size / shape / classes / difficulty, model."""
    p = workload.get("dataset_params") or {}
    meta = workload.get("meta") or {}
    name = workload.get("dataset") or workload.get("name", "?")
    if p:
        shape = f"{meta.get('height', '?')}x{meta.get('width', '?')}x{meta.get('channels', '?')}"
        parts = [f"n={meta.get('n_train', p.get('n_train', '?'))}", shape,
                 f"k={meta.get('num_classes', '?')}"]
        if "difficulty" in p:
            parts.append(f"d={p['difficulty']}")
        name = f"{name}[{','.join(parts)}]"
    return f"{name}-{workload.get('model', '?')}"


def intra_threads(config: dict[str, Any], hardware: dict[str, Any]) -> int | None:
    """A run's intra-op threads as the features read them (as configured, else its pinned
    cores, else the usable cores); None when none is known."""
    intra, _ = _threads(config, hardware)
    return int(intra) if math.isfinite(intra) else None


def remeasured(data: Sequence[dict[str, Any]]) -> set[int]:
    """The records (indices) that measure again, in a new process, a configuration of a backend
    whose memory changed (a revision above 0) that a new process ran at an earlier revision
    (:func:`~dltune.surrogate._features.memory_as_now`): the knowledge base's fresh runs of a
    later revision (``FRESH_REVISIONS``), measured for their memory; the same configuration and
    seed as a run on record."""
    def key(d: dict[str, Any]) -> str:
        return workload_label(d) + json.dumps(d.get("config"), sort_keys=True, default=str)

    changed = [i for i, d in enumerate(data)
               if current_revision(str((d.get("config") or {}).get("framework"))) > 0
               and ran_in_new_process(d)]
    before = {key(data[i]) for i in changed if not memory_as_now(data[i])}
    return {i for i in changed if memory_as_now(data[i]) and key(data[i]) in before}


def epochs_ran(data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the epochs its record's run trained (fewer than configured if it stopped
    early); ``row`` itself when they are the configured ones."""
    ran = (data.get("metrics") or {}).get("epochs_run")
    if ran and ran != row["config"].get("epochs"):
        return dict(row, config=dict(row["config"], epochs=ran))
    return row
