"""``dltune.recommend``: the framework and configuration to use, predicted in well under a second."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dltune._errors import DltuneError, FrameworkNotPredictedError, ParameterError
from dltune._validation import check_choice, check_float, check_int
from dltune.config import TrainConfig
from dltune.measure._noise import MIN_NOISE_PAIRS, SeedNoise
from dltune.recommend._candidates import candidate_configs, describe, measured_candidates

__all__ = ["Candidate", "Recommendation", "recommend", "OBJECTIVES", "pick", "alternatives_of"]

OBJECTIVES = ("accuracy", "time", "balanced")
_CONSTRAINTS = ("max_train_time", "max_memory_mb", "min_accuracy")
# The objectives rank candidates by the accuracy the surrogates are confident of: the low end of
# its interval, not the point. Leave-one-workload-out on the shipped knowledge base (42
# workloads), the "accuracy" pick's regret fell from 0.94 points on average (4.89 at worst,
# within 2 points on 37) to 0.73 (3.60, 40, with ACCURACY_TIE; docs/recommendation.md,
# Validation): the point ranks a workload's configurations better
# (Spearman 0.76 against 0.62), but its top holds configurations that may diverge or underfit,
# which the low end, learnt from how such configurations went wrong on other workloads, weighs.
# "time": the fastest candidate within this much of the most accurate one (low ends).
TIME_OBJECTIVE_SLACK = 0.02
# "accuracy": candidates within this much of the surest (low ends) are tied, and the one with the
# highest predicted (or measured) accuracy wins. Half a point of a predicted low end is far
# below what the surrogates resolve (accuracy MAE 9 points; seed noise alone costs 2.75 points
# of regret on average). Until 2026-12-06 the fastest of the tied won: with fresh runs on 12
# workloads the knowledge base had not measured (benchmarks/recommend_vs_defaults.py, 5 seeds),
# the highest point among them measured 0.76 points more (standard error 0.25) at 2.71x the
# time, and went from 0.40 points below torch's own defaults to 0.37 above; on a second draw
# (--data-seed 8), +0.79 (0.42), from 0.81 below torch's defaults to level with them
# (docs/recommendation.md, Against the frameworks' own defaults).
ACCURACY_TIE = 0.005
# "balanced": one accuracy point is worth halving the training time.
BALANCED_POINTS_PER_HALVING = 1.0
# Alternatives are drawn from the Pareto front's members whose low end is within this much of
# the pick's: its fast end is a one-epoch run that has learnt little (35 % on digits, against
# the pick's 91.5 %), a trade no objective would take (5 points = a 32x faster run, balanced).
ALTERNATIVES_WITHIN = 0.05

_hardware_cache: dict[str, Any] = {}


class Measured(NamedTuple):
    """Candidates measured on the workload: their indices, how many runs (distinct seeds) each
    measured, and the accuracy of one more run, ``(point, low, high)``: the measured mean and
    its interval given the workload's seed noise (``PerformanceModel.measured_interval``)."""

    index: np.ndarray
    runs: np.ndarray
    accuracy: np.ndarray
    low: np.ndarray
    high: np.ndarray
    noise: SeedNoise
    configs: int  # how many measured configurations (each a candidate per thread setting)
    own_noise: bool = True  # the seed noise is the workload's own (else borrowed)

    @classmethod
    def of(cls, perf: Any, index: Any, entries: list[dict[str, Any]], noise: SeedNoise,
           own_noise: bool = True) -> Measured:
        """Candidates ``index``, each the measured configuration in ``entries`` at its place
        (``PerformanceModel.measured_runs``' entries; one may stand for several candidates)."""
        accuracy = np.array([e["accuracy"] for e in entries], dtype=float)
        runs = np.array([e["runs"] for e in entries], dtype=int)
        low, high = perf.measured_interval(accuracy, runs, noise)
        return cls(np.asarray(index, dtype=int), runs, accuracy, low, high, noise,
                   len({id(e) for e in entries}), bool(own_noise))

    def apply(self, pred: dict[str, np.ndarray], sure: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``pred`` with the measured candidates' accuracy (and ``sure``, what they are ranked
        by, set to its low end in place): what was measured, not what is predicted."""
        pred = dict(pred)
        for key, values in (("accuracy", self.accuracy), ("accuracy_low", self.low),
                            ("accuracy_high", self.high)):
            pred[key] = pred[key].copy()
            pred[key][self.index] = values
        if sure is not None:
            sure[self.index] = self.low
        return pred


def _noise_source(measured: Measured) -> str:
    """Where a workload's seed noise came from, for the reason."""
    if measured.own_noise:
        return ", from its own repeat pairs"
    return (f", borrowed from its nearest measured workloads: it has fewer than {MIN_NOISE_PAIRS} "
            "configurations measured with two seeds away from 0 and 100% "
            "(`dltune tune --repeat-best 3` measures them)")


