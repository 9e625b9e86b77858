"""Surrogate estimators with intervals, following scikit-learn's estimator conventions.

``__init__`` only stores parameters; ``fit(X, y)`` validates them, learns attributes ending in
``_`` and returns ``self``; ``predict`` before ``fit`` raises :class:`NotFittedError`.

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
from dltune._validation import check_bool, check_float, check_int
from dltune.surrogate._forest import TreeArrays, compile_hist_gbm

__all__ = ["AccuracySurrogate", "MemorySurrogate", "QuantileGBMRegressor", "TrainTimeSurrogate"]


class QuantileGBMRegressor:
    """Gradient-boosted trees predicting a value and a calibrated ``coverage`` interval.

    Args:
        coverage: the interval's target coverage (0.8: the 10th to 90th percentile).
        max_iter, learning_rate, max_leaf_nodes, min_samples_leaf, l2_regularization:
            passed to scikit-learn's ``HistGradientBoostingRegressor``.
        calibrate: widen the quantile band by conformal calibration on ``cv`` folds.
        random_state: seed of the folds and the trees.
    """

    def __init__(self, coverage: float = 0.8, max_iter: int = 100, learning_rate: float = 0.08,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0) -> None:
        self.coverage = coverage
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.calibrate = calibrate
        self.cv = cv
        self.random_state = random_state

    # Target transforms: subclasses learn in another space (log seconds, ...).
    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return y

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return t

    def get_params(self, deep: bool = True) -> dict[str, Any]:  # noqa: ARG002
        return {k: getattr(self, k) for k in ("coverage", "max_iter", "learning_rate",
                                              "max_leaf_nodes", "min_samples_leaf",
                                              "l2_regularization", "calibrate", "cv",
                                              "random_state")}

    def _check_params(self) -> None:
        check_float("coverage", self.coverage, 0.0, 1.0, low_open=True, high_open=True)
        check_int("max_iter", self.max_iter, 1, 100_000)
        check_float("learning_rate", self.learning_rate, 0.0, 1.0, low_open=True)
        check_int("max_leaf_nodes", self.max_leaf_nodes, 2, 100_000)
        check_int("min_samples_leaf", self.min_samples_leaf, 1, 100_000)
        check_float("l2_regularization", self.l2_regularization, 0.0, None)
        check_bool("calibrate", self.calibrate)
        check_int("cv", self.cv, 2, 1000)
        check_int("random_state", self.random_state, 0, 2**32 - 1)

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

    def fit(self, X: Any, y: Any) -> QuantileGBMRegressor:
        self._check_params()
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).ravel()
        if X.ndim != 2 or len(X) != len(y):
            raise ParameterError(
                f"The 'X' parameter must be a 2-D array with one row per target. "
                f"Got shape {X.shape} for {len(y)} targets instead."
            )
        if len(y) < 2:
            raise ParameterError(f"The 'y' parameter must hold at least 2 values. Got {len(y)} instead.")
        t = self._to_target(X, y)
        ok = np.isfinite(t)
        X, t = X[ok], t[ok]
        from threadpoolctl import threadpool_limits

        # One OpenMP thread: on small data, more threads spin and run many times slower.
        with threadpool_limits(1):
            self.point_ = compile_hist_gbm(self._gbm("squared_error").fit(X, t))
            self.low_, self.high_ = self._fit_band(X, t)
            self.widen_ = 0.0
            if self.calibrate and len(t) >= 2 * self.cv:
                self.widen_ = self._conformal_margin(X, t)
        self.n_features_in_ = X.shape[1]
        self.n_samples_fit_ = len(t)
        return self

    def _conformal_margin(self, X: np.ndarray, t: np.ndarray) -> float:
        rng = np.random.default_rng(self.random_state)
        folds = np.array_split(rng.permutation(len(t)), self.cv)
        scores = np.empty(len(t))
        for held in folds:
            train = np.setdiff1d(np.arange(len(t)), held)
            low, high = self._fit_band(X[train], t[train])
            scores[held] = np.maximum(low.predict(X[held]) - t[held], t[held] - high.predict(X[held]))
        level = min(1.0, math.ceil((len(t) + 1) * self.coverage) / len(t))
        return max(0.0, float(np.quantile(scores, level)))

    def _check_fitted(self, X: Any) -> np.ndarray:
        if not hasattr(self, "point_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"The 'X' parameter must have {self.n_features_in_} columns. Got shape {X.shape} instead."
            )
        return X

    def predict_target(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Point, low and high in the learned (transformed) target space."""
        X = self._check_fitted(X)
        point = self.point_.predict(X)
        low = np.minimum(self.low_.predict(X) - self.widen_, point)
        high = np.maximum(self.high_.predict(X) + self.widen_, point)
        return point, low, high

    def predict(self, X: Any) -> np.ndarray:
        X = self._check_fitted(X)
        return self._from_target(X, self.point_.predict(X))

    def predict_interval(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Point prediction and the calibrated interval ``(point, low, high)``."""
        X = self._check_fitted(X)
        point, low, high = self.predict_target(X)
        values = [self._from_target(X, v) for v in (point, low, high)]
        return values[0], np.minimum(values[1], values[2]), np.maximum(values[1], values[2])

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = {f"{prefix}meta": np.array([self.widen_, self.n_features_in_, self.n_samples_fit_])}
        for name in ("point_", "low_", "high_"):
            arrays.update(getattr(self, name).to_arrays(f"{prefix}{name}"))
        return arrays

    def load_arrays(self, arrays, prefix: str) -> QuantileGBMRegressor:
        """Restore the fitted state written by :meth:`to_arrays`."""
        widen, n_features, n_samples = arrays[f"{prefix}meta"]
        for name in ("point_", "low_", "high_"):
            setattr(self, name, TreeArrays.from_arrays(arrays, f"{prefix}{name}"))
        self.widen_, self.n_features_in_, self.n_samples_fit_ = float(widen), int(n_features), int(n_samples)
        return self


class AccuracySurrogate(QuantileGBMRegressor):
    """Test accuracy in [0, 1]."""

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.clip(t, 0.0, 1.0)


class MemorySurrogate(QuantileGBMRegressor):
    """Peak resident memory in MB, learned as its logarithm."""

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y)

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.exp(t)


class TrainTimeSurrogate(QuantileGBMRegressor):
    """Training seconds = work / throughput; the log throughput is what is learned.

    ``X[:, work_column]`` must hold ``log(epochs x samples x FLOPs per sample)``. The log
    throughput is first modelled by a ridge regression on ``linear_columns`` (e.g. log work,
    log steps, log batch size, threads), each also crossed with the indicator ``group_columns``
    (e.g. one-hot frameworks) — a power law per framework that extrapolates to unseen sizes —
    and the trees then learn what that leaves (the residual), with the interval around it.
    With no ``linear_columns`` the trees learn the log throughput alone.
    """

    def __init__(self, work_column: int = -1, linear_columns: tuple[int, ...] = (),
                 group_columns: tuple[int, ...] = (), ridge_alpha: float = 0.1,
                 coverage: float = 0.8, max_iter: int = 30, learning_rate: float = 0.08,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0) -> None:
        super().__init__(coverage, max_iter, learning_rate, max_leaf_nodes, min_samples_leaf,
                         l2_regularization, calibrate, cv, random_state)
        self.work_column = work_column
        self.linear_columns = linear_columns
        self.group_columns = group_columns
        self.ridge_alpha = ridge_alpha

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"work_column": self.work_column, "linear_columns": tuple(self.linear_columns),
                "group_columns": tuple(self.group_columns), "ridge_alpha": self.ridge_alpha,
                **super().get_params(deep)}

    def _design(self, X: np.ndarray) -> np.ndarray:
        # Outside the measured range the throughput is held at its edge (time still grows with
        # the work column): a power law fitted on 1-2 threads must not be extrapolated to 72.
        base = np.clip(X[:, list(self.linear_columns)], self.lin_low_, self.lin_high_)
        parts = [base]
        for g in self.group_columns:
            parts += [X[:, [g]], X[:, [g]] * base]
        return np.nan_to_num(np.hstack(parts))

    def _linear(self, X: np.ndarray) -> np.ndarray:
        if not len(self.linear_columns):
            return np.zeros(len(X))
        return (self._design(X) - self.lin_mean_) / self.lin_scale_ @ self.lin_coef_ + self.lin_intercept_

    def fit(self, X: Any, y: Any) -> TrainTimeSurrogate:
        check_float("ridge_alpha", self.ridge_alpha, 0.0, None)
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).ravel()
        width = len(self.linear_columns) * (1 + len(self.group_columns)) + len(self.group_columns)
        self.lin_mean_, self.lin_scale_ = np.zeros(width), np.ones(width)
        self.lin_coef_, self.lin_intercept_ = np.zeros(width), 0.0
        self.lin_low_ = np.full(len(self.linear_columns), -np.inf)
        self.lin_high_ = np.full(len(self.linear_columns), np.inf)
        if len(self.linear_columns) and X.ndim == 2 and len(X) == len(y):
            with np.errstate(divide="ignore", invalid="ignore"):
                t = X[:, self.work_column] - np.log(y)
            ok = np.isfinite(t)
            base = X[ok][:, list(self.linear_columns)]
            self.lin_low_, self.lin_high_ = np.nanmin(base, axis=0), np.nanmax(base, axis=0)
            D = self._design(X[ok])
            self.lin_mean_ = D.mean(axis=0)
            spread = D.std(axis=0)
            self.lin_scale_ = np.where(spread > 1e-12, spread, 1.0)
            Z = (D - self.lin_mean_) / self.lin_scale_
            self.lin_intercept_ = float(t[ok].mean())
            # Ridge in closed form on standardized columns: (Z'Z + aI) w = Z'(t - mean).
            gram = Z.T @ Z + self.ridge_alpha * np.eye(Z.shape[1])
            self.lin_coef_ = np.linalg.solve(gram, Z.T @ (t[ok] - self.lin_intercept_))
        return super().fit(X, y)

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return X[:, self.work_column] - np.log(y) - self._linear(X)

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.exp(X[:, self.work_column] - t - self._linear(X))

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        arrays.update({f"{prefix}lin_mean": self.lin_mean_, f"{prefix}lin_scale": self.lin_scale_,
                       f"{prefix}lin_coef": self.lin_coef_,
                       f"{prefix}lin_low": self.lin_low_, f"{prefix}lin_high": self.lin_high_,
                       f"{prefix}lin_intercept": np.array([self.lin_intercept_])})
        return arrays

    def load_arrays(self, arrays, prefix: str) -> TrainTimeSurrogate:
        super().load_arrays(arrays, prefix)
        self.lin_mean_ = np.asarray(arrays[f"{prefix}lin_mean"], dtype=np.float64)
        self.lin_scale_ = np.asarray(arrays[f"{prefix}lin_scale"], dtype=np.float64)
        self.lin_coef_ = np.asarray(arrays[f"{prefix}lin_coef"], dtype=np.float64)
        self.lin_low_ = np.asarray(arrays[f"{prefix}lin_low"], dtype=np.float64)
        self.lin_high_ = np.asarray(arrays[f"{prefix}lin_high"], dtype=np.float64)
        self.lin_intercept_ = float(arrays[f"{prefix}lin_intercept"][0])
        return self
