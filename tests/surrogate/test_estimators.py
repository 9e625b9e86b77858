from __future__ import annotations

import numpy as np
import pytest

from dltune._errors import NotFittedError, ParameterError
from dltune.surrogate import (
    AccuracySurrogate,
    MemorySurrogate,
    QuantileGBMRegressor,
    TrainTimeSurrogate,
)
from dltune.surrogate._forest import TreeArrays, compile_hist_gbm


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.3, size=n)
    return X, y


def test_init_only_stores_parameters():
    est = QuantileGBMRegressor(coverage=0.9, max_iter=7)
    assert est.get_params()["coverage"] == 0.9 and est.get_params()["max_iter"] == 7
    assert not [k for k in vars(est) if k.endswith("_")]


@pytest.mark.parametrize("cls", [QuantileGBMRegressor, AccuracySurrogate, MemorySurrogate, TrainTimeSurrogate])
def test_predict_before_fit_raises_not_fitted(cls):
    with pytest.raises(NotFittedError, match="is not fitted yet") as info:
        cls().predict(np.zeros((1, 3)))
    assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)


def test_fit_returns_self_and_learns_underscore_attributes():
    X, y = _data()
    est = QuantileGBMRegressor(max_iter=30, calibrate=False)
    assert est.fit(X, y) is est
    assert est.n_features_in_ == 4 and est.widen_ == 0.0
    point, low, high = est.predict_interval(X)
    assert np.all(low <= point) and np.all(point <= high)


def test_bad_parameters_get_sklearn_style_messages():
    X, y = _data(20)
    with pytest.raises(ParameterError, match=r"The 'coverage' parameter must be a float in \(0.0, 1.0\). Got 1.5 instead."):
        QuantileGBMRegressor(coverage=1.5).fit(X, y)
    with pytest.raises(ParameterError, match=r"The 'max_iter' parameter must be an int in \[1, 100000\]. Got 0 instead."):
        QuantileGBMRegressor(max_iter=0).fit(X, y)
    with pytest.raises(ParameterError, match="must have 4 columns"):
        QuantileGBMRegressor(max_iter=5, calibrate=False).fit(X, y).predict(np.zeros((2, 3)))


def test_tree_arrays_reproduce_sklearn_exactly_with_missing_values():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = _data(300)
    X[::7, 1] = np.nan
    for kwargs in ({"loss": "squared_error"}, {"loss": "quantile", "quantile": 0.9}):
        model = HistGradientBoostingRegressor(max_iter=40, min_samples_leaf=4, **kwargs).fit(X, y)
        arrays = compile_hist_gbm(model)
        assert np.allclose(arrays.predict(X), model.predict(X))
        restored = TreeArrays.from_arrays(arrays.to_arrays("t."), "t.")
        assert np.allclose(restored.predict(X), model.predict(X))


def test_conformal_interval_covers_held_out_data():
    X, y = _data(400, seed=1)
    Xt, yt = _data(400, seed=2)
    est = QuantileGBMRegressor(coverage=0.8, max_iter=40).fit(X, y)
    _, low, high = est.predict_interval(Xt)
    coverage = np.mean((yt >= low) & (yt <= high))
    assert coverage >= 0.7  # nominal 0.8, checked on data the model never saw


def test_train_time_is_work_over_learned_throughput():
    # Throughput depends on the batch size only; time = work / throughput.
    rng = np.random.default_rng(0)
    batch = rng.choice([16.0, 64.0, 256.0], size=300)
    log_work = rng.uniform(np.log(1e6), np.log(1e8), size=300)
    throughput = 1e6 * np.sqrt(batch)
    seconds = np.exp(log_work) / throughput * np.exp(rng.normal(scale=0.05, size=300))
    X = np.column_stack([np.log2(batch), log_work])
    est = TrainTimeSurrogate(work_column=1, max_iter=60, calibrate=False).fit(X, seconds)
    # Ten times the largest work seen: the prediction scales with the work (no tree can do that alone).
    far = np.array([[np.log2(64.0), np.log(1e9)]])
    expected = 1e9 / (1e6 * 8)
    assert est.predict(far)[0] == pytest.approx(expected, rel=0.15)


def test_accuracy_predictions_stay_in_unit_interval():
    X, y = _data(100)
    est = AccuracySurrogate(max_iter=20, calibrate=False).fit(X, np.clip(y, 0, 1))
    point, low, high = est.predict_interval(X * 10)
    assert point.min() >= 0 and high.max() <= 1


def test_train_time_power_law_per_group_extrapolates():
    # Two frameworks (one-hot column 2) with different per-step costs; time = steps * cost.
    rng = np.random.default_rng(3)
    n = 240
    fw = rng.integers(0, 2, size=n).astype(float)
    log_steps = rng.uniform(np.log(100), np.log(10_000), size=n)
    log_work = log_steps + np.log(1e5)
    seconds = np.exp(log_steps) * np.where(fw == 1, 2e-3, 5e-4) * np.exp(rng.normal(scale=0.05, size=n))
    X = np.column_stack([log_steps, log_work, fw])
    est = TrainTimeSurrogate(work_column=1, linear_columns=(0, 1), group_columns=(2,), max_iter=1).fit(X, seconds)
    far = np.array([[np.log(1e6), np.log(1e6) + np.log(1e5), f] for f in (0.0, 1.0)])
    assert est.predict(far) == pytest.approx([1e6 * 5e-4, 1e6 * 2e-3], rel=0.2)
    restored = TrainTimeSurrogate(work_column=1, linear_columns=(0, 1), group_columns=(2,))
    restored.load_arrays(est.to_arrays("t."), "t.")
    assert np.allclose(restored.predict(far), est.predict(far))


def test_train_time_power_law_is_not_extrapolated_beyond_measured_threads():
    """Measured at 1 and 2 threads with a steep effect: 72 threads is predicted like 2, not e^70."""
    rng = np.random.default_rng(0)
    n = 200
    log_work = rng.uniform(10, 14, n)
    threads = rng.integers(1, 3, n).astype(float)
    seconds = np.exp(log_work - 12.0 + 2.0 * threads + rng.normal(0, 0.05, n))
    X = np.column_stack([threads, log_work])
    model = TrainTimeSurrogate(work_column=1, linear_columns=(0, 1), max_iter=10, cv=2).fit(X, seconds)
    at_two, at_many = model.predict(np.array([[2.0, 12.0], [72.0, 12.0]]))
    assert np.isfinite(at_many)
    assert at_many == pytest.approx(at_two)
    # Work itself still scales the time outside the measured range.
    bigger = model.predict(np.array([[2.0, 16.0]]))[0]
    assert bigger > 10 * at_two
