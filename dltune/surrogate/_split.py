"""Which records each part of the surrogates' fit learns from, and a fit brought up to date
with a quick calibration's probes without fitting its estimators again."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dltune.surrogate._calibration import MIN_MACHINE_RECORDS
from dltune.surrogate._features import FeatureEncoder, memory_as_now, record_row
from dltune.surrogate._machines import machine_key
from dltune.surrogate._records import (
    epochs_ran,
    intra_threads,
    is_calibration,
    is_probe,
    usable_records,
    workload_label,
)

__all__ = ["MIN_FRESH_RECORDS", "split_records", "with_probes"]

# Fresh-process records needed before the memory surrogate learns from them alone.
MIN_FRESH_RECORDS = 20


def split_records(encoder: FeatureEncoder, data: list[dict[str, Any]], rows: list[dict[str, Any]],
                  X: np.ndarray, groups: list[str], calibration: Sequence[bool],
                  probes: Sequence[bool]) -> dict[str, Any]:
    """The records' columns and which rows each part of the fit learns from: ``timed`` (the
    training-time estimators), ``memory_rows`` and ``current`` (memory), ``now`` (calibrations
    of machines the knowledge base measured) and ``probed`` (probes of other machines)."""
    # A run stopped early (diverged, pruned) trained fewer epochs than configured: its time
    # is that of the epochs it ran.
    ran = [epochs_ran(d, row) for d, row in zip(data, rows, strict=True)]
    machines = [machine_key(d.get("hardware") or {}) for d in data]
    # A machine that measured knowledge-base runs and was calibrated too: its calibration
    # says how fast it runs now (a virtual machine's host can change), not more of the same.
    measured = Counter(m for m, c, p in zip(machines, calibration, probes, strict=True) if not (c or p))
    now = [i for i, (m, c, p) in enumerate(zip(machines, calibration, probes, strict=True))
           if (c or p) and measured[m] >= MIN_MACHINE_RECORDS]
    # Another machine's probes describe it by its throughput per layer kind (_fit_machine_kinds).
    probed = [i for i, (m, p) in enumerate(zip(machines, probes, strict=True))
              if p and measured[m] < MIN_MACHINE_RECORDS]
    # Peak memory from runs in a new worker process where there are enough: a reused
    # worker's resident memory is the high-water mark of every run before it. Runs of a
    # backend that held more memory then than it does now are left out (memory_as_now).
    current = ([i for i in range(len(data)) if memory_as_now(data[i]) and not probes[i]]
               or list(range(len(data))))
    fresh = [i for i in current if rows[i]["fresh"]]
    return {
        "data": data, "rows": rows, "X": X, "groups": groups, "probes": list(probes), "machines": machines,
        "X_time": X if all(a is b for a, b in zip(ran, rows, strict=True)) else encoder.transform(ran),
        "seconds": np.array([d["metrics"]["train_time_s"] for d in data], dtype=np.float64),
        "frameworks": [d["config"]["framework"] for d in data],
        "models": [row["meta"].get("model") for row in rows],
        "threads": [intra_threads(d["config"], d.get("hardware") or {}) for d in data],
        "now": now, "probed": probed, "timed": sorted(set(range(len(data))) - set(now) - set(probed)),
        "current": current, "memory_rows": fresh if len(fresh) >= MIN_FRESH_RECORDS else current,
    }


def with_probes(model: Any, records: Iterable[Any]) -> Any | None:
    """``model`` (a fitted ``PerformanceModel``) refitted on ``records``, which must be the
    records it was fitted on plus quick-calibration probes, in seconds: a copy whose estimators
    are ``model``'s and whose calibrated part (``_fit_calibrated``) is fitted on ``records``.

    It equals a full fit on ``records``: probes are left out of everything the estimators learn
    (accuracy, training time, memory), and only the framework x model columns of the encoder
    could change with them. None where they do (a probe of a framework or model the records
    lack): the caller fits in full."""
    data = usable_records(records)
    rows = [record_row(d) for d in data]
    if FeatureEncoder().fit(rows).to_state() != model.encoder_.to_state():
        return None
    out = copy.deepcopy(model)
    X = out.encoder_.transform(rows)
    split = split_records(out.encoder_, data, rows, X, [workload_label(d) for d in data],
                          [is_calibration(d) for d in data], [is_probe(d) for d in data])
    out._fit_calibrated(split)
    out.n_records_ = len(data)
    return out
