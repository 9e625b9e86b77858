"""Calibration: the factors and models of machines other than the reference one (their speed
and memory against the reference machine's models), and a measured machine's speed now."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dltune.surrogate._features import ran_in_new_process, record_row
from dltune.surrogate._machines import _factors, machine_factor, thread_delta
from dltune.surrogate._records import intra_threads
from dltune.surrogate._train_time import KINDS, kind_shares

if TYPE_CHECKING:
    from dltune.surrogate._train_time import TrainTimeModel

__all__ = ["MIN_PROBES", "MIN_MACHINE_FRAMEWORK_RECORDS", "MIN_MACHINE_MODEL_RECORDS", "MIN_MACHINE_RECORDS",
           "MIN_MACHINE_THREADS_RECORDS", "MIN_MACHINE_WORKLOADS", "CalibrationMixin"]

# Records a machine other than the knowledge base's needs before its speed is calibrated and it
# counts as measured (``dltune kb calibrate`` makes 60; see PerformanceModel.fit).
MIN_MACHINE_RECORDS = 8
# Records of one framework on such a machine before it gets a speed factor of its own (fewer:
# the machine's factor over all its frameworks).
MIN_MACHINE_FRAMEWORK_RECORDS = 3
# Records of one framework x model on such a machine, from at least two of its workloads, before
# that pair gets a factor of its own: machines differ by model, not only by framework
# (docs/explanation/how-recommend-decides.md#another-machine). A calibration (one
# workload per model, 5 runs each) keeps to the framework's factor: one workload cannot tell
# the machine from that workload.
MIN_MACHINE_MODEL_RECORDS = 10
# Workloads of one framework measured on such a machine before its training times there come
# from a cost model of its own (PerformanceModel._fit_machine_time).
MIN_MACHINE_WORKLOADS = 12
# Runs of one framework at one thread count beyond the knowledge base's on such a machine before
# that count gets a factor of its own (``dltune kb calibrate`` on more than 2 cores runs 12 per
# framework with all of them; see machine_factor).
MIN_MACHINE_THREADS_RECORDS = 3
# Quick-calibration probes of one framework on a machine before its throughputs per layer kind
# are fitted (``dltune kb calibrate`` makes 12 per framework on 2 cores).
MIN_PROBES = 4
# Weight of the prior pulling each kind's multiplier towards the framework's overall ratio (the
# probes tell kinds apart only as far as their mix of work differs); weak: machines differ by kind
# several-fold (benchmarks/new_machine.py), and batch sizes and epochs tell overheads apart.
_KIND_PRIOR = 0.002
# Kinds fitted with another's multiplier: the probes tell the per-layer from the per-step
# overhead only at 2 threads, where the two traded off against the throughputs.
_SAME_MULTIPLIER = {"step_x_layers": "step"}


def fit_kind_multipliers(shares: np.ndarray, y: np.ndarray, prior: float = _KIND_PRIOR) -> np.ndarray:
    """Non-negative multipliers, one per column (kind of work) of ``shares`` (the reference
    machine's seconds of each kind of work per run), such that ``shares @ m`` fits ``y`` (this
    machine's seconds) in relative error; each pulled towards the overall ratio (the geometric
    mean of ``y / shares.sum(1)``) in proportion to how little of the work it is."""
    from scipy.optimize import lsq_linear

    total = shares.sum(axis=1)
    s0 = float(np.exp(np.median(np.log(y / total))))
    A = shares / y[:, None]
    weight = np.sqrt(prior * len(y)) * (1.0 - (shares / total[:, None]).mean(axis=0)) + 1e-3
    P = np.diag(weight / s0)
    fit = lsq_linear(np.vstack([A, P]), np.concatenate([np.ones(len(y)), weight]),
                     bounds=(s0 / 20, s0 * 20))
    return fit.x


def _fit_kinds(shares: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`fit_kind_multipliers` with each kind of ``_SAME_MULTIPLIER`` given its partner's."""
    fitted = [k for k in KINDS if k not in _SAME_MULTIPLIER]
    tie = np.array([[_SAME_MULTIPLIER.get(k, k) == f for f in fitted] for k in KINDS], dtype=float)
    return tie @ fit_kind_multipliers(shares @ tie, y)


