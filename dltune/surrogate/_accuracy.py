"""The accuracy surrogate: test accuracy learned relative to what the workload allows, ordered
within a workload by a model of ranks."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune.surrogate._forest import TreeArrays, compile_hist_gbm
from dltune.surrogate._quantile import QuantileGBM

__all__ = ["MIN_ORDER_ROWS", "MIN_SPAN", "AccuracyModel", "workload_ranks"]

# Rows of one workload that AccuracyModel.rank_within_workloads reorders by its order model.
MIN_ORDER_ROWS = 10
# The least distance from the reference to chance, in log error ratio, that AccuracyModel's
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
    measured in, they would teach the order model a ranking that is not there
    (docs/explanation/how-recommend-decides.md#the-surrogates).
    """
    rank = np.zeros(len(t))
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        if len(rows) > 1:
            rank[rows] = (_ranks(t[rows]) - 1) / (len(rows) - 1)
    return rank


class AccuracyModel(QuantileGBM):
    """Test accuracy in [0, 1], learned relative to what the workload allows
    (:class:`~dltune.surrogate.AccuracySurrogate` is the estimator).

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
    learnt on easy workloads puts a hard workload's runs at chance; a share of the way does
    not. The bands stay on the ratio: their low end, which ``recommend`` ranks by, learns from
    it how configurations fail (docs/explanation/how-recommend-decides.md#the-surrogates).

    With ``workload_columns`` (the columns that identify a workload) a second ensemble learns
    the *order* of configurations within a workload: each row's rank among its workload's rows
    (``groups`` at fit, else equal workload columns), scaled to [0, 1], tied rows sharing their
    average (:func:`workload_ranks`). Squared error on the
    ratio is dominated by the few runs that diverge (100x the reference's error); ranks weigh
    every run alike, which is what ordering the good configurations needs. :meth:`predict` and
    :meth:`predict_interval` are row by row (the value model's); the workload-level step is
    explicit: :meth:`rank_within_workloads` (used by
    :meth:`predict_interval_within_workloads`) reassigns the point predictions of each workload
    with at least :data:`MIN_ORDER_ROWS` rows (a recommendation's candidates, a workload's
    measured runs) in that learnt order: the value model says how accurate the workload's
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
    between workloads that are alike; one ensemble over all workloads averages that away
    (docs/explanation/how-recommend-decides.md#the-surrogates).
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

    def _band_X(self, X: np.ndarray) -> np.ndarray:
        return self._trees_X(X) if self.band_columns is None else X[:, list(self.band_columns)]

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

    def _fit(self, X: np.ndarray, y: np.ndarray, groups: Any = None) -> AccuracyModel:
        super()._fit(X, y, groups)
        self.order_ = None
        if len(self.workload_columns):
            t = self._to_target(X, y)
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
        """Row by row: the value model's point, as a ratio target."""
        point = super()._point_target(X)
        if len(self.reference_columns):
            point = point * self._span(X)  # the share of the way to chance, as a ratio target
        return point

    def rank_within_workloads(self, X: Any, point: Any) -> np.ndarray:
        """``point``, predictions for the rows ``X`` in the learned target space (the first of
        :meth:`predict_target`), reassigned within each workload by the order model.

        Rows with equal ``workload_columns`` are one workload; where one has at least
        :data:`MIN_ORDER_ROWS` rows, its values are reassigned so that the lowest error ratio
        goes to the row the order (and ``transfer``'s) models rank first. Other rows keep
        theirs. Unlike :meth:`predict`, a row's result depends on the rows beside it: this is
        the explicit workload-level step (:meth:`predict_interval_within_workloads`).
        """
        X = self._check_fitted(X)
        point = np.array(point, dtype=np.float64).ravel()
        if len(point) != len(X):
            raise ParameterError(
                f"The 'point' parameter must hold one value per row of X ({len(X)}). "
                f"Got {len(point)} instead."
            )
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

    def predict_interval_within_workloads(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`predict_interval` with the points reassigned within each workload
        (:meth:`rank_within_workloads`) and the interval stretched to hold them, as
        :meth:`predict_target` stretches it to hold a row's own point."""
        X = self._check_fitted(X)
        return self._interval_around(X, self.rank_within_workloads(X, self._point_target(X)))

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        if getattr(self, "order_", None) is not None:
            arrays.update(self.order_.to_arrays(f"{prefix}order_"))
            arrays[f"{prefix}xfer_vectors"] = self.transfer_vectors_
            arrays[f"{prefix}xfer_models"] = self.transfer_models_
            for i, trees in enumerate(self.transfer_trees_):
                arrays.update(trees.to_arrays(f"{prefix}xfer{i}_"))
        return arrays

    def load_arrays(self, arrays, prefix: str) -> AccuracyModel:
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