class _Predicted(NamedTuple):
    """What the memo keeps per question: the candidates, their predictions (threads and
    machines hedged, not yet widened), and the accuracy they are ranked by (``ranking_accuracy``)."""

    perf: Any  # the fitted model, kept alive so that its id in the key cannot be reused
    configs: list[TrainConfig]
    pred: dict[str, np.ndarray]
    hedge_notes: list[str]
    sure: np.ndarray
    share: float
    band: tuple[np.ndarray, np.ndarray] | None  # the consensus band, where the workload is unlike
    measured: Measured | None  # the candidates measured on the workload, where any were
    runs_of: np.ndarray  # per candidate, the runs that measured it on the workload (0: predicted)
    defaults_at: list[int]  # the candidates that are each framework's own defaults (default_candidates)


# Candidate predictions per (fitted model, workload, hardware, frameworks): objectives and
# constraints only re-rank them, so a repeated question costs milliseconds.
_predictions: dict[str, _Predicted] = {}


@dataclass
class Candidate:
    """A configuration with its predicted metrics: ``(point, low, high)`` each.

    ``ranked_accuracy`` is what it was ranked by where that is not its accuracy's low end (an
    unlike workload, whose ranking mixes in the consensus of the measured ones); else None.
    ``measured_runs``: how many runs (distinct seeds) measured this configuration on the
    workload, whose accuracy is then their mean with the interval of one more run; 0 where it
    is predicted."""

    config: TrainConfig
    accuracy: tuple[float, float, float]
    train_time_s: tuple[float, float, float]
    peak_rss_mb: tuple[float, float, float]
    ranked_accuracy: float | None = None
    measured_runs: int = 0

    def outcome(self, ranked: bool = True) -> str:
        """Its predicted (or measured) accuracy, low end and training time, for tables; with
        ``ranked``, what it was ranked by where that is not the low end."""
        return (f"{100 * self.accuracy[0]:.1f}% (at least {100 * self.accuracy[1]:.1f}%"
                + (f", ranked at {100 * self.ranked_accuracy:.1f}%"
                   if ranked and self.ranked_accuracy is not None else "")
                + (", measured" if self.measured_runs else "") + f") in {self.train_time_s[0]:.3g} s")

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "accuracy": list(self.accuracy),
                "train_time_s": list(self.train_time_s), "peak_rss_mb": list(self.peak_rss_mb),
                "ranked_accuracy": self.ranked_accuracy, "measured_runs": self.measured_runs}