def _thread_groups(beyond: np.ndarray, frameworks: np.ndarray, threads: np.ndarray) -> dict[str, np.ndarray]:
    """A machine's rows ``beyond`` the reference machine's threads by thread count, over all its
    frameworks (``"*@<n>"``) and per framework (``"<framework>@<n>"``), those with
    :data:`MIN_MACHINE_THREADS_RECORDS` rows or more."""
    out = {}
    for n in sorted(set(threads[beyond].tolist())):
        at = beyond & (threads == n)
        for key, sel in [(f"*@{n}", at)] + [(f"{fw}@{n}", at & (frameworks == fw)) for fw in sorted(set(frameworks[at]))]:
            if sel.sum() >= MIN_MACHINE_THREADS_RECORDS:
                out[key] = sel
    return out


def _thread_counts(beyond: np.ndarray, frameworks: np.ndarray, threads: np.ndarray) -> dict[str, float]:
    """How many of a machine's rows ran at each thread count beyond the reference machine's
    (``"#*@<n>"``, ``"#<framework>@<n>"``; :func:`_thread_groups`): the measurements recommend
    names when it proposes that many threads (``MachinesMixin.threads_evidence``)."""
    return {f"#{key}": float(sel.sum()) for key, sel in _thread_groups(beyond, frameworks, threads).items()}


def _thread_deltas(excess: np.ndarray, beyond: np.ndarray, frameworks: np.ndarray, threads: np.ndarray,
                   top: int) -> dict[str, float]:
    """:func:`thread_delta`'s entries from a machine's rows ``beyond`` the reference machine's
    ``top`` threads, given each row's ``excess`` (log: its time over what the machine's factor
    gives it at ``top`` threads): per thread count over all frameworks (``"*@<n>"``) and per
    framework (:func:`_thread_groups`), the median excess; with ``"@"`` = ``top`` and the rows'
    counts (:func:`_thread_counts`) when there are any."""
    out = {key: float(np.median(excess[sel])) for key, sel in _thread_groups(beyond, frameworks, threads).items()}
    return out | _thread_counts(beyond, frameworks, threads) | {"@": float(top)} if out else out


def _median_factors(log_ratio: np.ndarray, on: np.ndarray, frameworks: np.ndarray,
                    min_framework: int) -> dict[str, float]:
    """A machine's log factors from its rows ``on``: the median over all of them (``"*"``) and
    per framework with ``min_framework`` rows or more."""
    entry = {"*": float(np.median(log_ratio[on]))}
    for fw in sorted(set(frameworks[on])):
        sel = on & (frameworks == fw)
        if sel.sum() >= min_framework:
            entry[str(fw)] = float(np.median(log_ratio[sel]))
    return entry


def _factor_at(entry: dict[str, float], frameworks: np.ndarray, models: np.ndarray) -> np.ndarray:
    """Per row, the log factor ``entry`` gives its framework and model, without a thread delta."""
    return np.array([machine_factor(entry, str(fw), str(model)) for fw, model in zip(frameworks, models, strict=True)])


def _outside(est, X: np.ndarray, y: np.ndarray, factor: np.ndarray) -> float:
    """How much wider (log, each way) ``est``'s interval, times each row's ``factor`` (log),
    must be to hold ``y``: the split-conformal quantile of how far each row lies outside it (0
    inside), at the level that holds ``est.coverage`` of rows like these (all of them, with few
    rows). ``est`` has not seen the rows (fitted on the other machines' alone)."""
    _, low, high = est.predict_interval(X)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_y = np.log(y)
        score = np.maximum(np.log(np.maximum(low, 1e-300)) + factor - log_y,
                           log_y - np.log(np.maximum(high, 1e-300)) - factor)
    score = np.maximum(score[np.isfinite(score)], 0.0)
    if not len(score):
        return 0.0
    level = min(1.0, math.ceil((len(score) + 1) * est.coverage) / len(score))
    return float(np.quantile(score, level))


