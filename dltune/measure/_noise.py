"""Seed noise: how much one run's accuracy moves with the seed alone."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# Repeat pairs (one configuration, two seeds) a workload needs before its own seed noise is
# used (by dltune.recommend for its measured configurations' intervals).
MIN_NOISE_PAIRS = 3


def seed_noise(differences: Any) -> float:
    """One run's seed noise (a Gaussian sigma) from the accuracy differences of repeat pairs,
    robustly: their median absolute value / 0.6745 / sqrt 2."""
    return float(np.median(np.abs(differences)) / 0.6745 / math.sqrt(2))
