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
from dltune.surrogate._memory import held_data_mb


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
    with pytest.raises(ParameterError, match=r"The 'coverage' parameter of QuantileGBMRegressor must be a float in "
                                             r"the range \(0.0, 1.0\). Got 1.5 instead."):
        QuantileGBMRegressor(coverage=1.5).fit(X, y)
    with pytest.raises(ParameterError, match=r"The 'max_iter' parameter of QuantileGBMRegressor must be an int in "
                                             r"the range \[1, 100000\]. Got 0 instead."):
        QuantileGBMRegressor(max_iter=0).fit(X, y)
    with pytest.raises(ParameterError, match="X has 3 features, but QuantileGBMRegressor is expecting 4 features"):
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


def test_train_time_is_work_over_learned_throughput_without_a_cost_model():
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


def _cost_rows(rng, n, threads_choices=(1.0, 2.0)):
    """Rows laid out as COST_INPUTS + two one-hot framework columns, and the seconds two made-up frameworks
    take: framework 0 has a big per-run warm-up, framework 1 a big per-step overhead; both
    compute dense FLOPs at 1 GFLOP/s with 80 % of it parallel."""
    epochs = rng.integers(1, 6, n).astype(float)
    n_train = rng.choice([300.0, 1500.0, 5000.0], n)
    batch = rng.choice([16.0, 64.0, 256.0], n)
    params = rng.choice([5e4, 2e5], n)
    flops = 2.0 * params
    threads = rng.choice(threads_choices, n)
    fw = rng.integers(0, 2, n).astype(float)
    X = np.column_stack([epochs, np.log(n_train / batch), np.log(n_train), np.log(params),
                         np.log(flops), np.log(np.full(n, 64.0)), threads, np.log(np.full(n, 5.0)),
                         np.log(np.full(n, 500.0)), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n),
                         fw, 1 - fw])
    return X, _cost_seconds(X)


def _cost_seconds(X):
    epochs, n_train, params, threads, fw = X[:, 0], np.exp(X[:, 2]), np.exp(X[:, 3]), X[:, 6], X[:, 13]
    steps = epochs * np.ceil(np.exp(X[:, 1]) - 1e-9)
    compute = epochs * n_train * 2.0 * params * (0.2 + 0.8 / threads) / 1e9
    return np.where(fw == 0, 0.5, 0.01) + steps * np.where(fw == 0, 1e-4, 2e-3) + compute


def test_train_time_cost_model_learns_overheads_per_framework_and_extrapolates():
    X, seconds = _cost_rows(np.random.default_rng(3), 300)
    noisy = seconds * np.exp(np.random.default_rng(4).normal(scale=0.03, size=len(seconds)))
    est = TrainTimeSurrogate(cost_columns=tuple(range(13)), group_columns=(13, 14), max_iter=1,
                             calibrate=False).fit(X, noisy)
    assert np.all(est.cost_coef_ >= 0)
    # Far outside the measured sizes (100x the samples, 10x the epochs) and at 8 threads.
    far = np.array([[50.0, np.log(500_000 / 64), np.log(500_000.0), np.log(2e5), np.log(4e5),
                     np.log(64.0), t, np.log(5.0), np.log(500.0), 0.0, 0.0, 0.0, 0.0, f, 1 - f]
                    for f in (0.0, 1.0) for t in (1.0, 8.0)])
    assert est.predict(far) == pytest.approx(_cost_seconds(far), rel=0.15)
    restored = TrainTimeSurrogate(cost_columns=tuple(range(13)), group_columns=(13, 14))
    restored.load_arrays(est.to_arrays("t."), "t.")
    assert np.allclose(restored.predict(far), est.predict(far))


def test_train_time_cost_model_needs_every_cost_column():
    X, seconds = _cost_rows(np.random.default_rng(0), 20)
    with pytest.raises(ParameterError, match=r"The 'cost_columns' parameter must name 13 columns \(epochs, "):
        TrainTimeSurrogate(cost_columns=(0, 1)).fit(X, seconds)