class CalibrationMixin:
    """:class:`~dltune.surrogate.PerformanceModel`'s fit of the machines other than the
    reference one."""

    @classmethod
    def _fit_per_machine(cls, est, X: np.ndarray, y: np.ndarray, groups: list[str],
                         machines: list[str], frameworks: list[str], models: list[str | None],
                         threads: list[int | None], others: set[str], min_framework: int,
                         spread: bool = False, refit: bool = True,
                         transfer: float | None = None) -> dict[str, dict[str, float]]:
        """Fit ``est`` and return the factors of the machines in ``others`` (log, per framework).

        The features say nothing about which machine ran a run, so records of another machine
        (``dltune kb calibrate``, the user's ``bench`` / ``tune`` runs) would only blur a model
        fitted on the knowledge base's. Each machine in ``others`` (those other than the one
        most records come from, with at least :data:`MIN_MACHINE_RECORDS` records) gets a
        factor per framework: the median of measured over predicted of that framework's rows
        there (with fewer than ``min_framework``, the machine's median over all its rows), each
        less the median of the same over the other machines' rows of its workload and framework;
        and a factor per framework x model where the machine has :data:`MIN_MACHINE_MODEL_RECORDS`
        rows of that pair from two or more workloads (a machine whose knowledge-base runs were
        measured there, not only a calibration).
        The factors are measured against ``est`` fitted on the other machines' rows alone, then
        ``est`` is refitted on every row, this machine's divided by their factor. Predictions
        for that machine are multiplied by its factor. With ``refit=False`` ``est`` stays the fit
        on the other machines' rows. Training time: the machine's speed (the intervals stay the
        knowledge base's: calibration measures 60 runs), not refitted: a machine is faster on
        some workloads than on others of the same framework and model, so its rows divided by
        one factor would blur the cost model (docs/explanation/how-recommend-decides.md#another-machine).
        Peak memory (new-process runs, one per framework and thread
        setting in a calibration): what its libraries and page cache add; with ``spread``, how
        far that machine's rows fall outside ``est``'s interval times their factor
        (:func:`_outside`: the split-conformal quantile, all of them with few rows) is kept
        (``"~"``, log) and widens its intervals each way; their largest deviation from the
        factor instead made the intervals far wider than their coverage needs (same section).
        With ``transfer`` (a quantile, for training time): how far a machine's ratio on one
        workload (per framework) lies from the factor its other workloads give, that quantile
        of it (``"~"``, log; machines with runs of two or more workloads). A calibration runs
        three workloads, and one workload's speed ratio strays from another's, which a factor
        fitted on all of them hides (docs/explanation/how-recommend-decides.md#validation).
        """
        base = [i for i, m in enumerate(machines) if m not in others]
        if not others or len(base) < 4:
            est.fit(X, y, groups)
            return {}
        # Measured against a fit on the other machines alone: a fit that saw this machine's rows
        # would have moved towards them and hide part of the factor.
        est.fit(X[base], y[base], [groups[i] for i in base])
        factors = cls._machine_factors(est, X, y, groups, machines, frameworks, models, threads, others,
                                       min_framework, spread, transfer)
        if refit:
            est.fit(X, y / _factors(factors, machines, frameworks, models, threads), groups)
        return factors

    @staticmethod
    def _machine_factors(est, X: np.ndarray, y: np.ndarray, groups: list[str], machines: list[str],
                         frameworks: list[str], models: list[str | None], threads: list[int | None],
                         others: set[str], min_framework: int, spread: bool,
                         transfer: float | None = None) -> dict[str, dict[str, float]]:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.log(y) - np.log(est.predict(X))
        machines_a, frameworks_a, groups_a = np.array(machines), np.array(frameworks), np.array(groups)
        models_a = np.array([str(m) for m in models])
        threads_a = np.array([n if n is not None else 0 for n in threads])
        # Less the model's own error on the same workload and framework on the other machines
        # (the knowledge base's): a calibration run of a workload the model under-predicts
        # everywhere says nothing about the machine.
        base = ~np.isin(machines_a, sorted(others)) & np.isfinite(log_ratio)
        # The most threads the reference machine's runs used: what the cost model extrapolates
        # beyond. A machine's runs with more get a factor of their own (_thread_deltas).
        top = int(threads_a[base].max()) if base.any() else 0
        for g, fw in {(g, f) for g, f, m in zip(groups, frameworks, machines, strict=True) if m in others}:
            sel = base & (groups_a == g) & (frameworks_a == fw)
            if sel.any():
                log_ratio = np.where((groups_a == g) & (frameworks_a == fw) & ~base,
                                     log_ratio - np.median(log_ratio[sel]), log_ratio)
        out = {}
        for m in sorted(others):
            on = (machines_a == m) & np.isfinite(log_ratio)
            if not on.any():
                continue
            beyond = on & (threads_a > top)
            only_beyond = not (on & ~beyond).any()
            if only_beyond:  # one factor, as before there were thread factors; their counts kept
                counts, beyond = _thread_counts(beyond, frameworks_a, threads_a), np.zeros_like(on)
            else:
                counts, on = {}, on & ~beyond
            entry = _median_factors(log_ratio, on, frameworks_a, min_framework) | counts
            for fw in sorted(set(frameworks_a[on])):
                sel = on & (frameworks_a == fw)
                for model in sorted(set(models_a[sel])):
                    pair = sel & (models_a == model)
                    if pair.sum() >= MIN_MACHINE_MODEL_RECORDS and len(set(groups_a[pair])) >= 2:
                        entry[f"{fw}/{model}"] = float(np.median(log_ratio[pair]))
            if spread:  # how far the machine's rows fall outside the interval ("~", log)
                entry["~"] = _outside(est, X[on], y[on], np.array([
                    machine_factor(entry, str(fw), model)
                    for fw, model in zip(frameworks_a[on], models_a[on], strict=True)]))
            workloads = sorted(set(groups_a[on])) if transfer is not None else []
            if len(workloads) >= 2:
                # Each workload's ratio (per framework: its runs' median; their scatter around
                # it is the reference model's, in its interval already) against the factor of
                # the machine's other workloads.
                strays = []
                for g in workloads:
                    rest = _median_factors(log_ratio, on & (groups_a != g), frameworks_a, min_framework)
                    for fw in sorted(set(frameworks_a[on & (groups_a == g)])):
                        held = on & (groups_a == g) & (frameworks_a == fw)
                        strays.append(abs(float(np.median(log_ratio[held])) - machine_factor(rest, str(fw), None)))
                entry["~"] = float(np.quantile(strays, transfer))
            entry |= _thread_deltas(log_ratio - _factor_at(entry, frameworks_a, models_a), beyond,
                                    frameworks_a, threads_a, top)
            out[m] = entry
        return out

    def _first_epochs(self, data: Sequence[dict[str, Any]],
                      probes: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The probes of two or more epochs as their first epoch alone: feature rows, seconds,
        and which probe (position in ``probes``) each is. Only where the epochs' times add up
        to the run's (``run_training`` sums them): else they timed something else."""
        rows, seconds, of = [], [], []
        for k, i in enumerate(probes):
            metrics = data[i].get("metrics") or {}
            curves = metrics.get("curves") or []
            whole = sum(c.get("train_time_s") or 0.0 for c in curves)
            if (len(curves) >= 2 and (curves[0].get("train_time_s") or 0) > 0
                    and abs(whole - metrics["train_time_s"]) <= 0.01 * metrics["train_time_s"]):
                row = record_row(data[i])
                rows.append(dict(row, config=dict(row["config"], epochs=1)))
                seconds.append(float(curves[0]["train_time_s"]))
                of.append(k)
        X = self.encoder_.transform(rows) if rows else np.zeros((0, len(self.encoder_.feature_names_)))
        return X, np.array(seconds, dtype=np.float64), np.array(of, dtype=int)

    def _fit_machine_kinds(self, X: np.ndarray, y: np.ndarray, machines: list[str],
                           frameworks: list[str], probes: list[int],
                           data: Sequence[dict[str, Any]] | None = None) -> None:
        """Each probed machine's throughput per layer kind and its overheads, per framework, as
        multipliers of the reference machine's (``machine_speed_[m]["<framework>:<kind>"]``,
        log; :data:`~dltune.surrogate._train_time.KINDS`), from its quick-calibration runs
        (rows ``probes``).

        The reference machine is described by its cost model's terms, fitted on its records:
        each run's modelled seconds split by kind of work. The probes are compared with that
        model as it is, not less its error on the same workload there: a machine's speed
        differs between workloads, so that error does not carry over to another machine.
        ``"~"`` is how far the probes, each predicted by a fit without it, fall from their
        time: the interval widens by it.

        With the records (``data``), a probe of two or more epochs counts twice, its first epoch
        alone and the whole run: they differ by work and per-epoch overhead only, so the per-run
        warm-up separates from the throughputs, as the two batch sizes separate the per-step ones.
        """
        if not probes:
            return
        X_p, y_p, parent = X[probes], y[probes], np.arange(len(probes))
        if data is not None:
            X_1, y_1, of = self._first_epochs(data, probes)
            X_p, y_p, parent = np.vstack([X_p, X_1]), np.concatenate([y_p, y_1]), np.concatenate([parent, of])
        shares = kind_shares(self.train_time_.term_seconds(X_p))
        m_p = np.array([machines[probes[k]] for k in parent])
        f_p = np.array([frameworks[probes[k]] for k in parent])
        top, t_p = self._probe_threads(data, machines, probes, parent)
        for m in sorted(str(k) for k in set(m_p)):
            entry, misses = {}, []
            excess = np.full(len(y_p), np.nan)  # the runs beyond top threads: over their kinds' fit
            for fw in sorted(str(f) for f in set(f_p[m_p == m])):
                on = np.flatnonzero((m_p == m) & (f_p == fw) & (y_p > 0) & (shares.sum(axis=1) > 0))
                whole = on[on < len(probes)]  # the runs as measured (what a user runs)
                if len(whole) < MIN_PROBES:
                    continue
                # Fitted on the probes within the reference machine's threads: the cost model
                # extrapolates beyond, and what more threads gain is a delta of its own.
                within = on[t_p[on] <= top]
                within = within if (within < len(probes)).sum() >= MIN_PROBES else on
                mult = _fit_kinds(shares[within], y_p[within])
                entry |= {f"{fw}:{k}": float(np.log(v)) for k, v in zip(KINDS, mult, strict=True)}
                whole_in = within[within < len(probes)]
                entry[fw] = float(np.median(np.log(y_p[whole_in] / shares[whole_in].sum(axis=1))))
                for k in whole_in:  # each run predicted by a fit without it (both its sizes)
                    rest = within[parent[within] != parent[k]]
                    misses.append(abs(float(np.log(y_p[k] / (shares[k] @ _fit_kinds(shares[rest], y_p[rest]))))))
                beyond = np.setdiff1d(whole, whole_in)
                excess[beyond] = np.log(y_p[beyond] / (shares[beyond] @ mult))
            if misses:
                deltas = _thread_deltas(np.nan_to_num(excess), np.isfinite(excess), f_p, t_p, top)
                misses += [abs(float(excess[k]) - thread_delta(deltas, str(f_p[k]), int(t_p[k])))
                           for k in np.flatnonzero(np.isfinite(excess))]
                speed = self.machine_speed_.setdefault(m, {})
                speed |= entry | {"*": float(np.median([v for k, v in entry.items() if ":" not in k])),
                                  "~": float(np.quantile(misses, self.coverage))} | deltas

    def _probe_threads(self, data: Sequence[dict[str, Any]] | None, machines: Sequence[str],
                       probes: list[int], parent: np.ndarray) -> tuple[int, np.ndarray]:
        """The most intra-op threads the reference machine's runs used, and each probe row's
        (0 for all without the records)."""
        if data is None:
            return 0, np.zeros(len(parent), dtype=int)
        top = max((intra_threads(d["config"], d.get("hardware") or {}) or 0
                   for d, m in zip(data, machines, strict=True) if m == self.reference_machine_), default=0)
        return top, np.array([intra_threads(data[probes[k]]["config"], data[probes[k]].get("hardware") or {}) or 0
                              for k in parent], dtype=int)

    def _kind_factors(self, X: np.ndarray, machines: Sequence[str], frameworks: Sequence[str],
                      threads: Sequence[int | None] | None = None) -> np.ndarray:
        """Per row, how much longer its machine runs it than the reference machine by the
        multipliers of :meth:`_fit_machine_kinds`, at its intra-op ``threads`` with what its
        probes with that many gained (:func:`thread_delta`) (NaN where its machine and framework
        have none)."""
        out = np.full(len(X), np.nan)
        rows = [i for i, (m, fw) in enumerate(zip(machines, frameworks, strict=True))
                if f"{fw}:{KINDS[0]}" in self.machine_speed_.get(m, {})]
        if rows:
            shares = kind_shares(self.train_time_.term_seconds(X[rows]))
            mult = np.exp([[self.machine_speed_[machines[i]][f"{frameworks[i]}:{k}"] for k in KINDS] for i in rows])
            gain = np.exp([thread_delta(self.machine_speed_[machines[i]], frameworks[i],
                                        None if threads is None else threads[i]) for i in rows])
            out[rows] = gain * (shares * mult).sum(axis=1) / np.maximum(shares.sum(axis=1), 1e-12)
        return out

    def _fit_machine_time(self, X: np.ndarray, y: np.ndarray, groups: list[str], machines: list[str],
                          frameworks: list[str], others: set[str]) -> None:
        """A training-time model of its own for each machine in ``others`` with
        ``machine_workloads`` or more workloads of one framework (``machine_time_``, with what it
        covers in ``machine_time_info_``).

        A factor per framework and model cannot say how a machine's speed varies between
        workloads (docs/explanation/how-recommend-decides.md#another-machine). With
        enough workloads of its own, the cost model fitted
        on that machine's runs alone learns its costs term by term. Its frameworks with fewer
        workloads there keep the reference model and the factor.
        """
        self.machine_time_: dict[str, TrainTimeModel] = {}
        self.machine_time_info_: dict[str, dict[str, Any]] = {}
        for m in sorted(others):
            on = [i for i, mm in enumerate(machines) if mm == m]
            covered = sorted(fw for fw in {frameworks[i] for i in on}
                             if len({groups[i] for i in on if frameworks[i] == fw}) >= self.machine_workloads)
            if not covered:
                continue
            rows = [i for i in on if frameworks[i] in covered]
            est = self._estimators(self.encoder_)[1]
            est.fit(X[rows], y[rows], [groups[i] for i in rows])
            self.machine_time_[m] = est
            self.machine_time_info_[m] = {"frameworks": covered, "records": len(rows),
                                          "workloads": len({groups[i] for i in rows})}

    def _fit_machine_now(self, X: np.ndarray, y: np.ndarray, data: list[dict[str, Any]],
                         groups: list[str], machines: list[str], frameworks: list[str],
                         models: list[str | None], threads: list[int | None], now: list[int]) -> None:
        """Factors for the machines the knowledge base measured that were calibrated too
        (``machine_now_``, log, per framework as :meth:`_fit_per_machine`'s; what they rest on
        in ``machine_now_info_``): the median over their calibration runs (rows ``now``) of how
        much longer each ran than the same machine ran it before.

        The calibration suite runs the knowledge base's first configurations, so a machine that
        measured them has the very same run on record (same workload and configuration, in a
        new worker process or a reused one alike): the ratio of the two times needs no model.
        A run without that twin is compared with the prediction from the machine's
        knowledge-base runs, less the prediction's median error on that machine's runs of the
        same workload and framework where it has some (as :meth:`_machine_factors` does for
        other machines).

        The same CPU can run the same runs at other speeds on other days (``benchmarks/kb_speed_drift.py``
        measures it). A calibration there says so, and ``recommend`` then scales that machine's times
        (and intervals) by it.

        That holds for a calibration made on this machine (in the cache, ``"here"`` in
        ``machine_now_info_``). One shipped in the package (``kb.shipped``) was made on another
        machine of the same kind on another day: machines of that kind have then run at the
        knowledge base's speed and at the calibration's, and which one a machine runs at today
        is unknown. Its factor is then half the calibration's (in log: the geometric middle)
        and the interval widens by that half too (per framework, ``"~<framework>"``), so it
        reaches both speeds; the calibration's own ratios are kept in
        ``machine_now_info_[m]["ratio"]``. A calibration in the cache
        supersedes a shipped one of the same machine.
        """
        self.machine_now_: dict[str, dict[str, float]] = {}
        self.machine_now_info_: dict[str, dict[str, Any]] = {}
        calibrated = {machines[i] for i in now}
        if not calibrated:
            return
        # The calibrated machines' other runs of the calibration's workloads and frameworks (the
        # runs a calibration run is compared with), then the calibration runs.
        now_set = set(now)
        wanted = {(machines[i], groups[i], frameworks[i]) for i in now}
        before = [i for i in range(len(machines))
                  if i not in now_set and (machines[i], groups[i], frameworks[i]) in wanted]
        rows = before + list(now)
        point = self.train_time_.predict(X[rows])
        self._machine_times(X[rows], [machines[i] for i in rows], [frameworks[i] for i in rows],
                            [models[i] for i in rows], [threads[i] for i in rows], point)
        with np.errstate(divide="ignore", invalid="ignore"):
            error = np.log(y[rows]) - np.log(point)
        error_before, error_now = error[:len(before)], error[len(before):]

        def key(i: int) -> tuple[str, str, str, bool]:
            # The same run: machine, workload, configuration, and whether its worker was new
            # (a new process pays warm-ups a reused one has behind it).
            return (machines[i], groups[i], json.dumps(data[i]["config"], sort_keys=True),
                    ran_in_new_process(data[i]))

        twins: dict[tuple[str, str, str, bool], list[float]] = {}
        for i in before:
            if y[i] > 0:
                twins.setdefault(key(i), []).append(float(np.log(y[i])))
        same = {}  # (machine, workload, framework) -> the model's errors on the machine's runs
        for i, e in zip(before, error_before, strict=True):
            if np.isfinite(e):
                same.setdefault((machines[i], groups[i], frameworks[i]), []).append(e)
        log_ratio = np.empty(len(now))
        for k, (i, e) in enumerate(zip(now, error_now, strict=True)):
            then = twins.get(key(i))
            if then:  # as long as the same run took then (their median if it ran more than once)
                log_ratio[k] = np.log(y[i]) - np.median(then)
            else:
                log_ratio[k] = e - np.median(same.get((machines[i], groups[i], frameworks[i]), [0.0]))
        machines_a, frameworks_a = np.array([machines[i] for i in now]), np.array([frameworks[i] for i in now])
        models_a = np.array([str(models[i]) for i in now])
        threads_a = np.array([threads[i] or 0 for i in now])
        shipped = np.array([bool((data[i].get("kb") or {}).get("shipped")) for i in now])
        for m in sorted(calibrated):
            on = (machines_a == m) & np.isfinite(log_ratio)
            # This machine's own calibration (in the cache) says how fast it runs now; one
            # shipped in the package, how fast another machine of its kind ran on another day.
            from_here = bool((on & ~shipped).any())
            on &= ~shipped if from_here else shipped
            # Runs with more threads than its knowledge-base runs used: a factor of their own
            # (from this machine's calibration only; a shipped one's are left out).
            top = max((threads[i] or 0 for i in range(len(machines)) if machines[i] == m and i not in now_set),
                      default=0)
            beyond = on & (threads_a > top)
            on &= ~beyond
            if not on.any():
                continue
            entry = _median_factors(log_ratio, on, frameworks_a, MIN_MACHINE_FRAMEWORK_RECORDS)
            # How far its runs scatter around their factor ("~", log; the interval's share of
            # them): one factor per framework does not fit every workload and configuration.
            own = np.array([machine_factor(entry, str(fw), None) for fw in frameworks_a[on]])
            entry["~"] = float(np.quantile(np.abs(log_ratio[on] - own), self.coverage))
            if from_here:
                entry |= _thread_deltas(log_ratio - _factor_at(entry, frameworks_a, models_a), beyond,
                                        frameworks_a, threads_a, top)
            dates = [str(data[now[k]].get("started_at") or "") for k in np.flatnonzero(on)]
            info = {"runs": int(on.sum()), "measured_to": max(dates)[:10] or None, "here": from_here}
            if not from_here:
                # Machines of this kind have run at the knowledge base's speed and at the
                # calibration's: which one a machine of that kind runs at today is unknown, so
                # its times are scaled halfway (in log) and the interval reaches both.
                # Each framework's interval by its own half (``"~<framework>"``; ``"~"`` with the
                # machine's over all, for the frameworks that use it).
                scatter = entry.pop("~")
                info["ratio"] = {k: math.exp(v) for k, v in entry.items()}
                entry = ({k: v / 2 for k, v in entry.items()}
                         | {f"~{k}" if k != "*" else "~": scatter + abs(v) / 2 for k, v in entry.items()})
            self.machine_now_[m] = entry
            self.machine_now_info_[m] = info
