from __future__ import annotations

import numpy as np

from dltune.recommend import RecommendPolicy, pick


def test_balanced_does_not_pick_the_fastest_when_every_low_end_sits_at_chance():
    """Where some runs of a workload learn nothing, every candidate's low end is chance: ranked by
    it alone, the fastest (one epoch, learning nothing) wins. The points still tell them apart."""
    floor = np.array([0.5, 0.5, 0.5])
    time = np.array([0.2, 2.0, 60.0])
    point = np.array([0.54, 0.89, 0.90])
    assert pick("balanced", floor, time) == 0  # no points: only the time tells them apart
    assert pick("balanced", floor, time, point) == 1  # a point more is not worth 30x the time
    # Among candidates whose low ends differ, the surer still wins over a higher point.
    low, time, point = np.array([0.90, 0.60]), np.array([1.0, 1.0]), np.array([0.92, 0.95])
    assert pick("balanced", low, time, point) == 0
    # All point (share 1) or all low end (share 0).
    assert pick("balanced", low, time, point, RecommendPolicy(point_share=1.0)) == 1
    assert pick("balanced", floor, np.array([0.2, 2.0, 60.0]), np.array([0.54, 0.89, 0.90]),
                RecommendPolicy(point_share=0.0)) == 0


def test_time_does_not_pick_a_run_that_learns_nothing_when_every_low_end_sits_at_chance():
    floor, time = np.array([0.5, 0.5, 0.5]), np.array([0.2, 2.0, 60.0])
    point = np.array([0.54, 0.89, 0.90])
    assert pick("time", floor, time) == 0
    # the surest by low end and point alike is the 0.90 one; within the slack of it, the faster
    assert pick("time", floor, time, point) == 1
    assert pick("time", floor, time, point, RecommendPolicy(point_share=0.0)) == 0
