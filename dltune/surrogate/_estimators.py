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
import warnings
from typing import Any

import numpy as np

from dltune._errors import NotFittedError, ParameterError
from dltune._validation import check_bool, check_float, check_int
from dltune.surrogate._forest import TreeArrays, compile_hist_gbm

__all__ = ["AccuracySurrogate", "COST_INPUTS", "COST_TERMS", "MemorySurrogate", "QuantileGBMRegressor",
           "SIZE_INPUTS", "SIZE_TERMS", "TrainTimeSurrogate", "cost_terms", "held_data_mb", "size_terms",
           "workload_ranks"]


class QuantileGBMRegressor:
    """Gradient-boosted trees predicting a value and a calibrated ``coverage`` interval.

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

    def get_params(self, deep: bool = True) -> dict[str, Any]:  # noqa: ARG002
        return {k: getattr(self, k) for k in ("coverage", "max_iter", "learning_rate",
                                              "max_leaf_nodes", "min_samples_leaf",
                                              "l2_regularization", "calibrate", "cv",
                                              "random_state", "tree_columns")}

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

    def fit(self, X: Any, y: Any, groups: Any = None) -> QuantileGBMRegressor:
        """Fit; with ``groups`` (one label per row, e.g. the workload) the conformal folds hold
        out whole groups, so the interval is calibrated for a group the model has not seen."""
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
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"The 'X' parameter must have {self.n_features_in_} columns. Got shape {X.shape} instead."
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
        point, low, high = self.predict_target(X)
        values = [self._from_target(X, v) for v in (point, low, high)]
        return values[0], np.minimum(values[1], values[2]), np.maximum(values[1], values[2])

    def predict_band(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated interval ``(low, high)`` of the quantile ensembles alone: as
        :meth:`predict_interval`'s but not stretched to hold the point where it falls outside
        (the point is not computed, which is what costs most where an order model ranks it)."""
        X = self._check_fitted(X)
        low, high = (self._from_target(X, end) for end in self._band_target(self._band_X(X)))
        return np.minimum(low, high), np.maximum(low, high)

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