@dataclass
class Recommendation:
    """What ``recommend`` returns.

    ``config`` is a full :class:`TrainConfig` (usable by :func:`dltune.benchmark` and as a tuning
    warm start); ``predicted`` maps ``accuracy``, ``train_time_s``, ``peak_rss_mb`` to
    ``(point, low, high)``; ``alternatives`` are other candidates on the Pareto front of
    predicted training time and the accuracy each is predicted to reach at least (the low end
    of its interval, which the objectives rank by), within ``ALTERNATIVES_WITHIN`` of the
    pick's where the front allows (:func:`alternatives_of`). ``defaults`` is each candidate
    framework's own default preset (:func:`dltune.config.default_preset`), predicted as every candidate is,
    for comparison (whether or not it meets the constraints). ``ranked_own_share`` is how much
    of that ranking is the workload's own low ends: 1 where it is like the measured workloads
    of its model, less where it is unlike them and the rest is their consensus
    (:meth:`~dltune.surrogate.PerformanceModel.ranking_accuracy`). ``measured_runs`` is the
    pick's, as :class:`Candidate`'s.
    """

    workload: str
    model: str
    framework: str
    config: TrainConfig
    predicted: dict[str, tuple[float, float, float]]
    objective: str
    alternatives: list[Candidate]
    reason: str
    out_of_distribution: bool
    ood_reasons: list[str]
    nearest_workloads: list[tuple[str, float]]
    hardware_target: str
    n_candidates: int
    kb_records: int
    constraints: dict[str, float] = field(default_factory=dict)
    interval_notes: list[str] = field(default_factory=list)
    ranked_own_share: float = 1.0
    measured_runs: int = 0
    defaults: list[Candidate] = field(default_factory=list)

    @property
    def configs(self) -> list[TrainConfig]:
        """The recommended configuration first, then the alternatives (e.g. to enqueue in a study)."""
        return [self.config] + [c.config for c in self.alternatives]

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "model": self.model, "framework": self.framework,
            "config": self.config.to_dict(),
            "predicted": {k: list(v) for k, v in self.predicted.items()},
            "objective": self.objective, "constraints": self.constraints,
            "alternatives": [c.to_dict() for c in self.alternatives],
            "reason": self.reason, "out_of_distribution": self.out_of_distribution,
            "ood_reasons": self.ood_reasons, "interval_notes": self.interval_notes,
            "nearest_workloads": [list(n) for n in self.nearest_workloads],
            "hardware_target": self.hardware_target, "n_candidates": self.n_candidates,
            "kb_records": self.kb_records, "ranked_own_share": self.ranked_own_share,
            "measured_runs": self.measured_runs,
            "defaults": [c.to_dict() for c in self.defaults],
        }

    def __str__(self) -> str:
        a, t, m = (self.predicted[k] for k in ("accuracy", "train_time_s", "peak_rss_mb"))
        c = self.config
        threads = c.threads.intra_op if c.threads.intra_op is not None else "default"
        lines = [
            f"Recommendation for {self.workload} ({self.model}) on {self.hardware_target}, "
            f"objective {self.objective}:",
            f"  framework {c.framework}: {c.optimizer} lr={c.learning_rate:g} batch={c.batch_size} "
            f"epochs={c.epochs} threads={threads}"
            + (f" (preset {c.preset_name})" if c.preset_name else ""),
            f"  predicted accuracy {100 * a[0]:.1f}% [{100 * a[1]:.1f}, {100 * a[2]:.1f}], "
            f"training time {t[0]:.3g} s [{t[1]:.3g}, {t[2]:.3g}], "
            f"peak memory {m[0]:.0f} MB [{m[1]:.0f}, {m[2]:.0f}]",
        ]
        if self.measured_runs:
            lines.append(f"  accuracy as measured on this workload ({self.measured_runs} "
                         f"run{'s' if self.measured_runs > 1 else ''}), with the interval of one more run")
        if self.out_of_distribution:
            lines.append("  OUT OF DISTRIBUTION: " + "; ".join(self.ood_reasons))
        if self.interval_notes:
            lines.append("  " + "; ".join(self.interval_notes))
        for alt in self.alternatives:
            d = describe(alt.config)
            lines.append(
                f"  alternative {d['framework']}: {d['optimizer']} lr={d['lr']:g} batch={d['batch']} "
                f"epochs={d['epochs']} threads={d['threads']} -> {alt.outcome()}"
            )
        if self.defaults:
            lines.append("  for comparison, each framework's own defaults: " + "; ".join(
                f"{c.config.framework} ({c.config.preset_name}'s: {c.config.optimizer} "
                f"lr={c.config.learning_rate:g} batch={c.config.batch_size} epochs={c.config.epochs}) -> "
                + c.outcome(ranked=False) for c in self.defaults))
        lines.append("  " + self.reason)
        return "\n".join(lines)


def _resolve_hardware(hardware: Any):
    from dltune.hardware import Hardware

    if hardware is None:
        if "local" not in _hardware_cache:
            _hardware_cache["local"] = Hardware.detect()
        return _hardware_cache["local"], True
    if isinstance(hardware, Hardware):
        return hardware, False
    if isinstance(hardware, dict):
        return Hardware.from_dict(hardware), False
    if isinstance(hardware, (str, Path)):
        return Hardware.from_json(hardware), False
    raise ParameterError(
        "The 'hardware' parameter must be None (this machine), a Hardware, a dict or a JSON "
        f"file path. Got {type(hardware).__name__} instead."
    )


def _check_constraints(constraints: dict[str, Any] | None) -> dict[str, float]:
    if constraints is None:
        return {}
    if not isinstance(constraints, dict):
        raise ParameterError(
            f"The 'constraints' parameter must be a dict with keys among {set(_CONSTRAINTS)}. "
            f"Got {type(constraints).__name__} instead."
        )
    out = {}
    for key, value in constraints.items():
        check_choice("constraints", key, _CONSTRAINTS)
        if value is None:
            continue
        if key == "min_accuracy":
            out[key] = check_float("min_accuracy", value, 0.0, 1.0)
        else:
            out[key] = check_float(key, value, 0.0, None, low_open=True)
    return out


