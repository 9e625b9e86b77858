"""scikit-learn's estimator API for the surrogates, importing scikit-learn only when it is used.

The surrogates follow scikit-learn's ``BaseEstimator`` and ``RegressorMixin`` protocol
(``get_params`` / ``set_params``, ``clone``, tags, ``score``, ``_parameter_constraints``) and pass
its estimator checks (``tests/surrogate/test_sklearn_checks.py``), but do not subclass them:
importing ``sklearn.base`` imports ``scipy.stats``, and a recommendation loads fitted surrogates
and predicts without scikit-learn, in about half the time of one that imports it
(docs/recommendation.md, Speed). Fitting imports scikit-learn anyway (its trees).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltune._errors import ParameterError

__all__ = ["EstimatorAPI", "LazyConstraints"]


class LazyConstraints:
    """A class's ``_parameter_constraints``, built on first read by ``build`` from
    ``sklearn.utils._param_validation`` (its ``Interval`` and the rest)."""

    def __init__(self, build: Callable[[ModuleType], dict[str, list[Any]]]) -> None:
        self._build = build
        self._constraints: dict[str, list[Any]] | None = None

    def __get__(self, obj: Any, owner: type) -> dict[str, list[Any]]:
        if self._constraints is None:
            from sklearn.utils import _param_validation

            self._constraints = self._build(_param_validation)
        return self._constraints


class EstimatorAPI:
    """``BaseEstimator`` and ``RegressorMixin``'s methods, with what they do there."""

    _parameter_constraints: dict[str, list[Any]] = {}

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The parameters of ``__init__``, sorted (as ``BaseEstimator``)."""
        params = inspect.signature(cls.__init__).parameters.values()
        return sorted(p.name for p in params if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep: bool = True) -> dict[str, Any]:  # noqa: ARG002  no nested estimators
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> EstimatorAPI:
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ParameterError(
                    f"Invalid parameter {name!r} for estimator {self}. Valid parameters are: {valid!r}."
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if repr(v) != repr(defaults.get(k))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags

        # Missing features are routed by the trees (a workload or machine may not say).
        return Tags(estimator_type="regressor", target_tags=TargetTags(required=True),
                    input_tags=InputTags(allow_nan=True), regressor_tags=RegressorTags())

    def _validate_params(self) -> None:
        """Check the parameters against ``_parameter_constraints``; a :class:`ParameterError`
        in scikit-learn's words where one is outside them."""
        from sklearn.utils._param_validation import (
            InvalidParameterError,
            validate_parameter_constraints,
        )

        try:
            validate_parameter_constraints(self._parameter_constraints, self.get_params(deep=False),
                                           caller_name=type(self).__name__)
        except InvalidParameterError as error:
            raise ParameterError(str(error)) from None

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """The coefficient of determination of :meth:`predict` on ``X`` for ``y``."""
        from sklearn.metrics import r2_score

        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))
