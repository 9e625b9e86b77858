"""Machines as the training-time and memory models tell them apart: which machine a hardware
description is, and how its factors scale the reference machine's predictions."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dltune.hardware._hardware import cpu_identity

__all__ = ["MachinesMixin", "blas_kernels", "machine_factor", "machine_key", "reference_machine",
           "thread_delta"]


def blas_kernels(hardware: dict[str, Any]) -> str | None:
    """The kernels OpenBLAS picked for this CPU (its ``architecture`` as threadpoolctl reports
    it, e.g. ``'SkylakeX'``), or None where no OpenBLAS was loaded or it did not say. A
    description's own ``blas_kernels`` (the model's ``hardware_`` entries) is taken as it is.

    The CPU model string and flags do not tell every two machines apart: machines with the same
    model string and flags can run the same runs at different speeds, and OpenBLAS's pick
    tells them apart because it reads the CPU's family and model, which the model string hides
    (docs/explanation/how-recommend-decides.md#the-surrogates).
    """
    if hardware.get("blas_kernels"):
        return str(hardware["blas_kernels"])
    kernels = sorted({str(b["architecture"]) for b in hardware.get("blas") or ()
                      if b.get("internal_api") == "openblas" and b.get("architecture")})
    return "+".join(kernels) if kernels else None


def machine_key(hardware: dict[str, Any], kernels: bool = True) -> str:
    """One machine as the training-time model tells machines apart: CPU identity
    (:func:`cpu_identity`), logical cores and memory (the 1-core affinity target of a machine
    is the same machine), and the BLAS kernels picked for it (:func:`blas_kernels`; not with
    ``kernels=False``, nor where unknown)."""
    memory = hardware.get("memory_gb")
    try:
        memory = round(float(memory))
    except (TypeError, ValueError):
        memory = None
    key = f"{cpu_identity(hardware)}|{hardware.get('logical_cores')}|{memory}"
    picked = blas_kernels(hardware) if kernels else None
    return f"{key}|{picked}" if picked else key


def reference_machine(machines: Iterable[str]) -> str:
    """The machine most records come from (the first seen among equals): the one the main
    training-time model is fitted on; every other is a factor against it, or has a model of its
    own with enough workloads (``PerformanceModel._fit_machine_time``)."""
    counts = Counter(machines)
    return max(counts, key=lambda m: counts[m])


def machine_factor(entry: dict[str, float], framework: str, model: str | None,
                   threads: int | None = None) -> float:
    """A machine's log factor for one framework and model: the pair's own, else the framework's,
    else the machine's over every framework (see ``PerformanceModel._fit_per_machine``); at
    ``threads`` intra-op threads beyond the most the reference machine's runs used, plus what
    that many threads gain there against the cost model's extrapolation (:func:`thread_delta`)."""
    return entry.get(f"{framework}/{model}", entry.get(framework, entry["*"])) + thread_delta(
        entry, framework, threads)


def thread_delta(entry: dict[str, float], framework: str, threads: int | None) -> float:
    """How much longer (log) a run at ``threads`` intra-op threads takes on a machine than its
    factor says, where its runs used more threads than the reference machine's (``"@"``: that
    count). Measured per framework at a thread count (``"<framework>@<n>"``, else over all its
    frameworks, ``"*@<n>"``), interpolated in log threads from 0 at ``"@"``, and beyond the
    most threads measured that count's. 0 up to ``"@"`` threads, or without such runs."""
    top = entry.get("@")
    if threads is None or top is None or threads <= top:
        return 0.0
    for prefix in (f"{framework}@", "*@"):
        points = sorted((int(k[len(prefix):]), v) for k, v in entry.items() if k.startswith(prefix))
        if points:
            return float(np.interp(math.log(threads), [math.log(top)] + [math.log(n) for n, _ in points],
                                   [0.0] + [v for _, v in points]))
    return 0.0


def _factors(factors: dict[str, dict[str, float]], machines: Sequence[str],
             frameworks: Sequence[str], models: Sequence[str | None],
             threads: Sequence[int | None] | None = None) -> np.ndarray:
    """Per row, its machine's factor for its framework, model and intra-op threads (1 for an
    uncalibrated machine)."""
    threads = threads if threads is not None else [None] * len(machines)
    return np.exp(np.array([machine_factor(factors[m], fw, model, n) if m in factors else 0.0
                            for m, fw, model, n in zip(machines, frameworks, models, threads, strict=True)]))


class MachinesMixin:
    """:class:`~dltune.surrogate.PerformanceModel`'s machines: which measured machine a
    description is, and its training times and memory there (the factors and models
    :class:`~dltune.surrogate._calibration.CalibrationMixin` fits)."""

    def calibrated_machines(self) -> list[str]:
        """The machines whose speed the model knows: the knowledge base's and each calibrated one."""
        self._check_fitted()
        return [self.reference_machine_, *sorted(self.machine_speed_)]

    def _machine_times(self, X: np.ndarray, machines: Sequence[str], frameworks: Sequence[str],
                       models: Sequence[str | None], threads: Sequence[int | None],
                       *times: np.ndarray) -> None:
        """Turn the main model's training times of these rows (the point, and the interval's
        ends when given) into their machines', in place: scaled by each machine's factor (the
        ends also widened by how far one of its workloads' ratio strays from the others', its
        ``"~"``), or its own model's where it has one."""
        if self.machine_speed_:
            factor = _factors(self.machine_speed_, machines, frameworks, models, threads)
            # A machine described by its throughput per layer kind (a quick calibration): the
            # factor of each row's own mix of work.
            kinds = self._kind_factors(X, machines, frameworks, threads)
            factor = np.where(np.isnan(kinds), factor, kinds)
            for t in times:
                t *= factor
            if len(times) == 3:
                stray = np.exp([self.machine_speed_[m].get("~", 0.0) if m in self.machine_speed_ else 0.0
                                for m in machines])
                low, high = times[1], times[2]
                low /= stray
                high *= stray
        for m, est in self.machine_time_.items():  # machines with a time model of their own
            covered = self.machine_time_info_[m]["frameworks"]
            own = np.array([mm == m and f in covered for mm, f in zip(machines, frameworks, strict=True)])
            if own.any():
                # The point only, or the point and both ends of the interval.
                for t, own_t in zip(times, est.predict_interval(X[own]), strict=False):
                    t[own] = own_t

    def threads_evidence(self, hardware: dict[str, Any]) -> dict[str, Any]:
        """The runs that support proposing more intra-op threads on ``hardware`` than the
        reference machine's runs used: its machine's runs with more (a calibration on its cores,
        or a knowledge-base slice from ``scripts/kb_many_cores.py``), counted by the fit
        (``"#*@<n>"``, ``"#<framework>@<n>"`` in its factors).

        Returns ``measured``, the most threads the reference machine's runs used; ``most``, the
        most a candidate may use there (``measured``, or the most its machine's runs used);
        ``machine`` (its hardware target, None without such runs); ``runs``, per thread count
        beyond, how many; ``frameworks``, per framework the same."""
        self._check_fitted()
        measured = int(self.threads_measured_.get(self.reference_machine_, self.threads_measured_.get("*", 1)))
        m = self.machine_of(hardware)
        runs: dict[int, int] = {}
        per_framework: dict[str, dict[int, int]] = {}
        for entry in (self.machine_speed_.get(m, {}), self.machine_now_.get(m, {})):
            for key, value in entry.items():
                if key.startswith("#") and "@" in key:
                    fw, n = key[1:].rsplit("@", 1)
                    counts = runs if fw == "*" else per_framework.setdefault(fw, {})
                    counts[int(n)] = max(counts.get(int(n), 0), int(value))
        targets = sorted((h.get("usable_cores") or 0, str(h.get("target"))) for h in self.hardware_
                         if machine_key(h) == m)
        return {"measured": measured, "most": max([measured, *runs]),
                "machine": targets[-1][1] if runs and targets else None,
                "runs": dict(sorted(runs.items())),
                "frameworks": {fw: dict(sorted(c.items())) for fw, c in sorted(per_framework.items())}}

    def machines_alike(self, hardware: dict[str, Any]) -> list[str]:
        """The measured machines ``hardware`` may be where its :func:`machine_key` was never
        measured: those of the same CPU, cores and memory, whatever their BLAS kernels (none
        where its key was measured, or no machine of that CPU was)."""
        key = machine_key(hardware)
        known = {machine_key(h) for h in self.hardware_}
        if key in known:
            return []
        base = machine_key(hardware, kernels=False)
        return sorted(m for m in known if m == base or m.startswith(base + "|"))

    def machine_of(self, hardware: dict[str, Any]) -> str:
        """``hardware``'s :func:`machine_key`; where the knowledge base knows no machine with
        those BLAS kernels (or the description does not say which: a hand-written one), the
        measured machine of the same CPU, cores and memory: the reference machine if it is one,
        else one with a time model of its own, else the first (sorted). (:meth:`hedge_machines`
        spans them all.)"""
        alike = self.machines_alike(hardware)
        if not alike:
            return machine_key(hardware)
        if self.reference_machine_ in alike:
            return self.reference_machine_
        return next((m for m in alike if m in self.machine_time_), alike[0])

    def time_source(self, hardware: dict[str, Any], framework: str) -> dict[str, Any] | None:
        """Where training times for ``framework`` on ``hardware`` come from when it is a machine
        with a time model of its own (its ``workloads`` and ``records``); None otherwise."""
        self._check_fitted()
        info = self.machine_time_info_.get(self.machine_of(hardware))
        return info if info and framework in info["frameworks"] else None

    def hedge_machines(self, pred: dict[str, np.ndarray], rows: Sequence[dict[str, Any]],
                       hardware: dict[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
        """Training times and memory of ``rows`` on ``hardware`` spanned over every measured
        machine it may be (:meth:`machines_alike`), where there are two or more: the point is
        their geometric mean, the interval reaches all of theirs. Machines of one CPU identity
        can differ in speed, told apart only by the kernels OpenBLAS picked
        (:func:`blas_kernels`); a description that names none, or names kernels never measured,
        cannot say which of them it is. Returns the predictions and a note
        (none where the machine is measured, or only one is alike)."""
        alike = self.machines_alike(hardware)
        if len(alike) < 2:
            return pred, []
        kernels = {machine_key(h): h.get("blas_kernels") for h in self.hardware_}
        spans = []
        for m in alike:
            as_m: dict[int, dict[str, Any]] = {}  # rows share their hardware dicts: one copy each
            spans.append(self.predict([dict(r, hardware=as_m.setdefault(
                id(r["hardware"]), dict(r["hardware"], blas=[], blas_kernels=kernels[m]))) for r in rows]))
        out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in pred.items()}
        for key in ("train_time_s", "peak_rss_mb"):
            out[key] = np.exp(np.mean([np.log(p[key]) for p in spans], axis=0))
            out[f"{key}_low"] = np.min([p[f"{key}_low"] for p in spans], axis=0)
            out[f"{key}_high"] = np.max([p[f"{key}_high"] for p in spans], axis=0)
        named = blas_kernels(hardware)
        why = (f"its BLAS kernels ({named}) were never measured" if named else
               "the description names no BLAS kernels (`dltune hardware --json` on that machine lists them)")
        return out, [f"training time and memory span the {len(alike)} measured machines of this CPU "
                     f"(their BLAS kernels: {', '.join(kernels[m] or 'none' for m in alike)}): {why}"]
