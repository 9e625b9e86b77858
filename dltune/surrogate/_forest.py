"""Fitted gradient-boosted trees as plain arrays: saved with numpy, predicted with numpy.

scikit-learn fits the trees; this module copies them into padded arrays (one row per tree) so
that a fitted surrogate is stored as an ``.npz`` file dltune wrote itself (no pickle is ever
loaded) and predicts without importing scikit-learn, which keeps ``recommend`` fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TreeArrays", "compile_hist_gbm"]


@dataclass
class TreeArrays:
    """An additive tree ensemble: ``baseline + sum(tree(x))``.

    Arrays are (n_trees, max_nodes); a leaf's children point to itself, so traversal runs a
    fixed ``depth`` steps for every tree at once.
    """

    baseline: float
    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        n_trees, width = self.feature.shape
        out = np.full(len(X), self.baseline, dtype=np.float64)
        if n_trees == 0 or len(X) == 0:
            return out
        # Flat indices and 1-D takes: several times faster than 2-D fancy indexing.
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        missing_left, left, right = self.missing_left.ravel(), self.left.ravel(), self.right.ravel()
        base = (np.arange(n_trees, dtype=np.int64) * width)[None, :]
        row_base = (np.arange(len(X), dtype=np.int64) * X.shape[1])[:, None]
        flat_x = X.ravel()
        node = np.broadcast_to(base, (len(X), n_trees)).copy()
        for _ in range(self.depth):
            x = flat_x.take(row_base + feature.take(node))
            go_left = np.where(np.isnan(x), missing_left.take(node), x <= threshold.take(node))
            node = base + np.where(go_left, left.take(node), right.take(node))
        return out + self.value.ravel().take(node).sum(axis=1)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {
            f"{prefix}baseline": np.array([self.baseline]),
            f"{prefix}feature": self.feature,
            f"{prefix}threshold": self.threshold,
            f"{prefix}missing_left": self.missing_left,
            f"{prefix}left": self.left,
            f"{prefix}right": self.right,
            f"{prefix}value": self.value,
            f"{prefix}depth": np.array([self.depth]),
        }

    @classmethod
    def from_arrays(cls, arrays, prefix: str) -> TreeArrays:
        return cls(
            baseline=float(arrays[f"{prefix}baseline"][0]),
            feature=np.asarray(arrays[f"{prefix}feature"], dtype=np.int64),
            threshold=np.asarray(arrays[f"{prefix}threshold"], dtype=np.float64),
            missing_left=np.asarray(arrays[f"{prefix}missing_left"], dtype=bool),
            left=np.asarray(arrays[f"{prefix}left"], dtype=np.int64),
            right=np.asarray(arrays[f"{prefix}right"], dtype=np.int64),
            value=np.asarray(arrays[f"{prefix}value"], dtype=np.float64),
            depth=int(arrays[f"{prefix}depth"][0]),
        )


def compile_hist_gbm(estimator) -> TreeArrays:
    """Copy a fitted single-output ``HistGradientBoostingRegressor`` (identity link) to arrays."""
    trees = [iteration[0].nodes for iteration in estimator._predictors]
    if any(t["is_categorical"].any() for t in trees):
        raise ValueError("Categorical splits are not supported by the array form.")
    width = max((len(t) for t in trees), default=1)
    n = len(trees)
    feature = np.zeros((n, width), dtype=np.int64)
    threshold = np.zeros((n, width), dtype=np.float64)
    missing_left = np.zeros((n, width), dtype=bool)
    left = np.tile(np.arange(width, dtype=np.int64), (n, 1))
    right = left.copy()
    value = np.zeros((n, width), dtype=np.float64)
    depth = 0
    for i, t in enumerate(trees):
        k = len(t)
        leaf = t["is_leaf"].astype(bool)
        feature[i, :k] = np.where(leaf, 0, t["feature_idx"])
        threshold[i, :k] = t["num_threshold"]
        missing_left[i, :k] = t["missing_go_to_left"].astype(bool)
        left[i, :k] = np.where(leaf, np.arange(k), t["left"])
        right[i, :k] = np.where(leaf, np.arange(k), t["right"])
        value[i, :k] = np.where(leaf, t["value"], 0.0)
        depth = max(depth, int(t["depth"].max()))
    baseline = float(np.asarray(estimator._baseline_prediction).ravel()[0])
    return TreeArrays(baseline, feature, threshold, missing_left, left, right, value, depth)