def _size_rows(rng, n):
    """Columns: log training samples, log test samples, log input values, log parameters,
    log2 batch, log activations per sample, channels, convolution outputs per sample, then two
    frameworks one-hot; memory in MB that framework 0 takes as 200 + 2 x the parameters + the
    batch's activations + the data set (once more for a convolving model on more than one
    channel: it converts the layout), framework 1 as 100 + 4 x the parameters + the data set."""
    n_train = rng.choice([300.0, 1000.0, 4000.0], size=n)
    inputs = rng.choice([64.0, 256.0, 1024.0], size=n)
    params = rng.choice([5e4, 2e5, 1e6], size=n)
    batch = rng.choice([16.0, 64.0, 256.0], size=n)
    act = rng.choice([500.0, 5000.0], size=n)
    channels = rng.choice([1.0, 3.0], size=n)
    conv = rng.choice([0.0, 8000.0], size=n)
    f = rng.integers(0, 2, size=n).astype(float)
    X = np.column_stack([np.log(n_train), np.log(n_train / 4), np.log(inputs), np.log(params),
                         np.log2(batch), np.log(act), channels, conv, 1 - f, f])
    return X, _size_mb(X)


def _size_mb(X):
    mb = 4.0 / 2**20
    data = (np.exp(X[:, 0]) + np.exp(X[:, 1])) * np.exp(X[:, 2]) * mb
    params, acts = np.exp(X[:, 3]) * mb, np.exp2(X[:, 4]) * np.exp(X[:, 5]) * mb
    copy = data * ((X[:, 6] > 1) & (X[:, 7] > 0))
    return X[:, 8] * (200 + data + 2 * params + acts + copy) + X[:, 9] * (100 + data + 4 * params)


def _memory(**kw):
    return MemorySurrogate(size_columns=tuple(range(8)), group_columns=(8, 9),
                           layout_copy_columns=(8,), **kw)


def test_memory_is_a_sum_of_sizes_and_extrapolates_to_larger_data():
    X, mb = _size_rows(np.random.default_rng(5), 200)
    est = _memory(max_iter=5, calibrate=False).fit(X, mb)
    assert np.all(est.size_coef_ >= 0)
    assert est.size_coef_ == pytest.approx([200, 2, 1, 100, 4, 0], abs=1e-6)
    # 50,000 samples of 32x32x3: 25x the largest data set measured; trees alone hold the last.
    far = np.array([[np.log(50_000.0), np.log(10_000.0), np.log(3072.0), np.log(1e6), 8.0,
                     np.log(5000.0), 3.0, conv, 1 - f, f] for f in (0.0, 1.0) for conv in (0.0, 8000.0)])
    assert est.predict(far) == pytest.approx(_size_mb(far), rel=1e-6)
    assert est.predict(far[[1]])[0] - est.predict(far[[0]])[0] == pytest.approx(703.125, rel=1e-6)  # the copy
    alone = MemorySurrogate(max_iter=50, calibrate=False).fit(X, mb)
    assert np.all(alone.predict(far) < 0.5 * _size_mb(far))
    restored = _memory()
    restored.load_arrays(est.to_arrays("m."), "m.")
    assert np.array_equal(restored.predict(far), est.predict(far))
    # Not told which framework holds which copies, far larger data sets come out wrong.
    unaware = MemorySurrogate(size_columns=tuple(range(8)), group_columns=(8, 9), max_iter=5,
                              calibrate=False).fit(X, mb)
    assert np.abs(unaware.predict(far) / _size_mb(far) - 1).max() > 0.05
    with pytest.raises(ParameterError, match=r"The 'size_columns' parameter must name 8 columns \(log_n_train, "):
        MemorySurrogate(size_columns=(0, 1)).fit(X, mb)


def test_held_data_is_the_workers_arrays_and_the_layout_copy_a_backend_makes():
    X, _ = _size_rows(np.random.default_rng(1), 50)
    data = (np.exp(X[:, 0]) + np.exp(X[:, 1])) * np.exp(X[:, 2]) * 4.0 / 2**20
    converts = (X[:, 8] > 0) & (X[:, 6] > 1) & (X[:, 7] > 0)
    assert converts.any() and not converts.all()
    held = held_data_mb(X, tuple(range(8)), layout_copy_columns=(8,))
    assert held == pytest.approx(data * (1 + converts))
    assert held_data_mb(X, tuple(range(8))) == pytest.approx(data)  # no backend copies: the arrays


