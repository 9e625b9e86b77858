"""Additive models with non-negative coefficients per group, fitted on relative errors: the
structure under the training-time and memory surrogates' trees."""

from __future__ import annotations

import numpy as np

__all__: list[str] = []


def _crossed(terms: np.ndarray, X: np.ndarray, groups: tuple[int, ...]) -> np.ndarray:
    """Each term once per group (one-hot columns of ``X``), zero outside the group."""
    if not len(groups):
        return terms
    return np.hstack([terms * np.nan_to_num(X[:, [g]]) for g in groups])


def _nnls(D: np.ndarray, y: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """Non-negative coefficients of ``D`` for ``y`` (less a known ``offset``), fitted on
    relative errors."""
    from scipy.optimize import nnls

    # Relative errors: each row divided by its measured value, columns scaled to [0, 1].
    A = D / y[:, None]
    scale = A.max(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    target = np.ones(len(y)) if offset is None else 1.0 - offset / y
    coef, _ = nnls(A / scale, target, maxiter=50 * A.shape[1])
    return coef / scale
