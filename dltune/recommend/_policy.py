"""``RecommendPolicy``: every knob of the recommendation's decision, defined once."""

from __future__ import annotations

from dataclasses import dataclass, fields

from dltune._errors import ParameterError
from dltune._validation import check_float, check_int

__all__ = ["DEFAULT_POLICY", "RecommendPolicy", "check_policy"]


@dataclass(frozen=True)
class RecommendPolicy:
    """How the surrogates' predictions become a decision: which candidates there are, how far
    their intervals widen where the knowledge base says little, and how the objectives rank
    them. ``recommend`` and ``kb validate`` score through it alike (:func:`score_candidates`).

    What the surrogates fit and save does not depend on it; each field names the section of
    docs/explanation/how-recommend-decides.md that measured or explains it. Fractions of accuracy are in [0, 1]
    (0.005 is half a point).
    """

    accuracy_tie: float = 0.005
    """``accuracy``: ranked within this of the best are tied; the highest point wins (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    time_objective_slack: float = 0.02
    """``time``: the fastest candidate ranked within this of the best (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    balanced_points_per_halving: float = 1.0
    """``balanced``: the accuracy points that halving the training time is worth (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    point_share: float = 0.5
    """``balanced`` and ``time``: the share of the predicted point in the accuracy they rank, the rest the low end: a low end at chance (every candidate's, where some runs learn nothing) tells none apart (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    alternatives_within: float = 0.05
    """Alternatives come from the Pareto front's part ranked within this of the pick (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    min_framework_runs: int = 60
    """Runs of a framework, on ``min_framework_workloads`` workloads, before it is a candidate (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    min_framework_workloads: int = 6
    """Workloads those runs span (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    candidate_batches: tuple[int, ...] = (16, 32, 64, 128, 256)
    """The grid's batch sizes (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    candidate_epochs: int = 6
    """Epoch counts spread by ratio over the measured range, its ends included (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    grid_per_framework: int = 160
    """Each optimizer x batch x epochs x threads cell gets max(1, this // cells) triples of learning rates (docs/explanation/how-recommend-decides.md#objectives-and-constraints)."""
    data_size_ood: float = 2.0
    """A data set more than this many times the largest measured is flagged, its time and memory intervals widened (docs/explanation/how-recommend-decides.md#out-of-distribution)."""
    hardware_memory_range: float = 2.0
    """Memory below 1/this of the least measured or above this times the most is flagged (docs/explanation/how-recommend-decides.md#out-of-distribution)."""
    hardware_time_factor: float = 3.0
    """The training-time interval widens this much each way per way the hardware is unlike the measured (docs/explanation/how-recommend-decides.md#out-of-distribution)."""
    hardware_memory_factor: float = 1.5
    """The memory interval widens this much each way per way the hardware is unlike the measured (docs/explanation/how-recommend-decides.md#out-of-distribution)."""
    installation_memory_factor: float = 1.3
    """The memory interval's high end reaches at least this times its point: another installation's library pages (docs/explanation/how-recommend-decides.md#limits)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if name == "candidate_batches":
                if not isinstance(value, tuple) or not value:
                    raise ParameterError(f"The '{name}' parameter must be a non-empty tuple of ints "
                                         f"in [1, inf). Got {value!r} instead.")
                for v in value:
                    check_int(name, v, 1)
            elif isinstance(f.default, int):
                check_int(name, value, 1)
            elif name in ("accuracy_tie", "time_objective_slack", "alternatives_within", "point_share"):
                check_float(name, value, 0.0, 1.0)
            elif name == "balanced_points_per_halving":
                check_float(name, value, 0.0, None)
            else:  # ratios and widening factors: 1 is none
                check_float(name, value, 1.0, None)


DEFAULT_POLICY = RecommendPolicy()


def check_policy(policy: object) -> RecommendPolicy:
    """``policy``, or the default one for None; a ParameterError for anything else."""
    if policy is None:
        return DEFAULT_POLICY
    if not isinstance(policy, RecommendPolicy):
        raise ParameterError(f"The 'policy' parameter must be a RecommendPolicy or None. "
                             f"Got {type(policy).__name__} instead.")
    return policy
