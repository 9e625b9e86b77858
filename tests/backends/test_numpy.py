"""The numpy reference trainer: gradients, optimizer definitions, dropout, and the shared driver."""

from __future__ import annotations

import numpy as np
import pytest

from dltune.backends import _base, load_trainer_class
from dltune.backends._base import run_training
from dltune.backends._common import batch_order, learning_rates
from dltune.backends._numpy import NumpyTrainer, forward, loss_and_grads
from dltune.config import TrainConfig
from dltune.models import build_model
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    MaxPool2D,
    ModelSpec,
)

CONV = ModelSpec(
    "conv",
    (2, 9, 7),
    3,
    (
        Conv2D(3, 3, padding="same"),
        Activation("relu"),
        MaxPool2D(3, 2),
        Conv2D(4, 2, stride=2),
        Activation("sigmoid"),
        AvgPool2D(1, 1),
        Flatten(),
        Dense(8),
        Activation("tanh"),
        Dropout(0.3),
        Dense(3),
    ),
)


def _config(**changes) -> dict:
    return TrainConfig(framework="numpy", **changes).to_dict()


def test_registered_backend_is_the_numpy_trainer():
    assert load_trainer_class("numpy") is NumpyTrainer


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    params = [p.astype(np.float64) for p in CONV.init_params(1)]
    for p in params:
        if p.ndim == 1:
            p[:] = rng.normal(scale=0.1, size=p.shape)
    x = rng.normal(size=(5, *CONV.input_shape))
    y = rng.integers(0, 3, 5)

    def loss_of(ps):
        # The same dropout mask for every evaluation: a fresh generator with one seed.
        return loss_and_grads(CONV, ps, x, y, np.random.default_rng(7))

    _, grads = loss_of(params)
    for i, p in enumerate(params):
        for _ in range(5):
            j = tuple(int(rng.integers(0, s)) for s in p.shape)
            old = p[j]
            p[j] = old + 1e-6
            plus, _ = loss_of(params)
            p[j] = old - 1e-6
            minus, _ = loss_of(params)
            p[j] = old
            numeric = (plus - minus) / 2e-6
            assert grads[i][j] == pytest.approx(numeric, rel=1e-5, abs=1e-9), (i, j)


def test_conv_matches_direct_convolution():
    rng = np.random.default_rng(2)
    spec = ModelSpec("c", (2, 6, 5), 4, (Conv2D(3, 3, padding="same"), Flatten(), Dense(4)))
    w, b = rng.normal(size=(3, 2, 3, 3)), rng.normal(size=3)
    x = rng.normal(size=(2, 2, 6, 5))
    identity = [np.eye(90)[:, :4], np.zeros(4)]  # read the first four conv outputs back
    logits, _ = forward(spec, [w, b, *identity], x)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    direct = np.einsum("ncij,fcij->nf", padded[:, :, 0:3, 0:3], w) + b  # output pixel (0, 0)
    second = np.einsum("ncij,fcij->nf", padded[:, :, 0:3, 1:4], w) + b  # output pixel (0, 1)
    np.testing.assert_allclose(logits[:, 0], direct[:, 0])
    np.testing.assert_allclose(logits[:, 1], second[:, 0])


def test_pooling_values():
    x = np.arange(2 * 1 * 4 * 4, dtype=np.float64).reshape(2, 1, 4, 4)
    spec_max = ModelSpec("m", (1, 4, 4), 4, (MaxPool2D(2, 2), Flatten()))
    spec_avg = ModelSpec("a", (1, 4, 4), 4, (AvgPool2D(2, 2), Flatten()))
    np.testing.assert_array_equal(forward(spec_max, [], x)[0][0], [5, 7, 13, 15])
    np.testing.assert_array_equal(forward(spec_avg, [], x)[0][0], [2.5, 4.5, 10.5, 12.5])


def _dense_spec() -> ModelSpec:
    return ModelSpec("d", (1, 2, 2), 3, (Flatten(), Dense(3)))


def _dense_grad(w, b, x, y):
    logits = x @ w + b
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    return x.T @ p, p.sum(0)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_optimizer_definitions(optimizer):
    """Two steps against the update rules written out (PyTorch's definitions, L2 decay)."""
    spec = _dense_spec()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 1, 2, 2)).astype(np.float32)
    y = rng.integers(0, 3, 6)
    decay, mu, lrs = 0.1, 0.9, [0.5, 0.2]
    trainer = NumpyTrainer(spec, _config(optimizer=optimizer, weight_decay=decay, momentum=mu))
    trainer.build(spec.init_params(0))
    trainer.load_data(x, y, x, y)
    batches = [np.arange(6), np.arange(6)]
    trainer.train_epoch(batches, np.float32(lrs))

    w, b = (p.astype(np.float64) for p in spec.init_params(0))
    state = [np.zeros_like(w), np.zeros_like(b)]
    state2 = [np.zeros_like(w), np.zeros_like(b)]
    for t, lr in enumerate(lrs, start=1):
        grads = _dense_grad(w, b, x.reshape(6, 4).astype(np.float64), y)
        new = []
        for k, (p, g) in enumerate(zip((w, b), grads, strict=True)):
            g = g + decay * p
            if optimizer == "sgd":
                p = p - lr * g
            elif optimizer == "momentum":
                state[k] = mu * state[k] + g
                p = p - lr * state[k]
            else:
                state[k] = 0.9 * state[k] + 0.1 * g
                state2[k] = 0.999 * state2[k] + 0.001 * g * g
                m_hat, v_hat = state[k] / (1 - 0.9**t), state2[k] / (1 - 0.999**t)
                p = p - lr * m_hat / (np.sqrt(v_hat) + 1e-8)
            new.append(p)
        w, b = new
    got_w, got_b = trainer.get_params()
    np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)