def test_accuracy_is_learned_relative_to_the_landmark_and_chance():
    """Two workloads whose error lies the same share of the way (in log error) from the
    landmark's to chance's, as a function of the learning rate: trained on one, the other
    (another landmark, number of classes and test-set size) is predicted on its own scale; a
    perfect score is neither infinite in training nor a pile-up of ties at 100 % in
    prediction; and a run that learnt nothing is predicted at the other workload's chance."""
    rng = np.random.default_rng(0)

    def rows(landmark, classes, n_test, n=200):
        lr = rng.uniform(-4, 0, n)
        share = -0.6 + 1.6 / (1.0 + np.exp(3 * (lr + 2)))  # 1: chance; 0: the landmark
        d = 0.5 / n_test
        ref, chance = 1 - landmark + d, 1 - 1 / classes + d
        acc = np.clip(1 + d - ref * (chance / ref) ** share, 0, 1)
        X = np.column_stack([lr, np.full(n, landmark), np.full(n, np.log(n_test)),
                             np.full(n, np.log(classes))])
        return X, acc

    X, y = rows(0.95, 10, 500)
    Xo, yo = rows(0.70, 3, 2000)
    est = AccuracySurrogate(reference_columns=(1,), n_test_column=2, classes_column=3,
                            tree_columns=(0,), max_iter=60, calibrate=False).fit(X, y)
    # A perfect score is half a test sample of error: log(0.001 / 0.051), not -inf.
    assert est._to_target(X[:1], np.ones(1))[0] == pytest.approx(np.log(0.001 / 0.051))
    assert np.abs(est.predict(Xo) - yo).max() < 0.03
    assert np.all(est.predict(X) < 1.0)  # every prediction is a distinct error rate, none a tie at 1
    # The lowest learning rates learnt nothing: chance, 10 % there and 33 % here.
    slow = Xo[:, 0] < -3.5
    assert est.predict(Xo[slow]) == pytest.approx(1 / 3, abs=0.03)
    point, low, high = est.predict_interval(Xo)
    assert np.all((low <= point) & (point <= high))
    plain = AccuracySurrogate(tree_columns=(0,), max_iter=60, calibrate=False).fit(X, y)
    assert np.abs(plain.predict(Xo) - yo).max() > 0.1


def test_accuracy_predictions_stay_in_unit_interval():
    X, y = _data(100)
    est = AccuracySurrogate(max_iter=20, calibrate=False).fit(X, np.clip(y, 0, 1))
    point, low, high = est.predict_interval(X * 10)
    assert point.min() >= 0 and high.max() <= 1




def test_groups_hold_out_whole_groups_in_the_conformal_calibration():
    # Each group has its own offset the features do not show: only folds that hold out whole
    # groups see that error, and widen the interval for it.
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(8), 40)
    X = rng.normal(size=(len(groups), 2))
    y = X[:, 0] + rng.normal(scale=2.0, size=8)[groups] + rng.normal(scale=0.1, size=len(groups))
    by_row = QuantileGBMRegressor(max_iter=30).fit(X, y)
    by_group = QuantileGBMRegressor(max_iter=30).fit(X, y, groups=groups)
    assert by_group.widen_ > by_row.widen_
    with pytest.raises(ParameterError, match=r"The 'groups' parameter must hold one label per row \(320\). Got 3 instead."):
        QuantileGBMRegressor(max_iter=5).fit(X, y, groups=[1, 2, 3])


def _ranked(est, X):
    """The points of ``X`` reassigned within each workload (the explicit workload step)."""
    return est.predict_interval_within_workloads(X)[0]


