"""The one recommendation pipeline: candidates scored as users get them.

``recommend`` and ``kb validate`` both call :func:`score_candidates`, so that validation scores
what users get: predict -> ranking accuracy -> measured -> hedges -> widen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dltune.measure._noise import SeedNoise
from dltune.recommend._policy import DEFAULT_POLICY, RecommendPolicy
from dltune.recommend._select import alternatives_of, pick

__all__ = ["Measured", "ScoredCandidates", "score_candidates"]


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


@dataclass(frozen=True, eq=False)
class ScoredCandidates:
    """What :func:`score_candidates` returns.

    ``predicted`` maps ``accuracy``, ``train_time_s``, ``peak_rss_mb`` and their ``_low`` /
    ``_high`` to one value per candidate, as users get them (hedged, widened, measured);
    ``ranked_by`` is the accuracy the objectives rank by (``PerformanceModel.ranking_accuracy``:
    the low ends as learnt, mixed with the consensus where the workload is unlike the measured
    ones; a measured candidate's is one more run's low end), ``own_share`` how much of it is the
    workload's own; ``notes`` say how the intervals were hedged and widened."""

    predicted: dict[str, np.ndarray]
    ranked_by: np.ndarray
    own_share: float
    notes: list[str]
    measured: Measured | None
    policy: RecommendPolicy

    @property
    def runs(self) -> np.ndarray:
        """Per candidate, the runs that measured it on the workload (0: predicted)."""
        runs = np.zeros(len(self.ranked_by), dtype=int)
        if self.measured is not None:
            runs[self.measured.index] = self.measured.runs
        return runs

    def _among(self, among: Sequence[int] | np.ndarray | None) -> np.ndarray:
        return np.arange(len(self.ranked_by)) if among is None else np.asarray(among, dtype=int)

    def pick(self, objective: str, among: Sequence[int] | np.ndarray | None = None) -> int:
        """The candidate ``objective`` prefers (:func:`pick`, by the policy), of those ``among``
        (default: all)."""
        idx = self._among(among)
        p = self.predicted
        return int(idx[pick(objective, self.ranked_by[idx], p["train_time_s"][idx], p["accuracy"][idx],
                            self.policy)])

    def alternatives(self, best: int, n: int, among: Sequence[int] | np.ndarray | None = None) -> list[int]:
        """Up to ``n`` alternatives to candidate ``best`` among ``among`` (:func:`alternatives_of`)."""
        idx = self._among(among)
        at = int(np.flatnonzero(idx == best)[0])
        others = alternatives_of(at, self.ranked_by[idx], self.predicted["train_time_s"][idx], n, self.policy)
        return [int(idx[j]) for j in others]


def score_candidates(meta: dict[str, Any], hardware: dict[str, Any], rows: Sequence[dict[str, Any]],
                     model: Any, policy: RecommendPolicy = DEFAULT_POLICY, *,
                     measured: Measured | None = None) -> ScoredCandidates:
    """The candidates ``rows`` of a workload (meta-features ``meta``) on ``hardware``, scored by
    the fitted ``model`` under ``policy``.

    Args:
        meta: the workload's meta-features (its model's cost features included).
        hardware: the hardware asked about, as a dict.
        rows: one ``{"meta", "hardware", "config"}`` per candidate, as the surrogates read them.
        model: a fitted :class:`~dltune.surrogate.PerformanceModel`.
        policy: the decision's knobs (:class:`RecommendPolicy`).
        measured: the candidates measured on the workload, which take what they measured.

    Returns:
        :class:`ScoredCandidates`: the predictions with intervals as users get them and what
        the objectives rank by.
    """
    pred = model.predict(rows)
    # What the picks rank by: the low ends as learnt, mixed with the consensus of the measured
    # workloads of its model where the workload is unlike them. Not the widened low ends:
    # widening stretches every candidate's interval alike, which says how unsure all of them
    # are, not which is better (docs/explanation/how-recommend-decides.md#out-of-distribution).
    ranked, share, band = model.ranking_accuracy(rows, meta, pred["accuracy_low"])
    ranked = np.array(ranked, dtype=float, copy=True)
    if measured is not None:  # ranked by the low end of one more run's accuracy
        pred = measured.apply(pred, ranked)
    # More threads than the machine was measured at: between no gain and the extrapolation.
    pred, thread_notes = model.hedge_threads(pred, rows, hardware)
    # A CPU measured on machines that ran at different speeds, which the description cannot
    # tell apart: between them.
    pred, machine_notes = model.hedge_machines(pred, rows, hardware)
    # Out of distribution, the intervals are widened, never left at the knowledge base's width
    # (and the accuracy intervals reach the consensus band the picks were ranked with).
    pred, widen_notes = model.widen(pred, meta, hardware, policy, consensus=band)
    if measured is not None:  # measured, not widened
        pred = measured.apply(pred)
    return ScoredCandidates(pred, ranked, float(share), [*thread_notes, *machine_notes, *widen_notes],
                            measured, policy)
