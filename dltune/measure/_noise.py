"""Seed noise: how much one run's accuracy moves with the seed alone."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

# Repeat pairs (one configuration, two seeds) a workload needs before its own seed noise is
# used (by dltune.recommend for its measured configurations' intervals).
MIN_NOISE_PAIRS = 3


def seed_noise(differences: Any) -> float:
    """One run's seed noise (a Gaussian sigma) from the accuracy differences of repeat pairs,
    robustly: their median absolute value / 0.6745 / sqrt 2."""
    return float(np.median(np.abs(differences)) / 0.6745 / math.sqrt(2))


class SeedNoise(NamedTuple):
    """One run's seed noise on a workload, at accuracy p: ``scale * sqrt(p (1 - p))``, at
    least ``floor`` (one test sample's worth, 1 / n_test).

    Runs near 100 % cannot scatter much; runs halfway can. On the shipped knowledge base's 600
    repeat pairs the median difference is 4.2 points between 50 and 80 % and 0.5 between 95
    and 98 %; divided by sqrt(p (1 - p)), 0.09 and 0.03.
    """

    scale: float
    floor: float = 0.0

    def at(self, accuracy: Any) -> np.ndarray:
        p = np.clip(np.asarray(accuracy, dtype=float), 0.0, 1.0)
        return np.maximum(self.scale * np.sqrt(p * (1.0 - p)), self.floor)


def noise_scale(pairs: Sequence[Sequence[float]], floor: float = 0.0) -> float | None:
    """The scale of :class:`SeedNoise` from repeat pairs (two accuracies of one configuration),
    or None with fewer than :data:`MIN_NOISE_PAIRS` that tell: a pair whose mean is within
    ``floor`` of 0 or 100 % says nothing of the scale (its runs have no room to differ)."""
    eps = 1e-9  # a mean exactly one test sample from the edge tells, whatever the rounding
    telling = [(a - b, m) for a, b in pairs
               if 0.0 < (m := (a + b) / 2) < 1.0 and floor - eps <= m <= 1.0 - floor + eps]
    if len(telling) < MIN_NOISE_PAIRS:
        return None
    return seed_noise([d / math.sqrt(m * (1.0 - m)) for d, m in telling])
