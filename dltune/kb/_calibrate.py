"""``dltune kb calibrate``: measure how fast this machine runs what the knowledge base measured.

Quick (the default, at most 2 minutes on 2 cores): two epochs of a reference workload per model
family at each batch size and thread count of the grid, per framework (``SUITES["quick"]``),
each large enough that compute is most of an epoch at the larger batch size. ``PerformanceModel``
fits from them this machine's throughput of each layer kind and its per-run and per-step
overheads as multipliers of the knowledge base's (``CalibrationMixin._fit_machine_kinds``):
time = overhead + work / throughput, the overheads told apart from the work by the two batch
sizes (steps per sample) and by each probe's first epoch against the whole run.
Full (``full=True``), described below, measures whole knowledge-base runs instead.

The shipped knowledge base was measured on one machine. On another, the surrogates' training
times are off by whatever that machine's speed is (a 2-vCPU Intel Xeon VM ran the knowledge
base's digits LeNet about 3x slower than the build machine) and ``recommend`` can only flag the
hardware and widen the interval. Calibration measures a small suite here (the first
configurations of three reference workloads, about 60 runs; on a machine with more than 2
usable cores each space-filling configuration once more with all of them); the records are kept in
``<cache>/kb/calibration-<machine>/`` and every fitted model includes them, so the training-time
surrogate learns this machine's speed factor per framework (``PerformanceModel.fit``) and the
machine counts as measured. ``dltune kb export --calibration`` ships such a folder in the
package (``dltune/kb/calibrations/``): every install then knows that machine's speed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dltune.config._goals import refuse_renamed
from dltune.kb._build import BuildResult, build_kb, plan_build
from dltune.kb._suite import CALIBRATION_PLAN, QUICK_PLAN, PlannedRun
from dltune.measure._shipped import calibration_records  # re-exported

__all__ = ["calibrate_machine", "calibration_dir", "calibration_plan", "calibration_records"]

# The quick calibration's records go to ``<calibration folder>-quick``: ``calibration_records``
# reads every ``calibration-*`` folder, and a full calibration's folder stays as it was.
_QUICK_SUFFIX = "-quick"


def _suite_and_folder(full: bool, out: str | Path | None) -> tuple[str, Path | str, dict[str, int]]:
    if full:
        return "calibration", out if out is not None else calibration_dir(), CALIBRATION_PLAN
    folder = calibration_dir()
    return "quick", out if out is not None else folder.with_name(folder.name + _QUICK_SUFFIX), QUICK_PLAN


def calibration_dir(hardware: dict[str, Any] | None = None) -> Path:
    """This machine's (or ``hardware``'s) calibration folder under the cache."""
    from dltune._paths import cache_dir
    from dltune.surrogate._machines import machine_key

    if hardware is None:
        from dltune.hardware import Hardware

        hardware = Hardware.detect().to_dict()
    # Named without the BLAS kernels (machine_key's since 2026-12-05): the folders made before
    # keep their names.
    digest = hashlib.sha256(machine_key(hardware, kernels=False).encode()).hexdigest()[:10]
    return cache_dir() / "kb" / f"calibration-{digest}"


def calibrate_machine(
    frameworks: list[str] | None = None,
    out: str | Path | None = None,
    time_budget_s: float | None = None,
    progress: bool | Callable[[dict[str, Any]], None] = False,
    command: str | None = None,
    quiet_wait_s: float = 0.0,
    full: bool = False,
    **renamed: Any,
) -> BuildResult:
    """Measure the calibration suite on this machine (resumable, like :func:`build_kb`, whose
    ``quiet_wait_s`` it passes on); no run starts after ``time_budget_s`` seconds.

    Quick (the default): the probes of ``SUITES["quick"]`` at every thread count of this
    machine's grid. ``full``: the first knowledge-base configurations of three workloads, and on
    a machine with more than 2 usable cores each once more with all of them: the knowledge base
    measured 1 and 2 threads, and the surrogates learn from these what more threads gain here."""

    refuse_renamed("calibrate_machine", renamed)
    suite, folder, design = _suite_and_folder(full, out)
    return build_kb(suite, folder, frameworks, time_budget_s, progress=progress, command=command,
                    quiet_wait_s=quiet_wait_s, all_cores=True, **design)


def calibration_plan(
    frameworks: list[str] | None = None,
    out: str | Path | None = None,
    time_budget_s: float | None = None,
    quiet_wait_s: float = 0.0,
    full: bool = False,
) -> list[PlannedRun]:
    """The runs :func:`calibrate_machine` with the same arguments measures on this machine,
    after the checks it makes before its first run (:func:`plan_build`); writes nothing."""
    suite, folder, design = _suite_and_folder(full, out)
    return plan_build(suite, folder, frameworks, time_budget_s, quiet_wait_s=quiet_wait_s,
                      all_cores=True, **design).runs
