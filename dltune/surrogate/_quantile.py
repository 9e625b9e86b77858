"""The surrogates' base: gradient-boosted trees with a calibrated interval.

:class:`QuantileGBM` holds what the surrogates compute; the scikit-learn estimators
(:mod:`dltune.surrogate._estimators`) add ``BaseEstimator`` and ``RegressorMixin`` to it. A saved
model loads into the classes here, which predict without importing scikit-learn: importing
``sklearn.base`` imports SciPy and pandas, which a recommendation from a saved model never
needs (``benchmarks/recommend_speed.py``).

Each estimator fits a gradient-boosted point model (squared error) and two quantile models,
then widens the quantile band by conformalized quantile regression on out-of-fold
predictions, so the interval's coverage holds on data the model has not seen rather than
on its own training data.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dltune._errors import NotFittedError, ParameterError
from dltune.surrogate._forest import TreeArrays, compile_hist_gbm

__all__ = ["QuantileGBM"]


class QuantileGBM:
    """Gradient-boosted trees predicting a value and a calibrated ``coverage`` interval
    (:class:`~dltune.surrogate.QuantileGBMRegressor` is the estimator).

    Args:
        coverage: the interval's target coverage (0.8: the 10th to 90th percentile).
        max_iter, learning_rate, max_leaf_nodes, min_samples_leaf, l2_regularization:
            passed to scikit-learn's ``HistGradientBoostingRegressor``.
        calibrate: widen the quantile band by conformal calibration on ``cv`` folds.
        random_state: seed of the folds and the trees.
        tree_columns: the columns of ``X`` the trees split on (default: all); target
            transforms of subclasses may still read the others.
    """

    def __init__(self, coverage: float = 0.8, max_iter: int = 100, learning_rate: float = 0.08,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0, tree_columns: tuple[int, ...] | None = None) -> None:
        self.coverage = coverage
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.calibrate = calibrate
        self.cv = cv
        self.random_state = random_state
        self.tree_columns = tree_columns

    def _trees_X(self, X: np.ndarray) -> np.ndarray:
        return X if self.tree_columns is None else X[:, list(self.tree_columns)]

    def _band_X(self, X: np.ndarray) -> np.ndarray:
        """The columns the interval's quantile ensembles split on."""
        return self._trees_X(X)

    # Target transforms: subclasses learn in another space (log seconds, ...).
    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return y

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return t

    def _gbm(self, loss: str, quantile: float | None = None):
        from sklearn.ensemble import HistGradientBoostingRegressor

        kwargs = dict(loss=loss, max_iter=self.max_iter, learning_rate=self.learning_rate,
                      max_leaf_nodes=self.max_leaf_nodes, min_samples_leaf=self.min_samples_leaf,
                      l2_regularization=self.l2_regularization, early_stopping=False,
                      random_state=self.random_state)
        if quantile is not None:
            kwargs["quantile"] = quantile
        return HistGradientBoostingRegressor(**kwargs)

    def _fit_band(self, X: np.ndarray, t: np.ndarray) -> tuple[TreeArrays, TreeArrays]:
        low_q, high_q = (1 - self.coverage) / 2, 1 - (1 - self.coverage) / 2
        return (compile_hist_gbm(self._gbm("quantile", low_q).fit(X, t)),
                compile_hist_gbm(self._gbm("quantile", high_q).fit(X, t)))

    def _fit(self, X: np.ndarray, y: np.ndarray, groups: Any = None) -> QuantileGBM:
        """Fit on ``X`` and ``y`` as the estimator's ``fit`` checked them; with ``groups`` (one
        label per row, e.g. the workload) the conformal folds hold out whole groups, so the
        interval is calibrated for a group the model has not seen."""
        if groups is not None:
            groups = np.asarray(groups).ravel()
            if len(groups) != len(y):
                raise ParameterError(
                    f"The 'groups' parameter must hold one label per row ({len(y)}). "
                    f"Got {len(groups)} instead."
                )
        t = self._to_target(X, y)
        ok = np.isfinite(t)
        n_features = X.shape[1]
        X, y, t = X[ok], y[ok], t[ok]
        groups = groups[ok] if groups is not None else None
        from threadpoolctl import threadpool_limits

        # One OpenMP thread: on small data, more threads spin and run many times slower.
        with threadpool_limits(1):
            self.point_ = compile_hist_gbm(self._gbm("squared_error").fit(
                self._trees_X(X), self._value_target(X, t)))
            self.low_, self.high_ = self._fit_band(self._band_X(X), t)
            self.widen_ = 0.0
            if self.calibrate and len(t) >= 2 * self.cv:
                self.widen_ = self._conformal_margin(X, y, t, groups)
        self.n_features_in_ = n_features
        self.n_samples_fit_ = len(t)
        return self

    def _fold_targets(self, X: np.ndarray, y: np.ndarray, t: np.ndarray, train: np.ndarray) -> np.ndarray:
        """Targets of every row as a model fitted on ``train`` only would see them (a target
        transform with fitted parts refits those)."""
        return t

    def _value_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """What the point ensemble learns, from the band's target ``t``; ``_point_target``
        returns its predictions in ``t``'s units."""
        return t

    def _conformal_margin(self, X: np.ndarray, y: np.ndarray, t: np.ndarray, groups) -> float:
        rng = np.random.default_rng(self.random_state)
        if groups is not None and len(np.unique(groups)) >= self.cv:
            labels = np.unique(groups)
            held_labels = np.array_split(rng.permutation(labels), self.cv)
            folds = [np.flatnonzero(np.isin(groups, h)) for h in held_labels]
        else:
            folds = np.array_split(rng.permutation(len(t)), self.cv)
        scores = np.empty(len(t))
        for held in folds:
            train = np.setdiff1d(np.arange(len(t)), held)
            tf = self._fold_targets(X, y, t, train)
            low, high = self._fit_band(self._band_X(X[train]), tf[train])
            Xh = self._band_X(X[held])
            scores[held] = np.maximum(low.predict(Xh) - tf[held], tf[held] - high.predict(Xh))
        level = min(1.0, math.ceil((len(t) + 1) * self.coverage) / len(t))
        return max(0.0, float(np.quantile(scores, level)))

    def _check_fitted(self, X: Any) -> np.ndarray:
        if not hasattr(self, "point_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )
        # Checked here rather than by scikit-learn's validate_data, in its words: predicting
        # does not import scikit-learn.
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ParameterError(
                f"Expected a 2-D array, got shape {X.shape} instead. Reshape your data: one row "
                "per sample, one column per feature."
            )
        if X.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        return X

    def predict_target(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Point, low and high in the learned (transformed) target space."""
        X = self._check_fitted(X)
        point = self._point_target(X)
        low, high = self._band_target(self._band_X(X))
        return point, np.minimum(low, point), np.maximum(high, point)

    def _band_target(self, Xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The quantile ensembles' calibrated ends, in the learned target space."""
        return self.low_.predict(Xt) - self.widen_, self.high_.predict(Xt) + self.widen_

    def _point_target(self, X: np.ndarray) -> np.ndarray:
        return self.point_.predict(self._trees_X(X))

    def predict(self, X: Any) -> np.ndarray:
        X = self._check_fitted(X)
        return self._from_target(X, self._point_target(X))

    def predict_interval(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Point prediction and the calibrated interval ``(point, low, high)``."""
        X = self._check_fitted(X)
        return self._interval_around(X, self._point_target(X))

    def _interval_around(self, X: np.ndarray, point: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(point, low, high)`` in output units for ``point`` (learned target space): the
        calibrated band, stretched to hold the point where it falls outside."""
        low, high = self._band_target(self._band_X(X))
        values = [self._from_target(X, v) for v in (point, np.minimum(low, point), np.maximum(high, point))]
        return values[0], np.minimum(values[1], values[2]), np.maximum(values[1], values[2])

    def predict_band(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated interval ``(low, high)`` of the quantile ensembles alone: as
        :meth:`predict_interval`'s but not stretched to hold the point where it falls outside
        (the point is not computed)."""
        X = self._check_fitted(X)
        low, high = (self._from_target(X, end) for end in self._band_target(self._band_X(X)))
        return np.minimum(low, high), np.maximum(low, high)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = {f"{prefix}meta": np.array([self.widen_, self.n_features_in_, self.n_samples_fit_])}
        for name in ("point_", "low_", "high_"):
            arrays.update(getattr(self, name).to_arrays(f"{prefix}{name}"))
        return arrays

    def load_arrays(self, arrays, prefix: str) -> QuantileGBM:
        """Restore the fitted state written by :meth:`to_arrays`."""
        widen, n_features, n_samples = arrays[f"{prefix}meta"]
        for name in ("point_", "low_", "high_"):
            setattr(self, name, TreeArrays.from_arrays(arrays, f"{prefix}{name}"))
        self.widen_, self.n_features_in_, self.n_samples_fit_ = float(widen), int(n_features), int(n_samples)
        return self
