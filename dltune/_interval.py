"""``Interval``: a predicted (or measured) value with the interval it is expected in."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Interval"]


def _short(value: float) -> str:
    # Fractions (accuracies) keep three decimals, so 0.97 reads 0.970 beside 0.962; larger
    # values (seconds, MB) four significant digits.
    if value == 0 or 0.001 <= abs(value) < 1:
        return f"{value:.3f}"
    return f"{value:.4g}"


class Interval(NamedTuple):
    """``point`` and the interval ``[low, high]`` around it; a tuple, so that
    ``point, low, high = interval`` unpacks it and ``list(interval)`` is JSON-ready."""

    point: float
    low: float
    high: float

    def __repr__(self) -> str:
        return f"{_short(self.point)} [{_short(self.low)}, {_short(self.high)}]"

