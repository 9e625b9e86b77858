"""Selection among scored candidates: the objectives' pick, the Pareto front, the alternatives."""

from __future__ import annotations

import numpy as np

from dltune.recommend._policy import DEFAULT_POLICY, RecommendPolicy

__all__ = ["alternatives_of", "pareto_front", "pick"]


def pareto_front(accuracy: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Indices of the candidates no other beats in both accuracy and time, fastest first."""
    order = np.lexsort((-accuracy, time))
    front, best = [], -np.inf
    for i in order:
        if accuracy[i] > best:
            front.append(i)
            best = accuracy[i]
    return np.array(front, dtype=int)


def pick(objective: str, accuracy: np.ndarray, time: np.ndarray, point: np.ndarray | None = None,
         policy: RecommendPolicy = DEFAULT_POLICY) -> int:
    """The index the objective prefers among the candidates (all assumed feasible); ``accuracy``
    is what the candidates are ranked by (``recommend`` passes the interval's low end), ``point``
    the predicted (or measured) accuracy itself, which breaks the ``accuracy`` objective's ties
    (without it, the fastest of the tied wins). The ``time`` and ``balanced`` objectives rank
    ``policy.point_share`` of the point and the rest of ``accuracy``. ``policy`` gives the ties'
    width, the ``time`` objective's slack and the ``balanced`` exchange rate."""
    if point is not None and objective != "accuracy":
        # Low ends at the chance floor tie every candidate, and the fastest (learning nothing)
        # would win; the point still orders them (docs/explanation/how-recommend-decides.md#objectives-and-constraints).
        accuracy = (1.0 - policy.point_share) * accuracy + policy.point_share * point
    if objective in ("accuracy", "time"):
        slack = policy.accuracy_tie if objective == "accuracy" else policy.time_objective_slack
        ok = np.flatnonzero(accuracy >= accuracy.max() - slack)
        if objective == "accuracy" and point is not None:
            # The highest point among the tied; equal points go to the faster.
            return int(ok[np.lexsort((time[ok], -point[ok]))[0]])
        return int(ok[np.argmin(time[ok])])
    score = 100 * accuracy - policy.balanced_points_per_halving * np.log2(np.maximum(time, 1e-6))
    return int(np.argmax(score))


def alternatives_of(best: int, accuracy: np.ndarray, time: np.ndarray, n: int,
                    policy: RecommendPolicy = DEFAULT_POLICY) -> list[int]:
    """Up to ``n`` indices of alternatives to candidate ``best``, fastest first.

    They lie on the Pareto front of ``accuracy`` (what the candidates are ranked by: the low
    end) and ``time``, spread along the part of it within ``policy.alternatives_within`` of the
    best's accuracy; where that part holds fewer than ``n``, the most accurate of the rest fill in.
    """
    if n <= 0:
        return []
    front = [int(i) for i in pareto_front(accuracy, time) if int(i) != best]
    near = [i for i in front if accuracy[i] >= accuracy[best] - policy.alternatives_within]
    if len(near) > n:
        # Spread along the front rather than taking neighbours of the best.
        near = [near[int(round(j))] for j in np.linspace(0, len(near) - 1, n)]
    rest = sorted(set(front) - set(near), key=lambda i: -accuracy[i])[:n - len(near)]
    return sorted(near + rest, key=lambda i: (time[i], -accuracy[i]))