def _rank_corr(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _workloads_with_divergence(seed=0):
    """Six workloads (column 0 tells them apart, column 1 is their landmark) x 40 configurations
    (column 2, a log learning rate): the error falls with the learning rate until it diverges
    to chance. Ranks within a workload depend on the learning rate alone."""
    rng = np.random.default_rng(seed)
    rows, acc, groups = [], [], []
    for w in range(6):
        landmark = 0.7 + 0.04 * w
        lr = rng.uniform(-4, 0, 40)
        err = (1 - landmark) * np.exp(-(lr + 4)) * (1 + 0.05 * rng.normal(size=40))
        err = np.where(lr > -0.6, 0.9, err)  # diverged: chance
        rows.append(np.column_stack([np.full(40, w), np.full(40, landmark), lr]))
        acc.append(np.clip(1 - err, 0, 1))
        groups += [w] * 40
    return np.vstack(rows), np.concatenate(acc), np.array(groups)


def test_tied_runs_share_their_rank_in_the_order_models_target():
    """Runs of equal accuracy are not ordered by the order they were measured in."""
    from dltune.surrogate._accuracy import workload_ranks

    t = np.array([0.0, 0.0, 0.0, -1.0, 2.0, 5.0, 5.0])
    labels = np.array(["a", "a", "a", "a", "b", "b", "b"])
    ranks = workload_ranks(t, labels)
    # a: -1 ranks 1 of 4, the three zeros share ranks 2-4 (3); scaled by (rank - 1) / 3
    np.testing.assert_allclose(ranks[:4], [2 / 3, 2 / 3, 2 / 3, 0.0])
    np.testing.assert_allclose(ranks[4:], [0.0, 0.75, 0.75])
    assert workload_ranks(np.array([3.0]), np.array(["c"]))[0] == 0.0  # one run: no order


def test_accuracy_order_model_reorders_a_workloads_values():
    X, y, groups = _workloads_with_divergence()
    kw = dict(reference_columns=(1,), tree_columns=(1, 2), max_iter=40, calibrate=False)
    plain = AccuracySurrogate(**kw).fit(X, y, groups)
    ordered = AccuracySurrogate(workload_columns=(0, 1), **kw).fit(X, y, groups)
    assert plain.order_ is None and ordered.order_ is not None
    one = X[groups == 2]
    # Row by row, predict is the value model's.
    assert np.array_equal(ordered.predict(one), plain.predict(one))
    # The same values as the value model's, in the order model's order (lowest error first).
    assert np.allclose(np.sort(_ranked(ordered, one)), np.sort(plain.predict(one)))
    point = ordered.rank_within_workloads(one, ordered.predict_target(one)[0])
    order = ordered.order_.predict(one[:, [1, 2]])
    assert np.all(np.diff(point[np.argsort(order, kind="stable")]) >= 0)
    # It learnt the order: the rank correlation with the measured accuracy stays high.
    assert _rank_corr(_ranked(ordered, one), y[groups == 2]) > 0.9
    # Fewer rows than MIN_ORDER_ROWS: the value model alone.
    assert np.allclose(_ranked(ordered, one[:3]), plain.predict(one[:3]))
    # Saved and restored with its order model.
    restored = AccuracySurrogate(workload_columns=(0, 1), **kw)
    restored.load_arrays(ordered.to_arrays("a."), "a.")
    assert np.allclose(_ranked(restored, one), _ranked(ordered, one))
    two = np.vstack([X[groups == 2], X[groups == 4]])  # two workloads in one call: each on its own
    both = _ranked(ordered, two)
    assert np.allclose(both[:40], _ranked(ordered, X[groups == 2]))
    assert np.allclose(both[40:], _ranked(ordered, X[groups == 4]))


def _two_kinds_of_workload(seed=0):
    """Eight workloads x 40 configurations. Column 0 tells the kinds apart (kind A near 0,
    kind B near 5), column 1 is a landmark, column 2 a log learning rate, columns 3 and 4 say
    which model (A's, B's). On kind A the accuracy rises with the learning rate, on kind B it
    falls: which configurations are best depends on the kind of workload."""
    rng = np.random.default_rng(seed)
    rows, acc, groups = [], [], []
    for w in range(8):
        kind = w % 2
        lr = rng.uniform(-4, 0, 40)
        slope = 1.0 if kind == 0 else -1.0
        a = 0.7 + 0.05 * slope * lr + 0.005 * rng.normal(size=40)
        rows.append(np.column_stack([np.full(40, 5.0 * kind + 0.05 * w), np.full(40, 0.8), lr,
                                     np.full(40, 1.0 - kind), np.full(40, float(kind))]))
        acc.append(np.clip(a, 0, 1))
        groups += [w] * 40
    return np.vstack(rows), np.concatenate(acc), np.array(groups)


def test_accuracy_order_transfers_from_the_most_alike_measured_workloads():
    X, y, groups = _two_kinds_of_workload()
    # The trees do not see column 0, so one order model over all workloads cannot tell the
    # kinds apart; the rank models of the workloads most like the predicted one can.
    kw = dict(reference_columns=(1,), tree_columns=(1, 2), workload_columns=(0, 1),
              model_columns=((3,), (4,)), max_iter=40, calibrate=False)
    lr = np.linspace(-4, 0, 40)
    new_a = np.column_stack([np.full(40, 0.12), np.full(40, 0.8), lr, np.ones(40), np.zeros(40)])
    rising = lr  # kind A: the higher the learning rate, the more accurate
    alone = AccuracySurrogate(transfer=0.0, **kw).fit(X, y, groups)
    assert alone.transfer_trees_ == []
    full = AccuracySurrogate(transfer=1.0, **kw).fit(X, y, groups)
    assert len(full.transfer_trees_) == 8 and list(full.transfer_models_) == [0, 1] * 4
    assert _rank_corr(_ranked(full, new_a), rising) > 0.95
    assert abs(_rank_corr(_ranked(alone, new_a), rising)) < 0.6
    half = AccuracySurrogate(transfer=0.5, **kw).fit(X, y, groups)
    assert _rank_corr(_ranked(half, new_a), rising) > _rank_corr(_ranked(alone, new_a), rising)
    # Halfway between the kinds, the model decides: B's model, B's order.
    new_b = new_a.copy()
    new_b[:, 0], new_b[:, 3], new_b[:, 4] = 2.6, 0.0, 1.0
    assert _rank_corr(_ranked(full, new_b), -lr) > 0.95
    # The same values as without transfer, reassigned; saved and restored with its rank models.
    assert np.allclose(np.sort(_ranked(full, new_a)), np.sort(_ranked(alone, new_a)))
    restored = AccuracySurrogate(transfer=1.0, **kw)
    restored.load_arrays(full.to_arrays("a."), "a.")
    assert np.allclose(_ranked(restored, new_b), _ranked(full, new_b))
    with pytest.raises(ParameterError, match=r"The 'transfer' parameter of AccuracySurrogate must be"):
        AccuracySurrogate(transfer=1.5, **kw).fit(X, y, groups)
    with pytest.raises(ParameterError, match=r"The 'transfer_bandwidth' parameter of AccuracySurrogate must be"):
        AccuracySurrogate(transfer_bandwidth=0.0, **kw).fit(X, y, groups)


def test_band_columns_keep_a_column_out_of_the_interval_only():
    # Column 1 moves the target; the bands may not split on it, the point may.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = 0.3 + 0.1 * X[:, 0] + 0.2 * (X[:, 1] > 0)
    est = AccuracySurrogate(band_columns=(0,), max_iter=40, calibrate=False).fit(X, y)
    assert est.get_params()["band_columns"] == (0,)
    moved = X.copy()
    moved[:, 1] = -moved[:, 1]
    low, high = est.predict_band(X)
    assert np.array_equal((low, high), est.predict_band(moved))
    assert not np.allclose(est.predict(X), est.predict(moved))
    point, low, high = est.predict_interval(X)
    assert np.all((low <= point) & (point <= high))
    both = AccuracySurrogate(max_iter=40, calibrate=False).fit(X, y)
    assert not np.array_equal(both.predict_band(X), both.predict_band(moved))