# Rows of one workload predicted together before AccuracySurrogate reorders them by its order model.
MIN_ORDER_ROWS = 10
# The least distance from the reference to chance, in log error ratio, that AccuracySurrogate's
# value target divides by (a reference no better than chance has none).
MIN_SPAN = 0.1


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their average (as scipy.stats.rankdata, without importing
    scipy.stats into a recommendation's process)."""
    sorter = np.argsort(a, kind="stable")
    inverse = np.empty_like(sorter)
    inverse[sorter] = np.arange(len(a))
    ordered = a[sorter]
    new = np.r_[True, ordered[1:] != ordered[:-1]]
    dense = np.cumsum(new)[inverse]
    bounds = np.r_[np.flatnonzero(new), len(new)]
    return 0.5 * (bounds[dense] + bounds[dense - 1] + 1)


def workload_ranks(t: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each value's rank among its workload's (equal ``labels``), scaled to [0, 1]; tied values
    share their average rank.

    Ties are common: a test set of n samples measures accuracy in steps of 1/n, and an easy
    workload puts most of its runs at exactly 100 %. Told apart by the order the runs were
    measured in, they would teach the order model a ranking that is not there (leave-one-
    workload-out on the shipped knowledge base: Spearman 0.72 mean, 0.80 or more on 10 of 34
    workloads, regret 5.00 points at worst; with average ranks 0.73, 14 of 34, 3.80).
    """
    rank = np.zeros(len(t))
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        if len(rows) > 1:
            rank[rows] = (_ranks(t[rows]) - 1) / (len(rows) - 1)
    return rank


class AccuracySurrogate(QuantileGBMRegressor):
    """Test accuracy in [0, 1], learned relative to what the workload allows.

    With ``reference_columns`` (cheap landmark accuracies, e.g. logistic regression and 1-NN on
    a subsample; the best is the reference) the trees learn the log ratio of a configuration's
    error rate to the reference's, ``log((1 - accuracy + d) / (1 - reference + d))``, with ``d``
    half a test sample (``n_test_column``: log test-set size) so that a perfect score stays
    finite. Workloads differ mostly in the reference, configurations in the ratio, so the ratio
    is what transfers to a workload the knowledge base has not measured; and the log resolves
    the top, where recommendations are made: 99.5 % and 99.9 % differ by a factor of 5 in
    error, not by 0.4 points, and predictions never pile up at 100 %. With ``classes_column``
    (log number of classes) no prediction falls below chance: a ratio learnt from a diverged
    run on an easy workload (100x the reference's error) means "guessing" on a hard one, not
    a negative accuracy. Without reference columns the trees learn the accuracy itself.

    The interval's quantile ensembles learn that ratio; the point's ensemble learns it as a
    share of the way from the reference to chance (the ratio divided by chance's: 0 the
    reference, 1 guessing, on every workload). The ratio is unbounded on an easy workload (a
    diverged run makes 100x the reference's error) and ends near 2x on a hard one, so a ratio
    learnt on easy workloads put a hard workload's runs at chance (leave-one-workload-out on
    the shipped knowledge base: the 2,000-sample 8x8x1 LeNet at difficulty 0.7, 65 % measured
    in the median, was predicted at chance, 20 %); as a share of the way the accuracy MAE fell
    from 9.97 to 8.51 points and that LeNet's from 29.3 to 6.1. The bands stay on the ratio:
    their low end, which ``recommend`` ranks by, learns from it how configurations fail (on the
    share of the way the pick's regret rose from 0.70 to 0.96 points; docs/recommendation-history.md).

    With ``workload_columns`` (the columns that identify a workload) a second ensemble learns
    the *order* of configurations within a workload: each row's rank among its workload's rows
    (``groups`` at fit, else equal workload columns), scaled to [0, 1], tied rows sharing their
    average (:func:`workload_ranks`). Squared error on the
    ratio is dominated by the few runs that diverge (100x the reference's error); ranks weigh
    every run alike, which is what ordering the good configurations needs. Where at least
    :data:`MIN_ORDER_ROWS` rows of one workload are predicted together (a recommendation's
    candidates, a workload's measured runs), the point predictions are the same values
    reassigned in that learnt order: the value model says how accurate the workload's
    configurations are, the order model which of them is which.

    The interval's quantile ensembles split on ``band_columns`` (default: ``tree_columns``),
    which may leave out columns the point's value and order ensembles see.

    With ``transfer`` > 0 the order also draws on the measured workloads one by one: each
    workload with :data:`MIN_ORDER_ROWS` or more rows gets a small ensemble of its own that
    learns its configurations' ranks, and a workload being predicted is ordered by those
    ensembles' average, each weighted by how alike the two workloads are
    (``exp(-d^2 / transfer_bandwidth)``, ``d`` the distance between their standardised workload
    columns; a tenth of that for a workload of another model, told apart by
    ``model_columns``: one tuple of one-hot columns per model), mixed with the order model's
    ranks in the proportion ``transfer``. Which configurations rank high carries over best
    between workloads that are alike; one ensemble over all workloads averages that away.
    Leave-one-workload-out on the shipped knowledge base: Spearman 0.70 mean / 0.28 min
    without, 0.72 / 0.34 with ``transfer=0.5`` (docs/recommendation.md).
    """

    def __init__(self, reference_columns: tuple[int, ...] = (), n_test_column: int | None = None,
                 classes_column: int | None = None, workload_columns: tuple[int, ...] = (),
                 model_columns: tuple[tuple[int, ...], ...] = (), transfer: float = 0.0,
                 transfer_bandwidth: float = 10.0, coverage: float = 0.8, max_iter: int = 100,
                 learning_rate: float = 0.08,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0, tree_columns: tuple[int, ...] | None = None,
                 band_columns: tuple[int, ...] | None = None) -> None:
        super().__init__(coverage, max_iter, learning_rate, max_leaf_nodes, min_samples_leaf,
                         l2_regularization, calibrate, cv, random_state, tree_columns)
        self.band_columns = band_columns
        self.reference_columns = reference_columns
        self.n_test_column = n_test_column
        self.classes_column = classes_column
        self.workload_columns = workload_columns
        self.model_columns = model_columns
        self.transfer = transfer
        self.transfer_bandwidth = transfer_bandwidth

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"reference_columns": tuple(self.reference_columns),
                "n_test_column": self.n_test_column, "classes_column": self.classes_column,
                "workload_columns": tuple(self.workload_columns),
                "model_columns": tuple(tuple(c) for c in self.model_columns),
                "transfer": self.transfer, "transfer_bandwidth": self.transfer_bandwidth,
                "band_columns": None if self.band_columns is None else tuple(self.band_columns),
                **super().get_params(deep)}

    def _band_X(self, X: np.ndarray) -> np.ndarray:
        return self._trees_X(X) if self.band_columns is None else X[:, list(self.band_columns)]

    def _check_params(self) -> None:
        super()._check_params()
        check_float("transfer", self.transfer, 0.0, 1.0)
        check_float("transfer_bandwidth", self.transfer_bandwidth, 0.0, None, low_open=True)

    def _model_ids(self, X: np.ndarray) -> np.ndarray:
        """Which of ``model_columns``' models each row is (-1: none of them)."""
        ids = np.full(len(X), -1)
        for i, cols in enumerate(self.model_columns):
            ids[(ids < 0) & (np.nan_to_num(X[:, list(cols)]).sum(axis=1) > 0)] = i
        return ids

    def _workload_groups(self, X: np.ndarray) -> np.ndarray:
        """A group id per row: rows with equal workload columns are one workload."""
        keys = np.nan_to_num(X[:, list(self.workload_columns)], nan=-1e300)
        return np.unique(keys, axis=0, return_inverse=True)[1].ravel()

    def fit(self, X: Any, y: Any, groups: Any = None) -> AccuracySurrogate:
        super().fit(X, y, groups)
        self.order_ = None
        if len(self.workload_columns):
            X = np.asarray(X, dtype=np.float64)
            t = self._to_target(X, np.asarray(y, dtype=np.float64).ravel())
            ok = np.isfinite(t)
            labels = np.asarray(groups).ravel()[ok] if groups is not None else self._workload_groups(X[ok])
            X, t = X[ok], t[ok]
            rank = workload_ranks(t, labels)
            from threadpoolctl import threadpool_limits

            Xt = self._trees_X(X)
            with threadpool_limits(1):
                self.order_ = compile_hist_gbm(self._gbm("squared_error").fit(Xt, rank))
                self._fit_transfer(X, Xt, rank, labels)
        return self

    def _fit_transfer(self, X: np.ndarray, Xt: np.ndarray, rank: np.ndarray, labels: np.ndarray) -> None:
        """One rank ensemble per workload with enough rows (on ``Xt``, the trees' columns of
        ``X``), with its workload columns."""
        self.transfer_trees_: list[TreeArrays] = []
        vectors, models = [], []
        if self.transfer > 0:
            for label in np.unique(labels):
                rows = np.flatnonzero(labels == label)
                if len(rows) < MIN_ORDER_ROWS:
                    continue
                fit = self._gbm("squared_error").fit(Xt[rows], rank[rows])
                self.transfer_trees_.append(compile_hist_gbm(fit))
                vectors.append(X[rows[0], list(self.workload_columns)])
                models.append(self._model_ids(X[rows[:1]])[0])
        self.transfer_vectors_ = np.array(vectors, dtype=np.float64).reshape(
            len(vectors), len(self.workload_columns))
        self.transfer_models_ = np.array(models, dtype=np.int64)
        self._set_transfer_scale()

    def _set_transfer_scale(self) -> None:
        v = self.transfer_vectors_
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
            self.transfer_center_ = np.nan_to_num(np.nanmean(v, axis=0)) if len(v) else np.zeros(v.shape[1])
            scale = np.nan_to_num(np.nanstd(v, axis=0)) if len(v) else np.ones(v.shape[1])
        self.transfer_scale_ = np.where(scale > 0, scale, 1.0)

    def _transfer_order(self, X: np.ndarray) -> np.ndarray | None:
        """The measured workloads' ranks for rows of one workload, weighted by likeness."""
        if not len(getattr(self, "transfer_trees_", ())):
            return None
        z = np.nan_to_num((X[0, list(self.workload_columns)] - self.transfer_center_) / self.transfer_scale_)
        zs = np.nan_to_num((self.transfer_vectors_ - self.transfer_center_) / self.transfer_scale_)
        model = self._model_ids(X[:1])[0]
        log_weights = (-np.sum((zs - z) ** 2, axis=1) / self.transfer_bandwidth
                       + np.where((self.transfer_models_ == model) & (model >= 0), 0.0, math.log(0.1)))
        # Relative to the closest: a workload far from every measured one would otherwise
        # underflow every weight to 0 (and its order to NaN).
        weights = np.exp(log_weights - log_weights.max())
        # Workloads whose weight is negligible next to the closest one are not evaluated.
        used = np.flatnonzero(weights >= 1e-4 * weights.max())
        # Candidates that differ only in what the trees do not see (framework, threads) share
        # a prediction: each distinct row is predicted once.
        Xt, inverse = np.unique(self._trees_X(X), axis=0, return_inverse=True)
        total = sum(weights[i] * self.transfer_trees_[i].predict(Xt) for i in used)
        return (total / weights[used].sum())[inverse.ravel()]

    def _span(self, X: np.ndarray) -> np.ndarray:
        """Per row: the log ratio of chance's smoothed error to the reference's (at least
        :data:`MIN_SPAN`), the ratio target's distance from the reference to chance."""
        d, scale = self._scale(X)
        with np.errstate(divide="ignore", invalid="ignore"):
            span = np.log((1.0 - self._chance(X) + d) / scale)
        return np.where(np.isfinite(span), np.maximum(span, MIN_SPAN), MIN_SPAN)

    def _value_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        if not len(self.reference_columns):
            return t
        return t / self._span(X)

    def _point_target(self, X: np.ndarray) -> np.ndarray:
        point = super()._point_target(X)
        if len(self.reference_columns):
            point = point * self._span(X)  # the share of the way to chance, as a ratio target
        if getattr(self, "order_", None) is None or len(X) < MIN_ORDER_ROWS:
            return point
        rows_seen, inverse = np.unique(self._trees_X(X), axis=0, return_inverse=True)
        order = self.order_.predict(rows_seen)[inverse.ravel()]
        ids = self._workload_groups(X)
        for g in np.unique(ids):
            rows = np.flatnonzero(ids == g)
            if len(rows) >= MIN_ORDER_ROWS:
                key = order[rows]
                transferred = self._transfer_order(X[rows])
                if transferred is not None:
                    key = (1 - self.transfer) * _ranks(key) + self.transfer * _ranks(transferred)
                # The value model's values, the order model's order (lowest error ratio first).
                point[rows[np.argsort(key, kind="stable")]] = np.sort(point[rows])
        return point

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        if getattr(self, "order_", None) is not None:
            arrays.update(self.order_.to_arrays(f"{prefix}order_"))
            arrays[f"{prefix}xfer_vectors"] = self.transfer_vectors_
            arrays[f"{prefix}xfer_models"] = self.transfer_models_
            for i, trees in enumerate(self.transfer_trees_):
                arrays.update(trees.to_arrays(f"{prefix}xfer{i}_"))
        return arrays

    def load_arrays(self, arrays, prefix: str) -> AccuracySurrogate:
        super().load_arrays(arrays, prefix)
        has_order = any(str(k).startswith(f"{prefix}order_") for k in arrays)
        self.order_ = TreeArrays.from_arrays(arrays, f"{prefix}order_") if has_order else None
        self.transfer_trees_ = []
        if has_order:
            self.transfer_vectors_ = np.asarray(arrays[f"{prefix}xfer_vectors"], dtype=np.float64)
            self.transfer_models_ = np.asarray(arrays[f"{prefix}xfer_models"], dtype=np.int64)
            self.transfer_trees_ = [TreeArrays.from_arrays(arrays, f"{prefix}xfer{i}_")
                                    for i in range(len(self.transfer_vectors_))]
            self._set_transfer_scale()
        return self

    def _chance(self, X: np.ndarray) -> np.ndarray:
        if self.classes_column is None:
            return np.zeros(len(X))
        with np.errstate(over="ignore", invalid="ignore"):
            chance = 1.0 / np.exp(X[:, self.classes_column])
        return np.where(np.isfinite(chance), chance, 0.0)

    def _scale(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the smoothing ``d`` and the reference's smoothed error ``1 - reference + d``."""
        d = np.full(len(X), 0.005)
        if self.n_test_column is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                half = 0.5 / np.exp(X[:, self.n_test_column])
            d = np.where(np.isfinite(half) & (half > 0), half, d)
        reference = np.zeros(len(X))
        if len(self.reference_columns):
            with np.errstate(invalid="ignore"):
                best = np.nanmax(X[:, list(self.reference_columns)], axis=1) if X.size else reference
            reference = np.where(np.isfinite(best), np.clip(best, 0.0, 1.0), 0.0)
        return d, 1.0 - reference + d

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not len(self.reference_columns):
            return y
        d, scale = self._scale(X)
        return np.log((1.0 - np.clip(y, 0.0, 1.0) + d) / scale)

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        if not len(self.reference_columns):
            return np.clip(t, 0.0, 1.0)
        d, scale = self._scale(X)
        with np.errstate(over="ignore"):
            return np.clip(1.0 + d - scale * np.exp(t), self._chance(X), 1.0)


# What ``MemorySurrogate.size_columns`` must point at, in this order.
SIZE_INPUTS = ("log_n_train", "log_n_test", "log_input_size", "log_param_count", "log2_batch",
               "log_activations_per_sample", "channels", "conv_outputs_per_sample")
# The fitted memory terms, in MB per unit (float32 values); each gets a non-negative coefficient
# per group. The data set's own term is known, not fitted (held_data_mb).
SIZE_TERMS = ("process", "parameters", "batch_activations")


def _data_mb(X: np.ndarray, size_columns: tuple[int, ...]) -> np.ndarray:
    log_n, log_test, log_inputs = (np.nan_to_num(X[:, c], nan=-np.inf) for c in size_columns[:3])
    with np.errstate(over="ignore", invalid="ignore"):
        data = (np.exp(log_n) + np.exp(log_test)) * np.exp(log_inputs) * (4.0 / 2**20)
    return np.nan_to_num(data, nan=0.0, posinf=0.0)


def size_terms(X: np.ndarray, size_columns: tuple[int, ...]) -> np.ndarray:
    """The fitted memory terms of a training process (see :class:`MemorySurrogate`), in MB of
    float32 values: 1 (the process and its libraries), the parameters, and one batch's
    activations."""
    log_params, log2_batch, log_act = (np.nan_to_num(X[:, c], nan=-np.inf) for c in size_columns[3:6])
    mb = 4.0 / 2**20
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.column_stack([np.ones(len(X)), np.exp(log_params) * mb,
                                 np.exp2(log2_batch) * np.exp(log_act) * mb])
    return np.nan_to_num(terms, nan=0.0, posinf=0.0)


def held_data_mb(X: np.ndarray, size_columns: tuple[int, ...],
                 layout_copy_columns: tuple[int, ...] = ()) -> np.ndarray:
    """MB of the data set (training and test samples x input values, float32) a training
    process holds, known from how dltune hands it over: the worker's own arrays, which every
    backend trains from without a copy; one NHWC copy more for a backend among
    ``layout_copy_columns`` (one-hot columns of ``X``) where the model convolves more than one
    channel (dltune holds NCHW; TensorFlow's convolutions take NHWC:
    ``dltune.backends._tensorflow.load_data``)."""
    data = _data_mb(X, size_columns)
    copies = np.ones(len(X))
    if layout_copy_columns:
        channels, conv = (np.nan_to_num(X[:, c]) for c in size_columns[6:8])
        held = np.nan_to_num(X[:, list(layout_copy_columns)]).sum(axis=1) > 0
        copies += held & (channels > 1) & (conv > 0)
    return data * copies


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


class MemorySurrogate(QuantileGBMRegressor):
    """Peak resident memory in MB: a sum of sizes, with trees on what that leaves.

    With ``size_columns`` (the columns named in :data:`SIZE_INPUTS`) and ``group_columns``
    (one-hot frameworks) the memory is modelled as

        MB = process + parameters x b + batch activations x c + the data set it holds

    (sizes in MB of float32 values) with non-negative coefficients per group, fitted by
    non-negative least squares on relative errors: what the framework and its libraries take,
    and how many copies of the weights (gradients, optimizer state) and of one batch's
    activations it keeps. The data set it holds is known, not fitted (:func:`held_data_mb`: the
    worker's arrays, and the copy ``layout_copy_columns`` names). Trees on
    the log ratio of measured to modelled memory correct the point and give the interval. The
    sizes let the model extrapolate to a data set larger than any measured, which trees on the
    log memory alone cannot: the knowledge base's largest (10,000 samples of 32x32x3, 141 MB of
    float32) took 1.1 GB in TensorFlow (800 MB since it shares the data), 300-520 MB in the
    others, and left out of the fit it was predicted 80-350 MB low (none of its 12 runs inside
    the interval). Without ``size_columns`` the trees learn the log memory alone.

    Fitted, a data coefficient per framework rests on the few large data sets: with the
    largest held out they came out at 1.3-2.6 copies and its runs were predicted 19 % off;
    known, 7-9 % (docs/recommendation.md). A 50,000 x 32x32x3 cifar_quick
    (``benchmarks/memory_extrapolation.py``: 1,966 MB in TensorFlow, 1,068 in torch): 2,059 and
    1,147 MB predicted, inside the intervals; fitted, 1,941 and 935 (torch outside).
    """

    def __init__(self, size_columns: tuple[int, ...] = (), group_columns: tuple[int, ...] = (),
                 layout_copy_columns: tuple[int, ...] = (), coverage: float = 0.8,
                 max_iter: int = 100, learning_rate: float = 0.08,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0, tree_columns: tuple[int, ...] | None = None) -> None:
        super().__init__(coverage, max_iter, learning_rate, max_leaf_nodes, min_samples_leaf,
                         l2_regularization, calibrate, cv, random_state, tree_columns)
        self.size_columns = size_columns
        self.group_columns = group_columns
        self.layout_copy_columns = layout_copy_columns

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"size_columns": tuple(self.size_columns), "group_columns": tuple(self.group_columns),
                "layout_copy_columns": tuple(self.layout_copy_columns), **super().get_params(deep)}

    def _held_mb(self, X: np.ndarray) -> np.ndarray:
        return held_data_mb(X, tuple(self.size_columns), tuple(self.layout_copy_columns))

    def _fit_sizes(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        ok = np.isfinite(y) & (y > 0)
        terms = size_terms(X[ok], tuple(self.size_columns))
        return _nnls(_crossed(terms, X[ok], tuple(self.group_columns)), y[ok], self._held_mb(X[ok]))

    def _modelled(self, X: np.ndarray, coef: np.ndarray | None = None) -> np.ndarray:
        """MB from the sizes alone (1 where there are none)."""
        if not len(self.size_columns):
            return np.ones(len(X))
        coef = self.size_coef_ if coef is None else coef
        out = (_crossed(size_terms(X, tuple(self.size_columns)), X, tuple(self.group_columns)) @ coef
               + self._held_mb(X))
        # A group the fit never saw has no sizes: a floor keeps the log finite.
        return np.maximum(out, 1e-6)

    def fit(self, X: Any, y: Any, groups: Any = None) -> MemorySurrogate:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).ravel()
        if len(self.size_columns) not in (0, len(SIZE_INPUTS)):
            raise ParameterError(
                f"The 'size_columns' parameter must name {len(SIZE_INPUTS)} columns "
                f"({', '.join(SIZE_INPUTS)}) or none. Got {len(self.size_columns)} instead."
            )
        self.size_coef_ = np.zeros(0)
        if len(self.size_columns) and X.ndim == 2 and len(X) == len(y):
            self.size_coef_ = self._fit_sizes(X, y)
        return super().fit(X, y, groups)

    def _fold_targets(self, X: np.ndarray, y: np.ndarray, t: np.ndarray, train: np.ndarray) -> np.ndarray:
        if not len(self.size_columns):
            return t
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) - np.log(self._modelled(X, self._fit_sizes(X[train], y[train])))

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) - np.log(self._modelled(X))

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return self._modelled(X) * np.exp(t)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        arrays[f"{prefix}size_coef"] = self.size_coef_
        return arrays

    def load_arrays(self, arrays, prefix: str) -> MemorySurrogate:
        super().load_arrays(arrays, prefix)
        self.size_coef_ = np.asarray(arrays[f"{prefix}size_coef"], dtype=np.float64)
        return self


# What ``TrainTimeSurrogate.cost_columns`` must point at, in this order.
COST_INPUTS = ("epochs", "log_batches_per_epoch", "log_n_train", "log_param_count",
               "log_flops_per_sample", "log_input_size", "threads", "log_layers",
               "log_activations_per_sample", "is_momentum", "is_adam", "fresh_process",
               "conv_outputs_per_sample")
# The cost terms, in seconds per unit; each gets a non-negative coefficient per group.
COST_TERMS = ("run", "fresh_run", "fresh_run_x_layers", "epoch", "step", "step_x_params",
              "step_x_layers", "step_x_layers_if_multithreaded",
              "momentum_step", "momentum_step_x_params", "adam_step", "adam_step_x_params",
              "sample_x_inputs", "sample_x_activations", "sample_x_activations_per_thread",
              "sample_x_conv_outputs", "sample_x_conv_outputs_per_thread",
              "sample_x_dense_flops", "sample_x_dense_flops_per_thread",
              "sample_x_conv_flops", "sample_x_conv_flops_per_thread")


def cost_terms(X: np.ndarray, cost_columns: tuple[int, ...]) -> np.ndarray:
    """The additive cost terms of training (see :class:`TrainTimeSurrogate`), one row per row of X.

    Dense FLOPs are taken as twice the parameters (each weight is one multiply-add per sample),
    the remainder of the forward FLOPs as convolution FLOPs, which reuse each weight many times.
    Per output element of the convolutions there is work the FLOPs miss (bias, unfolding the
    input for the matrix product and folding the gradient back): a 3-channel LeNet does 1.6x
    the first layer's multiply-adds of a 1-channel one for the same outputs, and trains about
    as fast. With more than one thread each layer's operations also pay a synchronisation per
    step, and element-wise work over the activations runs in parallel.
    """
    (epochs, log_batches, log_n, log_params, log_flops, log_inputs, threads, log_layers, log_act,
     momentum, adam, fresh, conv_out) = (np.nan_to_num(X[:, c]) if i >= 9 else X[:, c]
                                         for i, c in enumerate(cost_columns))
    with np.errstate(over="ignore", invalid="ignore"):
        steps = epochs * np.ceil(np.exp(log_batches) - 1e-9)
        samples = epochs * np.exp(log_n)
        params, flops = np.exp(log_params), np.exp(log_flops)
        dense = np.minimum(flops, 2.0 * params)
        conv = np.maximum(flops - 2.0 * params, 0.0)
        threads = np.where(np.isfinite(threads) & (threads >= 1), threads, 1.0)
        layers, act = np.exp(log_layers), np.exp(log_act)
        terms = np.column_stack([
            np.ones(len(X)), fresh, fresh * layers,
            epochs, steps, steps * params, steps * layers, steps * layers * (threads > 1),
            steps * momentum, steps * params * momentum, steps * adam, steps * params * adam,
            samples * np.exp(log_inputs), samples * act, samples * act / threads,
            samples * conv_out, samples * conv_out / threads,
            samples * dense, samples * dense / threads, samples * conv, samples * conv / threads,
        ])
    return np.nan_to_num(terms, nan=0.0, posinf=0.0)


class TrainTimeSurrogate(QuantileGBMRegressor):
    """Training seconds as a sum of costs, with trees on what that leaves and the interval.

    With ``cost_columns`` (the columns named in :data:`COST_INPUTS`) the time is modelled as

        seconds = run + new process x (f + layers x g) + epoch x epochs
                  + steps x (step + parameters x p + layers x (l + [threads > 1] x s)
                             + optimizer's extra per step and per parameter: momentum
                             buffers, Adam's two moments)
                  + samples x (inputs x a + activations x (m + n / threads)
                               + convolution outputs x (o + q / threads)
                               + dense FLOPs x (b + c / threads)
                               + convolution FLOPs x (d + e / threads))

    with non-negative coefficients per group (``group_columns``: one-hot frameworks; and, where
    ``subgroup_columns`` are given and a row has one, per subgroup: framework x model), fitted
    by non-negative least squares on relative errors: a warm-up per run (graph tracing), more
    of it in a run that is its process's first (``fresh_process``: lazy initialisations), a
    per-epoch and a per-step overhead (Python dispatch, per-layer kernel launches, optimizer
    updates over all weights), data movement (inputs, every layer's activations), and
    compute at a learned throughput split into a serial and a parallel
    share (Amdahl's law), so it extrapolates to larger workloads and other thread counts in a
    way a tree cannot. Quantile trees on the log ratio of measured to modelled time give the
    interval; the point prediction is the cost model's own unless ``correct_point``, where a
    squared-error tree ensemble on that log ratio corrects it (on the shipped knowledge base
    the correction made leave-one-workload-out errors larger: the trees learn the measured
    workloads, not what carries over).

    Without ``cost_columns`` the trees learn the log throughput ``log(work) - log(seconds)``
    alone, ``X[:, work_column]`` holding ``log(epochs x samples x FLOPs per sample)``.
    """

    def __init__(self, work_column: int = -1, cost_columns: tuple[int, ...] = (),
                 group_columns: tuple[int, ...] = (), subgroup_columns: tuple[int, ...] = (),
                 correct_point: bool = False,
                 coverage: float = 0.8, max_iter: int = 30,
                 learning_rate: float = 0.08, max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0, tree_columns: tuple[int, ...] | None = None) -> None:
        super().__init__(coverage, max_iter, learning_rate, max_leaf_nodes, min_samples_leaf,
                         l2_regularization, calibrate, cv, random_state, tree_columns)
        self.work_column = work_column
        self.cost_columns = cost_columns
        self.group_columns = group_columns
        self.subgroup_columns = subgroup_columns
        self.correct_point = correct_point

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"work_column": self.work_column, "cost_columns": tuple(self.cost_columns),
                "group_columns": tuple(self.group_columns),
                "subgroup_columns": tuple(self.subgroup_columns), "correct_point": self.correct_point,
                **super().get_params(deep)}

    def _point_target(self, X: np.ndarray) -> np.ndarray:
        if len(self.cost_columns) and not self.correct_point:
            return np.zeros(len(X))
        return super()._point_target(X)

    def _modelled(self, X: np.ndarray, coefs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Seconds from the cost model alone (1 where there is none), with the fitted
        coefficients or ``coefs`` = (per group, per subgroup)."""
        if not len(self.cost_columns):
            return np.ones(len(X))
        coef, sub = coefs if coefs is not None else (self.cost_coef_, self.sub_coef_)
        terms = cost_terms(X, tuple(self.cost_columns))
        out = _crossed(terms, X, tuple(self.group_columns)) @ coef
        if len(self.subgroup_columns):
            # Framework x model where the fit saw that pair (it has costs), the framework's
            # otherwise: a fit on part of the records (one machine's) may lack a pair.
            seen = sub.reshape(len(self.subgroup_columns), -1).any(axis=1)
            known = (np.nan_to_num(X[:, list(self.subgroup_columns)]) * seen).sum(axis=1) > 0
            fine = _crossed(terms, X, tuple(self.subgroup_columns)) @ sub
            out = np.where(known, fine, out)
        # A group the fit never saw has no costs: a tiny floor keeps the log finite.
        return np.maximum(out, 1e-6)

    def _fit_costs(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = np.isfinite(y) & (y > 0)
        terms = cost_terms(X[ok], tuple(self.cost_columns))
        coef = _nnls(_crossed(terms, X[ok], tuple(self.group_columns)), y[ok])
        sub = np.zeros(0)
        if len(self.subgroup_columns):
            sub = _nnls(_crossed(terms, X[ok], tuple(self.subgroup_columns)), y[ok])
        return coef, sub

    def _fold_targets(self, X: np.ndarray, y: np.ndarray, t: np.ndarray, train: np.ndarray) -> np.ndarray:
        if not len(self.cost_columns):
            return t
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) - np.log(self._modelled(X, self._fit_costs(X[train], y[train])))

    def fit(self, X: Any, y: Any, groups: Any = None) -> TrainTimeSurrogate:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).ravel()
        if len(self.cost_columns) not in (0, len(COST_INPUTS)):
            raise ParameterError(
                f"The 'cost_columns' parameter must name {len(COST_INPUTS)} columns "
                f"({', '.join(COST_INPUTS)}) or none. Got {len(self.cost_columns)} instead."
            )
        self.cost_coef_ = self.sub_coef_ = np.zeros(0)
        if len(self.cost_columns) and X.ndim == 2 and len(X) == len(y):
            self.cost_coef_, self.sub_coef_ = self._fit_costs(X, y)
        return super().fit(X, y, groups)

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            if not len(self.cost_columns):
                return X[:, self.work_column] - np.log(y)
            return np.log(y) - np.log(self._modelled(X))

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        if not len(self.cost_columns):
            return np.exp(X[:, self.work_column] - t)
        return self._modelled(X) * np.exp(t)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        arrays[f"{prefix}cost_coef"] = self.cost_coef_
        arrays[f"{prefix}sub_coef"] = self.sub_coef_
        return arrays

    def load_arrays(self, arrays, prefix: str) -> TrainTimeSurrogate:
        super().load_arrays(arrays, prefix)
        self.cost_coef_ = np.asarray(arrays[f"{prefix}cost_coef"], dtype=np.float64)
        self.sub_coef_ = np.asarray(arrays[f"{prefix}sub_coef"], dtype=np.float64)
        return self
