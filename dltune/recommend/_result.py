"""What ``recommend`` returns: the recommendation and its candidates, with their table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dltune.config import TrainConfig
from dltune.recommend._candidates import describe

__all__ = ["Candidate", "Recommendation"]


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
    of its interval, which the objectives rank by), within ``RecommendPolicy.alternatives_within`` of
    the pick's where the front allows (:func:`alternatives_of`). ``defaults`` is each candidate
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
