"""The surrogates as scikit-learn estimators: each is its model class (what it computes, in
``_quantile``, ``_accuracy``, ``_train_time`` and ``_memory``) with ``RegressorMixin`` and
``BaseEstimator``.

``__init__`` only stores parameters; ``fit(X, y)`` validates them (``_parameter_constraints``)
and the data, learns attributes ending in ``_`` and returns ``self``; ``predict`` before ``fit``
raises :class:`~dltune._errors.NotFittedError`. This module imports scikit-learn; a saved
model loads into the model classes, which do not (:mod:`dltune.surrogate._quantile`).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError
from sklearn.utils.validation import check_consistent_length, column_or_1d, validate_data

from dltune._errors import ParameterError
from dltune.surrogate._accuracy import AccuracyModel
from dltune.surrogate._memory import MemoryModel
from dltune.surrogate._quantile import QuantileGBM
from dltune.surrogate._train_time import TrainTimeModel

__all__ = ["AccuracySurrogate", "MemorySurrogate", "QuantileGBMRegressor", "TrainTimeSurrogate"]


class QuantileGBMRegressor(QuantileGBM, RegressorMixin, BaseEstimator):
    __doc__ = QuantileGBM.__doc__

    _parameter_constraints: dict[str, list[Any]] = {
        "coverage": [Interval(Real, 0.0, 1.0, closed="neither")],
        "max_iter": [Interval(Integral, 1, 100_000, closed="both")],
        "learning_rate": [Interval(Real, 0.0, 1.0, closed="right")],
        "max_leaf_nodes": [Interval(Integral, 2, 100_000, closed="both")],
        "min_samples_leaf": [Interval(Integral, 1, 100_000, closed="both")],
        "l2_regularization": [Interval(Real, 0.0, None, closed="left")],
        "calibrate": ["boolean"],
        "cv": [Interval(Integral, 2, 1000, closed="both")],
        "random_state": [Interval(Integral, 0, 2**32 - 1, closed="both")],
        "tree_columns": ["array-like", None],
    }

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Missing features are routed by the trees (a workload or machine may not say).
        tags.input_tags.allow_nan = True
        return tags

    def _validate_params(self) -> None:
        """The parameters checked against ``_parameter_constraints``: a :class:`ParameterError`
        in scikit-learn's words where one is outside them."""
        try:
            super()._validate_params()
        except InvalidParameterError as error:
            raise ParameterError(str(error)) from None

    def _validate_fit_data(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """``X`` as 2-D floats (missing values allowed) and ``y`` as 1-D floats, checked as
        scikit-learn checks them; non-finite targets are kept (the fit leaves their rows out)."""
        try:
            X, y = validate_data(self, X, y, validate_separately=(
                {"dtype": np.float64, "ensure_all_finite": "allow-nan", "ensure_min_samples": 2},
                {"dtype": np.float64, "ensure_2d": False, "ensure_all_finite": False}))
            y = column_or_1d(y, warn=True)
            check_consistent_length(X, y)
        except ValueError as error:
            raise ParameterError(str(error)) from None
        return X, y

    def fit(self, X: Any, y: Any, groups: Any = None) -> QuantileGBMRegressor:
        """Fit; with ``groups`` (one label per row, e.g. the workload) the conformal folds hold
        out whole groups, so the interval is calibrated for a group the model has not seen."""
        self._validate_params()
        X, y = self._validate_fit_data(X, y)
        return self._fit(X, y, groups)


class AccuracySurrogate(AccuracyModel, QuantileGBMRegressor):
    __doc__ = AccuracyModel.__doc__

    _parameter_constraints: dict[str, list[Any]] = {
        **QuantileGBMRegressor._parameter_constraints,
        "reference_columns": ["array-like"],
        "n_test_column": [Integral, None],
        "classes_column": [Integral, None],
        "workload_columns": ["array-like"],
        "model_columns": ["array-like"],
        "transfer": [Interval(Real, 0.0, 1.0, closed="both")],
        "transfer_bandwidth": [Interval(Real, 0.0, None, closed="neither")],
        "band_columns": ["array-like", None],
    }


class TrainTimeSurrogate(TrainTimeModel, QuantileGBMRegressor):
    __doc__ = TrainTimeModel.__doc__

    _parameter_constraints: dict[str, list[Any]] = {
        **QuantileGBMRegressor._parameter_constraints,
        "work_column": [Integral],
        "cost_columns": ["array-like"],
        "group_columns": ["array-like"],
        "subgroup_columns": ["array-like"],
        "correct_point": ["boolean"],
    }


class MemorySurrogate(MemoryModel, QuantileGBMRegressor):
    __doc__ = MemoryModel.__doc__

    _parameter_constraints: dict[str, list[Any]] = {
        **QuantileGBMRegressor._parameter_constraints,
        "size_columns": ["array-like"],
        "group_columns": ["array-like"],
        "layout_copy_columns": ["array-like"],
    }
