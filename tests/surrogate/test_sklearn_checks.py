"""scikit-learn's estimator checks, run against every surrogate estimator."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.estimator_checks import parametrize_with_checks

from dltune.surrogate import (
    AccuracySurrogate,
    MemorySurrogate,
    QuantileGBMRegressor,
    TrainTimeSurrogate,
)

# Few trees keep the checks fast; what the checks test does not depend on how many.
ESTIMATORS = [QuantileGBMRegressor(max_iter=10), AccuracySurrogate(max_iter=10),
              TrainTimeSurrogate(max_iter=10), MemorySurrogate(max_iter=10)]

# The checks that cannot apply, and why.
ALL = {
    "check_estimators_unfitted": (
        "predict before fit raises dltune's NotFittedError (a ValueError and AttributeError, as "
        "scikit-learn's), not sklearn.exceptions.NotFittedError: the model classes that predict "
        "(a saved model loads into them) do not import scikit-learn"),
    "check_non_transformer_estimators_n_iter": (
        "no n_iter_: the boosting has no early stopping, so it always runs max_iter iterations"),
}
# The surrogates learn in their quantity's own space: accuracy clipped to [0, 1], the log of a
# positive time or size. The checks' targets (make_regression's, negative values included) are
# none of these, so the fit leaves out rows or clips and the R^2 >= 0.5 the check asks for is
# not reached.
DOMAIN = {f"check_regressors_train{suffix}": "the check's targets are outside the surrogate's domain"
          for suffix in ("", "(readonly_memmap=True)", "(readonly_memmap=True,X_dtype=float32)")}


def expected_failed_checks(estimator) -> dict[str, str]:
    return ALL if type(estimator) is QuantileGBMRegressor else ALL | DOMAIN


# The surrogates take numpy arrays only (no array API): scikit-learn's array-API checks skip
# themselves here, and a skipped test fails CI, so they are not collected.
NOT_APPLICABLE = ("check_array_api_input",)


def _check_name(param) -> str:
    check = (param.values if hasattr(param, "values") else param)[1]
    return getattr(check, "func", check).__name__


_mark = parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
_params = [p for p in _mark.args[1] if _check_name(p) not in NOT_APPLICABLE]


@pytest.mark.parametrize(_mark.args[0], _params, **_mark.kwargs)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_only_the_array_api_checks_are_left_out():
    assert 0 < len(_params) < len(list(parametrize_with_checks(ESTIMATORS).args[1]))
    assert {_check_name(p) for p in _params} >= {"check_fit2d_1sample", "check_regressors_int"}


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_the_surrogates_are_scikit_learn_regressors(estimator):
    assert isinstance(estimator, BaseEstimator) and isinstance(estimator, RegressorMixin)


def test_a_saved_model_loads_and_predicts_without_scikit_learn(tmp_path):
    """The shipped model's path (``recommend`` from a saved fit) imports neither scikit-learn
    nor SciPy: importing them takes longer than the whole recommendation."""
    from dltune.surrogate import shipped_model_dir, shipped_model_key

    path = shipped_model_dir() / f"{shipped_model_key()}.npz"
    assert path.exists()
    code = (
        "import sys\n"
        "from dltune.surrogate import PerformanceModel, record_row\n"
        "from dltune.measure._shipped import read_jsonl, shipped_kb_path\n"
        f"model = PerformanceModel.load({str(path)!r})\n"
        "record = next(d for d in read_jsonl(shipped_kb_path()) if d['status'] == 'ok')\n"
        "assert model.predict([record_row(record)])['accuracy'].shape == (1,)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