def _resolve_workload(workload: Any, model: str | None, perf) -> tuple[str, Any, dict[str, Any], str | None]:
    """Data set name, model spec, meta-features and data set fingerprint of the workload.

    A data set named with its default parameters that the knowledge base measured is not
    loaded at all: its recorded meta-features (landmarks included) are reused, which keeps a
    fresh ``recommend('digits')`` fast.
    """
    from dltune._workload import as_workload
    from dltune.models import build_model

    if isinstance(workload, str):
        meta = perf.named_dataset_meta(workload)
        if meta is not None:
            spec = build_model(model or "lenet", (int(meta["channels"]), int(meta["height"]),
                                                  int(meta["width"])), int(meta["num_classes"]))
            meta.update(spec.cost_features())
            return workload, spec, meta, perf.named_dataset_fingerprint(workload)
    wl = as_workload(workload, model)
    fingerprint = wl.dataset.fingerprint()
    meta = perf.workload_meta(fingerprint)
    if meta is None:
        meta = wl.meta_features()
    meta.update(wl.model.cost_features())
    return wl.dataset.name, wl.model, meta, fingerprint


def pareto_front(accuracy: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Indices of the candidates no other beats in both accuracy and time, fastest first."""
    order = np.lexsort((-accuracy, time))
    front, best = [], -np.inf
    for i in order:
        if accuracy[i] > best:
            front.append(i)
            best = accuracy[i]
    return np.array(front, dtype=int)


def pick(objective: str, accuracy: np.ndarray, time: np.ndarray, point: np.ndarray | None = None) -> int:
    """The index the objective prefers among the candidates (all assumed feasible); ``accuracy``
    is what the candidates are ranked by (``recommend`` passes the interval's low end), ``point``
    the predicted (or measured) accuracy itself, which breaks the ``accuracy`` objective's ties
    (without it, the fastest of the tied wins)."""
    if objective in ("accuracy", "time"):
        slack = ACCURACY_TIE if objective == "accuracy" else TIME_OBJECTIVE_SLACK
        ok = np.flatnonzero(accuracy >= accuracy.max() - slack)
        if objective == "accuracy" and point is not None:
            # The highest point among the tied; equal points go to the faster.
            return int(ok[np.lexsort((time[ok], -point[ok]))[0]])
        return int(ok[np.argmin(time[ok])])
    score = 100 * accuracy - BALANCED_POINTS_PER_HALVING * np.log2(np.maximum(time, 1e-6))
    return int(np.argmax(score))


def alternatives_of(best: int, accuracy: np.ndarray, time: np.ndarray, n: int) -> list[int]:
    """Up to ``n`` indices of alternatives to candidate ``best``, fastest first.

    They lie on the Pareto front of ``accuracy`` (what the candidates are ranked by: the low
    end) and ``time``, spread along the part of it within ``ALTERNATIVES_WITHIN`` of the best's
    accuracy; where that part holds fewer than ``n``, the most accurate of the rest fill in.
    """
    if n <= 0:
        return []
    front = [int(i) for i in pareto_front(accuracy, time) if int(i) != best]
    near = [i for i in front if accuracy[i] >= accuracy[best] - ALTERNATIVES_WITHIN]
    if len(near) > n:
        # Spread along the front rather than taking neighbours of the best.
        near = [near[int(round(j))] for j in np.linspace(0, len(near) - 1, n)]
    rest = sorted(set(front) - set(near), key=lambda i: -accuracy[i])[:n - len(near)]
    return sorted(near + rest, key=lambda i: (time[i], -accuracy[i]))


def recommend(
    workload: Any,
    hardware: Any = None,
    objective: str = "balanced",
    constraints: dict[str, float] | None = None,
    frameworks: list[str] | None = None,
    top_k: int = 3,
    *,
    model: str | None = None,
    records: list[Any] | None = None,
    storage: str | None = "default",
    knowledge_base: str | Path | None = None,
) -> Recommendation:
    """The framework and configuration to use for ``workload`` on ``hardware``, predicted.

    Args:
        workload: a data set name, a :class:`~dltune.Workload`, ``(x_train, y_train,
            x_test, y_test)`` or ``(x, y)`` (a stratified 20 % held out:
            :func:`~dltune.data.holdout_split`).
        hardware: None (this machine), a :class:`~dltune.Hardware`, a dict or a JSON file.
        objective: ``accuracy`` (the surest; among those within ``ACCURACY_TIE`` of it, the
            highest predicted accuracy),
            ``time`` (fastest within ``TIME_OBJECTIVE_SLACK`` of the most accurate) or
            ``balanced`` (accuracy points minus ``BALANCED_POINTS_PER_HALVING`` per doubling of
            training time). Each ranks the accuracy a candidate is predicted to reach at least,
            the low end of its interval, not the point.
        constraints: ``max_train_time`` (s), ``max_memory_mb``, ``min_accuracy`` (0..1), applied
            to the predicted values.
        frameworks: candidate frameworks (default: every one the knowledge base measured that
            is available here, or all it measured for another machine's hardware).
        top_k: how many configurations to return: the best plus up to ``top_k - 1``
            alternatives on the Pareto front (:func:`alternatives_of`).
        model: model preset when ``workload`` is a name or arrays (default ``lenet``).
        records: extra measurement records (or record files) to fit on.
        storage: Optuna storage whose records are added (``"default"``: ``./dltune.db`` or
            ``$DLTUNE_STORAGE`` when present; None: none).
        knowledge_base: a knowledge-base records file to use instead of the shipped one.

    Raises:
        ParameterError: bad arguments. DltuneError: no candidate meets the constraints.
    """
    from dltune.surrogate import fitted_model
    from dltune.surrogate._model import intra_threads, machine_factor

    check_choice("objective", objective, OBJECTIVES)
    top_k = check_int("top_k", top_k, 1, 100)
    limits = _check_constraints(constraints)
    hw, local = _resolve_hardware(hardware)
    perf = fitted_model(records=records, storage=storage, kb_path=knowledge_base)
    frameworks = _frameworks(frameworks, perf, local)
    dataset_name, spec, meta, fingerprint = _resolve_workload(workload, model, perf)
    hw_dict = hw.to_dict()
    low_e, high_e = perf.config_ranges_["epochs"]
    kind = "cifar10" if spec.input_shape[0] == 3 else "mnist"
    memo_key = json.dumps([id(perf), meta, hw_dict, frameworks, kind, fingerprint, spec.name],
                          sort_keys=True, default=str)
    # The entry keeps its model alive, so a model's id cannot be reused while it is cached.
    if memo_key in _predictions and _predictions[memo_key].perf is perf:
        _, configs, pred, hedge_notes, sure, share, band, measured, runs_of, defaults_at = _predictions[memo_key]
    else:
        configs = candidate_configs(frameworks, hw.usable_cores, (int(low_e), int(high_e)),
                                    dataset_kind=kind)
        # The configurations measured on this workload (a `tune`'s or `bench`'s runs, or the
        # knowledge base's) are candidates too, with the accuracy they measured.
        runs, noise = perf.measured_runs(fingerprint, spec.name)
        extra, which = measured_candidates(runs, frameworks, hw.usable_cores)
        measured = Measured.of(perf, np.arange(len(configs), len(configs) + len(extra)),
                               [runs[i] for i in which], noise,
                               perf.has_own_seed_noise(fingerprint, spec.name)) if extra else None
        configs = configs + extra
        targets: dict[int | None, dict[str, Any]] = {}
        rows = []
        for config in configs:
            cores = config.threads.cores
            if cores not in targets:
                targets[cores] = dict(hw_dict, usable_cores=cores or hw_dict["usable_cores"])
            rows.append({"meta": meta, "hardware": targets[cores], "config": _config_features(config)})
        pred = perf.predict(rows)
        # What the picks rank by: the low ends as learnt, mixed with the consensus of the
        # measured workloads of its model where the workload is unlike them (ranking_accuracy).
        # Not the widened low ends: widening stretches every candidate's interval alike, which
        # says how unsure all of them are, not which is better (ranked by the widened low ends,
        # the held-out 8x8x1 cifar_quick's pick measured 44.3 points below its best run; by the
        # learnt ones, 30.7; with the consensus, 11.7: docs/recommendation.md, Validation).
        sure, share, band = perf.ranking_accuracy(rows, meta, pred["accuracy_low"])
        if measured is not None:  # ranked by the low end of one more run's accuracy
            pred = measured.apply(pred, sure)
        # More threads than this machine was measured at: between no gain and the extrapolation.
        pred, hedge_notes = perf.hedge_threads(pred, rows, hw_dict)
        # A CPU measured on machines that ran at different speeds, which the description
        # cannot tell apart: between them.
        pred, machine_notes = perf.hedge_machines(pred, rows, hw_dict)
        hedge_notes = [*hedge_notes, *machine_notes]
        runs_of = np.zeros(len(configs), dtype=int)
        if measured is not None:
            runs_of[measured.index] = measured.runs
        defaults_at = default_candidates(configs, frameworks, kind, runs_of)
        if len(_predictions) >= 32:
            _predictions.pop(next(iter(_predictions)))
        _predictions[memo_key] = _Predicted(perf, configs, pred, hedge_notes, sure, share, band, measured,
                                            runs_of, defaults_at)
    # Out of distribution, the intervals are widened, never left at the knowledge base's width
    # (and the accuracy intervals reach the consensus band the picks were ranked with).
    pred, interval_notes = perf.widen(pred, meta, hw_dict, consensus=band)
    if measured is not None:  # measured, not widened
        pred = measured.apply(pred)
    interval_notes = [*hedge_notes, *interval_notes]
    acc, time = pred["accuracy"], pred["train_time_s"]
    feasible = np.ones(len(configs), dtype=bool)
    if "max_train_time" in limits:
        feasible &= time <= limits["max_train_time"]
    if "max_memory_mb" in limits:
        feasible &= pred["peak_rss_mb"] <= limits["max_memory_mb"]
    if "min_accuracy" in limits:
        feasible &= acc >= limits["min_accuracy"]
    idx = np.flatnonzero(feasible)
    if len(idx) == 0:
        raise DltuneError(
            f"No candidate meets the constraints {limits}: the fastest is predicted at "
            f"{time.min():.3g} s, the most accurate at {100 * acc.max():.1f}%, the smallest at "
            f"{pred['peak_rss_mb'].min():.0f} MB."
        )
    chosen_j = pick(objective, sure[idx], time[idx], acc[idx])
    best = int(idx[chosen_j])

    def candidate(i: int) -> Candidate:
        return Candidate(configs[i], *[(float(pred[k][i]), float(pred[f"{k}_low"][i]),
                                        float(pred[f"{k}_high"][i]))
                                       for k in ("accuracy", "train_time_s", "peak_rss_mb")],
                         ranked_accuracy=float(sure[i]) if share < 1.0 else None,
                         measured_runs=int(runs_of[i]))

    others = alternatives_of(chosen_j, sure[idx], time[idx], top_k - 1)
    alternatives = [candidate(int(idx[j])) for j in others]
    ood, reasons, nearest = perf.novelty(meta, hw_dict)
    threads = intra_threads(_config_features(configs[best]), hw_dict)
    beyond = perf.threads_reason(threads, hw_dict)
    if beyond:
        ood, reasons = True, [*reasons, beyond]
    chosen = candidate(best)
    defaults = [candidate(i) for i in defaults_at]
    reason = _reason(chosen, objective, configs, pred, sure, idx, frameworks, perf, nearest, ood, runs_of)
    if measured is not None and chosen.measured_runs:
        reason += (f" This configuration was measured on this workload ({chosen.measured_runs} "
                   f"run{'s' if chosen.measured_runs > 1 else ''}): its accuracy is the measured mean, "
                   f"and its interval that of one more run, given seed noise of "
                   f"{100 * float(measured.noise.at(chosen.accuracy[0])):.2f} points per run "
                   f"at that accuracy{_noise_source(measured)}.")
    elif measured is not None:
        reason += (f" The {measured.configs} configurations measured on this workload were "
                   f"candidates too, with the accuracy they measured and the interval of one more run "
                   f"(seed noise of {100 * float(measured.noise.at(measured.accuracy.max())):.2f} points per "
                   f"run at the best of them, {100 * measured.accuracy.max():.1f}%{_noise_source(measured)}).")
    if share < 1.0:
        model_name = spec.name if perf.model_measured(spec.name) else None
        reason += (f" Its own predictions are extrapolated: candidates are ranked {100 * share:.0f}% by the "
                   f"accuracy predicted at least for it and {100 * (1 - share):.0f}% by the accuracy each "
                   f"configuration is predicted to reach at least across the measured "
                   + (f"{model_name} workloads" if model_name else "workloads (of every model)")
                   + " (the ranked at figures), and its accuracy intervals reach what it reached across them.")
    # A description that cannot tell apart the measured machines of its CPU: its times span
    # them (hedge_machines' note), not one machine's model or speed.
    spanned = len(perf.machines_alike(hw_dict)) >= 2
    machine = perf.machine_of(hw_dict)
    speed = None if spanned else perf.machine_speed_.get(machine)
    own = None if spanned else perf.time_source(hw_dict, chosen.config.framework)
    if own:
        reason += (f" Training times come from a cost model fitted on this machine's own runs "
                   f"({own['records']} runs of {own['workloads']} workloads, "
                   f"{' and '.join(own['frameworks'])}).")
    elif speed and perf.reference_frameworks_ is not None and chosen.config.framework not in perf.reference_frameworks_:
        # No speed to compare with: the reference machine never ran the framework (a model saved
        # before reference_frameworks_ was kept, None, reads every factor as a speed).
        fw = chosen.config.framework
        reason += (f" The machine most of the knowledge base was measured on never ran {fw}, so "
                   f"there is no speed to compare with: {fw}'s training times are "
                   + ("the cost model's, scaled to this machine's own runs of it." if fw in speed
                      else "extrapolated by the cost model, and this machine has too few runs of it "
                      "to scale them (more `dltune bench` or `tune` runs of it would)."))
    elif speed:
        factor = math.exp(machine_factor(speed, chosen.config.framework, spec.name, threads))
        reason += (f" Training times are scaled to this machine's measured speed: its runs took "
                   f"{factor:.2g}x as long as those of the machine most of the knowledge base was "
                   f"measured on, {_for_framework(speed, chosen.config.framework)}"
                   f"{_threads_gain(speed, chosen.config.framework, threads)}.")
    now = None if spanned else perf.machine_now_.get(machine)
    if now:
        info = perf.machine_now_info_[machine]
        if info.get("here", True):
            factor = math.exp(machine_factor(now, chosen.config.framework, spec.name, threads))
            reason += (f" This machine's calibration ({info['runs']} runs, {info['measured_to']}) ran "
                       f"{factor:.2g}x as long as this machine ran them for the knowledge base, "
                       f"{_for_framework(now, chosen.config.framework)}"
                       f"{_threads_gain(now, chosen.config.framework, threads)}:"
                       f" training times are scaled to it.")
        else:
            ratio = machine_factor(info["ratio"], chosen.config.framework, spec.name)
            factor = math.exp(machine_factor(now, chosen.config.framework, spec.name))
            reason += (f" A machine of this kind ran the shipped calibration ({info['runs']} runs, "
                       f"{info['measured_to']}) {ratio:.2g}x as long as the knowledge base's runs, "
                       f"{_for_framework(info['ratio'], chosen.config.framework)}: its speed varies from day to day, so training "
                       f"times are scaled {factor:.2g}x and their interval reaches both speeds "
                       f"(`dltune kb calibrate` measures this machine's speed now).")
    return Recommendation(
        workload=dataset_name, model=spec.name, framework=chosen.config.framework,
        config=chosen.config,
        predicted={"accuracy": chosen.accuracy, "train_time_s": chosen.train_time_s,
                   "peak_rss_mb": chosen.peak_rss_mb},
        objective=objective, alternatives=alternatives, reason=reason,
        out_of_distribution=ood, ood_reasons=reasons, nearest_workloads=nearest,
        hardware_target=hw.target, n_candidates=len(configs), kb_records=perf.n_records_,
        constraints=limits, interval_notes=interval_notes, ranked_own_share=share,
        measured_runs=chosen.measured_runs, defaults=defaults,
    )


def default_candidates(configs: list[TrainConfig], frameworks: list[str], dataset_kind: str,
                       runs: np.ndarray | None = None) -> list[int]:
    """Per framework, in ``frameworks``' order, the index of a candidate among ``configs`` that is
    its own default preset (:func:`dltune.config.default_preset`): the one measured on the
    workload in the most runs (``runs``, per candidate) where it was measured, else the first;
    frameworks without one are left out."""
    from dltune.config import default_preset

    out = []
    for framework in frameworks:
        name = default_preset(framework, dataset_kind)
        found = [i for i, c in enumerate(configs) if c.framework == framework and c.preset_name == name]
        if found:
            out.append(max(found, key=lambda i: (0 if runs is None else runs[i], -i)))
    return out


def _for_framework(entry: dict[str, float], framework: str) -> str:
    """The reason's words for whose factor a machine's ``entry`` gives ``framework``: its own,
    else the one over the frameworks that machine ran (``machine_factor``'s fallback)."""
    if framework in entry:
        return f"for {framework}"
    # The per-framework keys: not "*", "~..." (spreads), "<framework>/<model>" or "...@<threads>".
    ran = sorted(k for k in entry if k[:1] not in ("*", "~") and "/" not in k and "@" not in k)
    return (f"over {', '.join(ran)} ({framework} was not among its runs)" if ran
            else f"over its runs ({framework} was not among them)")


def _threads_gain(entry: dict[str, float], framework: str, threads: int | None) -> str:
    """The reason's words for a machine factor's thread delta at ``threads`` (empty without one)."""
    from dltune.surrogate._model import thread_delta

    delta = thread_delta(entry, framework, threads)
    return (f" at {threads} threads (what its runs with more threads than the knowledge base's "
            f"gained: {math.exp(delta):.2g}x the extrapolation from fewer)") if delta else ""


def _config_features(config: TrainConfig) -> dict[str, Any]:
    """What the surrogates read of a configuration (``to_dict`` is too slow for 1000 candidates)."""
    t = config.threads
    return {"framework": config.framework, "optimizer": config.optimizer,
            "learning_rate": config.learning_rate, "momentum": config.momentum,
            "weight_decay": config.weight_decay, "batch_size": config.batch_size,
            "epochs": config.epochs, "lr_schedule": config.lr_schedule,
            "threads": {"intra_op": t.intra_op, "inter_op": t.inter_op, "blas": t.blas, "cores": t.cores}}


def _frameworks(requested: list[str] | None, perf, local: bool) -> list[str]:
    """The candidate frameworks: those requested, else those measured enough for their training
    time to be predicted (``PerformanceModel.predictable_frameworks``), installed here when
    recommending for this machine."""
    from dltune.surrogate._model import MIN_FRAMEWORK_RUNS, MIN_FRAMEWORK_WORKLOADS

    predictable = perf.predictable_frameworks()
    if requested is not None:
        if isinstance(requested, str):
            requested = [requested]
        for name in requested:
            if name not in perf.frameworks_:
                try:
                    check_choice("frameworks", name, perf.frameworks_)
                except ParameterError as exc:
                    raise FrameworkNotPredictedError(str(exc)) from None
            if name not in predictable:
                runs = perf.framework_runs_[name]
                raise FrameworkNotPredictedError(
                    f"The 'frameworks' parameter names {name}, of which the surrogates have "
                    f"{runs['runs']} run{'s' if runs['runs'] != 1 else ''} on {runs['workloads']} "
                    f"workload{'s' if runs['workloads'] != 1 else ''}: too few to predict its training "
                    f"time (at least {MIN_FRAMEWORK_RUNS} runs on {MIN_FRAMEWORK_WORKLOADS} workloads, or "
                    f"half the workloads and a tenth of the runs of the most measured framework). "
                    f"More `dltune bench` or `dltune tune` runs of it would make it a candidate."
                )
        return list(requested)
    if not local:
        return list(predictable)
    from dltune._bench import interpreter_for

    available = []
    for name in predictable:
        try:
            interpreter_for(name)
            available.append(name)
        except DltuneError:
            continue
    if not available:
        raise DltuneError(
            f"None of the frameworks the knowledge base measured ({', '.join(predictable)}) is "
            "installed here; install one (e.g. pip install 'dltune[torch]') or pass 'hardware' "
            "to recommend for another machine."
        )
    return available


def _reason(chosen: Candidate, objective: str, configs, pred, sure, idx, frameworks, perf,
            nearest, ood, runs_of) -> str:
    """The recommendation's paragraph; ``sure`` is what the candidates were ranked by, ``pred``
    what is shown (widened out of distribution). Where ``sure`` is not the shown low end but its
    mix with the consensus (an unlike workload: ``chosen.ranked_accuracy`` is set), each figure
    names it too."""
    c = chosen.config
    time = pred["train_time_s"]

    def ranked(value: float) -> str:
        return "" if chosen.ranked_accuracy is None else f" (ranked at {100 * value:.1f}%)"

    goal = {"accuracy": "the highest accuracy it is predicted to reach at least (within "
                        f"{100 * ACCURACY_TIE:.1f} points of it counts as tied, and the highest predicted "
                        "accuracy among those wins)",
            "time": f"the shortest predicted training time within {100 * TIME_OBJECTIVE_SLACK:.0f} "
                    "accuracy points of the most accurate candidate",
            "balanced": "the best balance of accuracy and training time (one accuracy point is "
                        "worth halving the time)"}[objective]
    parts = [
        f"Of {len(configs)} candidates ({len(idx)} meeting the constraints) across "
        f"{' and '.join(frameworks)}, the {c.framework} configuration with {c.optimizer}, learning rate "
        f"{c.learning_rate:g}, batch {c.batch_size} and {c.epochs} epochs has {goal}: "
        f"{100 * chosen.accuracy[0]:.1f}% {'measured' if chosen.measured_runs else 'predicted'}, at least {100 * chosen.accuracy[1]:.1f}%{ranked(chosen.ranked_accuracy)}, "
        f"in {chosen.train_time_s[0]:.3g} s. Accuracy is ranked by the low end of its interval, "
        "what the surrogates are confident of: a configuration predicted a little more accurate "
        "but less surely ranks below."
    ]
    others = []
    for fw in frameworks:
        if fw == c.framework:
            continue
        mine = [i for i in idx if configs[i].framework == fw]
        if mine:
            j = max(mine, key=lambda i: (sure[i], -time[i]))
            others.append(f"{fw}'s best ranked for accuracy: {100 * pred['accuracy'][j]:.1f}% "
                          f"{'measured' if runs_of[j] else 'predicted'}, "
                          f"at least {100 * pred['accuracy_low'][j]:.1f}%{ranked(sure[j])}, in {time[j]:.3g} s")
    if others:
        parts.append("For comparison, " + "; ".join(others) + ".")
    names = ", ".join(f"{n} ({d:.2f})" for n, d in nearest)
    parts.append(
        f"Predictions come from surrogates fitted on {perf.n_records_} measurements of "
        f"{len(perf.workloads_)} workloads; the nearest measured workloads are {names}."
    )
    if ood:
        parts.append("This workload or hardware lies outside what was measured: treat the "
                     "numbers as rough and verify with --verify or dltune.benchmark.")
    return " ".join(parts)