def test_dropout_trains_scaled_and_predicts_identity():
    spec = ModelSpec("drop", (1, 10, 10), 100, (Flatten(), Dropout(0.25)))
    x = np.ones((50, 1, 10, 10), dtype=np.float32)
    train_out, _ = forward(spec, [], x, np.random.default_rng(0))
    kept = train_out != 0
    assert 0.7 < kept.mean() < 0.8
    np.testing.assert_allclose(train_out[kept], 1 / 0.75)
    np.testing.assert_array_equal(forward(spec, [], x)[0], x.reshape(50, 100))


def test_build_rejects_wrong_shapes():
    trainer = NumpyTrainer(_dense_spec(), _config())
    with pytest.raises(ValueError, match="parameter shapes"):
        trainer.build([np.zeros((3, 4), np.float32), np.zeros(3, np.float32)])
    with pytest.raises(ValueError, match="CPU only"):
        NumpyTrainer(_dense_spec(), _config(device="cuda")).build(_dense_spec().init_params(0))


@pytest.mark.slow
def test_learns_digits():
    from dltune.data import load_dataset

    data = load_dataset("digits", n_train=600, n_test=200)
    spec = build_model("mlp", data.input_shape, data.num_classes)
    config = _config(epochs=3, batch_size=32, learning_rate=0.05)
    arrays = (data.x_train, data.y_train, data.x_test, data.y_test)
    result = run_training(NumpyTrainer, spec, config, arrays)
    losses = [c["train_loss"] for c in result["curves"]]
    assert losses[0] > losses[1] > losses[2]
    assert result["test_accuracy"] >= 0.85
    assert result["param_count"] == spec.param_count


class _Clock:
    """A fake ``perf_counter``: only the trainer's methods advance it."""

    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_run_training_excludes_evaluation_from_train_time(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(_base.time, "perf_counter", clock)

    class Timed(NumpyTrainer):
        def train_epoch(self, batches, lrs):
            clock.now += 1.0
            return super().train_epoch(batches, lrs)

        def predict(self):
            clock.now += 100.0
            return super().predict()

    spec = _dense_spec()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 1, 2, 2)).astype(np.float32)
    y = rng.integers(0, 3, 20)
    result = run_training(Timed, spec, _config(epochs=3, batch_size=8), (x, y, x, y))
    assert result["train_time_s"] == 3.0
    assert result["test_time_s"] == 100.0
    assert [c["train_time_s"] for c in result["curves"]] == [1.0, 1.0, 1.0]
    assert result["samples_per_s"] == pytest.approx(20 * 3 / 3.0)


def test_run_training_follows_shared_batch_order_and_schedule():
    seen: list[tuple[list[int], list[float]]] = []

    class Recording(NumpyTrainer):
        def train_epoch(self, batches, lrs):
            seen.append(([int(i) for b in batches for i in b], [float(v) for v in lrs]))
            return super().train_epoch(batches, lrs)

    spec = _dense_spec()
    x = np.zeros((10, 1, 2, 2), np.float32)
    y = np.zeros(10, np.int64)
    config = _config(epochs=2, batch_size=4, lr_schedule="inv", lr_gamma=0.5, lr_power=1.0, seed=5)
    run_training(Recording, spec, config, (x, y, x, y))
    for epoch, (order, lrs) in enumerate(seen):
        expected = batch_order(10, 4, 5, epoch)
        assert order == [int(i) for b in expected for i in b]
        first = 3 * epoch
        np.testing.assert_allclose(lrs, learning_rates(config, epoch, first, 3))
    assert seen[0][0] != seen[1][0]  # a new permutation each epoch


def test_early_stopping_and_pruning():
    spec = _dense_spec()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 1, 2, 2)).astype(np.float32)
    y = rng.integers(0, 3, 20)
    data = (x, y, x, y)
    pruned = run_training(
        NumpyTrainer, spec, _config(epochs=5), data, lambda kind, payload: kind != "epoch"
    )
    assert pruned["stopped"] == "pruned" and pruned["epochs_run"] == 1
    frozen = run_training(
        NumpyTrainer, spec, _config(epochs=10, learning_rate=1e-9, early_stopping_patience=2), data
    )
    assert frozen["stopped"] == "early_stopping" and frozen["epochs_run"] == 3
