"""What ``recommend`` returns: the recommendation and its candidates, with their table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dltune._interval import Interval
from dltune.config import TrainConfig

__all__ = ["Candidate", "Recommendation", "is_memory_unmeasured", "memory_json"]


def is_memory_unmeasured(peak_rss_mb: tuple[float, float, float]) -> bool:
    """Whether a peak-memory interval has no high end: its framework's memory (training that
    model) was seldom measured in a fresh process
    (:meth:`~dltune.surrogate.PerformanceModel.memory_grounded`); its point and low end are
    the least its process was measured to hold."""
    return not math.isfinite(peak_rss_mb[2])


def memory_json(peak_rss_mb: tuple[float, float, float]) -> list[float | None]:
    """A peak-memory interval for JSON: a high end that is not known is null."""
    point, low, high = peak_rss_mb
    return [point, low, high if math.isfinite(high) else None]


@dataclass
class Candidate:
    """A configuration with its predicted metrics: an :class:`~dltune.Interval` each.

    ``ranked_accuracy`` is what it was ranked by where that is not its accuracy's low end (an
    unlike workload, whose ranking mixes in the consensus of the measured ones); else None.
    ``measured_runs``: how many runs (distinct seeds) measured this configuration on the
    workload, whose accuracy is then their mean with the interval of one more run; 0 where it
    is predicted."""

    config: TrainConfig
    accuracy: Interval
    train_time_s: Interval
    peak_rss_mb: Interval
    ranked_accuracy: float | None = None
    measured_runs: int = 0

    def __post_init__(self) -> None:
        for name in ("accuracy", "train_time_s", "peak_rss_mb"):
            setattr(self, name, Interval(*getattr(self, name)))

    def __repr__(self) -> str:
        from dltune.recommend._format import candidate_repr

        return candidate_repr(self)

    def _repr_html_(self) -> str:
        from dltune.recommend._format import candidate_html

        return candidate_html(self)

    def outcome(self, ranked: bool = True) -> str:
        """Its predicted (or measured) accuracy, low end and training time, for tables; with
        ``ranked``, what it was ranked by where that is not the low end."""
        return (f"{100 * self.accuracy[0]:.1f}% (at least {100 * self.accuracy[1]:.1f}%"
                + (f", ranked at {100 * self.ranked_accuracy:.1f}%"
                   if ranked and self.ranked_accuracy is not None else "")
                + (", measured" if self.measured_runs else "") + f") in {self.train_time_s[0]:.3g} s")

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "accuracy": list(self.accuracy),
                "train_time_s": list(self.train_time_s), "peak_rss_mb": memory_json(self.peak_rss_mb),
                "ranked_accuracy": self.ranked_accuracy, "measured_runs": self.measured_runs}


@dataclass
class Recommendation:
    """What ``recommend`` returns.

    ``config`` is a full :class:`TrainConfig` (usable by :func:`dltune.benchmark` and as a tuning
    warm start); ``predicted`` maps ``accuracy``, ``train_time_s``, ``peak_rss_mb`` to an
    :class:`~dltune.Interval` ``(point, low, high)``; ``alternatives`` are other candidates on the Pareto front of
    predicted training time and the accuracy each is predicted to reach at least (the low end
    of its interval, which the objectives rank by), within ``RecommendPolicy.alternatives_within`` of
    the pick's where the front allows (:func:`alternatives_of`). ``defaults`` is each candidate
    framework's own default preset (:func:`dltune.config.default_preset`), predicted as every candidate is,
    for comparison (whether or not it meets the constraints). ``ranked_own_share`` is how much
    of that ranking is the workload's own low ends: 1 where it is like the measured workloads
    of its model, less where it is unlike them and the rest is their consensus
    (:meth:`~dltune.surrogate.PerformanceModel.ranking_accuracy`). ``measured_runs`` is the
    pick's, as :class:`Candidate`'s. ``frameworks`` are the candidate frameworks; ``retired``
    the best configuration of a retired framework (MXNet, Theano) where those were scored for
    comparison only, never picked (else None). ``storage`` is the storage whose records were
    added (its URL, password masked; None: none was read); ``caveat`` one calm line on what the
    figures rest on where that matters (out of distribution), else None. A ``peak_rss_mb``
    without a high end (infinite; null in JSON) was seldom measured in a fresh process
    (:func:`is_memory_unmeasured`; those frameworks: :attr:`memory_unmeasured`).

    ``str()`` is the short summary (:meth:`summary`), :meth:`details` everything.
    """

    workload: str
    model: str
    framework: str
    config: TrainConfig
    predicted: dict[str, Interval]
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
    frameworks: list[str] = field(default_factory=list)
    retired: Candidate | None = None
    storage: str | None = None
    caveat: str | None = None
    threads_note: str | None = None

    def __post_init__(self) -> None:
        self.predicted = {k: Interval(*v) for k, v in self.predicted.items()}

    @property
    def memory_unmeasured(self) -> list[str]:
        """The frameworks of the pick and the alternatives whose memory was seldom measured
        in a fresh process (:func:`is_memory_unmeasured`)."""
        shown = [(self.framework, self.predicted["peak_rss_mb"])] + [
            (c.config.framework, c.peak_rss_mb) for c in self.alternatives]
        return list(dict.fromkeys(fw for fw, mb in shown if is_memory_unmeasured(mb)))

    @property
    def configs(self) -> list[TrainConfig]:
        """The recommended configuration first, then the alternatives (e.g. to enqueue in a study)."""
        return [self.config] + [c.config for c in self.alternatives]

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "model": self.model, "framework": self.framework,
            "config": self.config.to_dict(),
            "predicted": {k: memory_json(v) if k == "peak_rss_mb" else list(v)
                          for k, v in self.predicted.items()},
            "memory_unmeasured": self.memory_unmeasured,
            "objective": self.objective, "constraints": self.constraints,
            "alternatives": [c.to_dict() for c in self.alternatives],
            "reason": self.reason, "out_of_distribution": self.out_of_distribution,
            "ood_reasons": self.ood_reasons, "interval_notes": self.interval_notes,
            "nearest_workloads": [list(n) for n in self.nearest_workloads],
            "hardware_target": self.hardware_target, "n_candidates": self.n_candidates,
            "kb_records": self.kb_records, "ranked_own_share": self.ranked_own_share,
            "measured_runs": self.measured_runs,
            "defaults": [c.to_dict() for c in self.defaults],
            "frameworks": self.frameworks,
            "retired": self.retired.to_dict() if self.retired is not None else None,
            "storage": self.storage, "caveat": self.caveat, "threads_note": self.threads_note,
        }

    def summary(self, more: str | None = "details()") -> str:
        """The answer in at most 12 lines of at most 120 characters; ``more`` names where the
        reasoning is (:meth:`details`)."""
        from dltune.recommend._format import summary

        return summary(self, more)

    def details(self) -> str:
        """The pick, every candidate shown with its figures, the caveats in full and the reasoning."""
        from dltune.recommend._format import details

        return details(self)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        from dltune.recommend._format import short_repr

        return short_repr(self)

    def _repr_html_(self) -> str:
        from dltune.recommend._format import repr_html

        return repr_html(self)
