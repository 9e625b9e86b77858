"""One conformance suite, run against every backend in ``dltune.backends.BACKENDS``.

Every backend is driven the same way, through the worker runtime in its own interpreter (the
legacy runtime for MXNet and Theano); this pytest process never imports a framework. The
numpy backend, computed here in-process, is the reference: from identical initial weights,
every backend must take the same optimisation steps (same layouts, loss, optimizers, weight
decay), report the model's exact parameter count, predict one label per test sample, apply
the requested thread counts and keep evaluation out of the training time.

A backend whose framework is not installed is skipped with the reason, except under
``CI=true``, where it fails: a missing backend must not hide.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from dltune._bench import interpreter_for, measure, worker_extra_env
from dltune._errors import DltuneError
from dltune.backends import BACKENDS
from dltune.backends._base import run_steps
from dltune.backends._numpy import NumpyTrainer
from dltune.config import ThreadConfig, TrainConfig, usable_cores
from dltune.envs import pytensor_flags
from dltune.models import build_model
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    MaxPool2D,
    ModelSpec,
)
from dltune.runtime import worker_environment

# A small convolutional net touching every layout question: two input channels, a non-square
# image, same and valid padding, overlapping max pooling, average pooling, every activation,
# and a flatten of a (C, H, W) map into a dense layer.
SMALL_CONV = ModelSpec(
    "small_conv",
    (2, 11, 9),
    3,
    (
        Conv2D(4, 3, padding="same"),
        Activation("relu"),
        MaxPool2D(3, 2),
        Conv2D(6, 3),
        Activation("sigmoid"),
        AvgPool2D(2, 1),
        Flatten(),
        Dense(16),
        Activation("tanh"),
        Dense(3),
    ),
)
MLP = build_model("mlp", (3, 5, 4), 10)


def _unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run here, or None when it can."""
    info = BACKENDS[name]
    if importlib.util.find_spec(info.module) is None:
        return f"backend '{name}' has no implementation module {info.module}"
    try:
        interpreter_for(name)
    except DltuneError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module", params=list(BACKENDS))
def backend(request) -> str:
    name = request.param
    reason = _unavailable(name)
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"backend '{name}' cannot run under CI: {reason}")
        pytest.skip(reason)
    return name


def _arrays(spec: ModelSpec, n_train: int, n_test: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x_train = rng.normal(size=(n_train, *spec.input_shape)).astype(np.float32)
    x_test = rng.normal(size=(n_test, *spec.input_shape)).astype(np.float32)
    y_train = rng.integers(0, spec.num_classes, n_train).astype(np.int64)
    y_test = rng.integers(0, spec.num_classes, n_test).astype(np.int64)
    return x_train, y_train, x_test, y_test


def _steps_in_worker(pool, tmp_path, name, spec, config, data, batches, lrs, threads=1,
                     extra_env=None):
    """Run the worker's ``steps`` op for backend ``name`` (its worker's environment updated
    with ``extra_env``); return (result, params, predictions)."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    for part, array in zip(("x_train", "y_train", "x_test", "y_test"), data, strict=True):
        np.save(folder / f"{part}.npy", array)
    thread_config = ThreadConfig.uniform(threads)
    env = worker_environment(thread_config.environment(), {**worker_extra_env(name), **(extra_env or {})})
    worker = pool.acquire(interpreter_for(name), env)
    healthy = False
    try:
        result = worker.run(
            {
                "op": "steps",
                "backend": name,
                "spec": spec.to_dict(),
                "config": config,
                "threads": thread_config.to_dict(),
                "data_dir": str(folder),
                "fingerprint": f"conformance-{tmp_path.name}",
                "batches": [b.tolist() for b in batches],
                "lrs": [float(v) for v in lrs],
                "out": str(tmp_path / "state.npz"),
            },
            timeout=600,
        )
        healthy = True
    finally:
        pool.release(worker, healthy)
    with np.load(tmp_path / "state.npz") as state:
        params = [state[f"p{i}"] for i in range(result["n_params"])]
        predictions = state["predictions"]
    return result, params, predictions


STEP_CASES = [
    # (spec, optimizer, weight decay, learning rate per step): one plain SGD step; momentum and
    # Adam over three steps, so that their state and the bias correction matter.
    (SMALL_CONV, "sgd", 0.0, [0.1]),
    (MLP, "momentum", 0.01, [0.1, 0.05, 0.02]),
    (SMALL_CONV, "adam", 0.01, [1e-3, 1e-3, 5e-4]),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, optimizer, decay, lrs",
    STEP_CASES,
    ids=[f"{s.name}-{o}-wd{d:g}" for s, o, d, _ in STEP_CASES],
)
def test_same_steps_as_reference(backend, pool, tmp_path, spec, optimizer, decay, lrs):
    data = _arrays(spec, n_train=48, n_test=40)
    order = np.random.default_rng(1).permutation(48)
    batches = [order[i * 16 : (i + 1) * 16] for i in range(len(lrs))]
    config = TrainConfig(
        framework=backend, optimizer=optimizer, momentum=0.9, weight_decay=decay, seed=3,
        batch_size=16,  # the batches' size: what a backend's warm-up compiles for
    ).to_dict()
    init = spec.init_params(3)
    ref = run_steps(NumpyTrainer, spec, config, data, batches, np.float32(lrs))

    result, params, predictions = _steps_in_worker(
        pool, tmp_path, backend, spec, config, data, batches, lrs
    )

    assert result["param_count"] == spec.param_count
    assert [p.shape for p in params] == [tuple(s) for s in spec.param_shapes()]
    assert result["loss"] == pytest.approx(ref["loss"], rel=1e-4)
    # Adam divides by the gradient's running magnitude, which amplifies float32 rounding in
    # small gradients; a wrong beta, epsilon or bias correction still shows far above 1 %.
    tol = 1e-2 if optimizer == "adam" else 2e-3
    for i, (p, r, p0) in enumerate(zip(params, ref["params"], init, strict=True)):
        expected, got = r - p0, p - p0
        scale = float(np.abs(expected).max())
        assert scale > 0, f"parameter {i} did not move in the reference"
        np.testing.assert_allclose(
            got, expected, rtol=tol, atol=tol * scale, err_msg=f"parameter {i} ({p.shape})"
        )
    assert predictions.shape == (40,)
    assert np.issubdtype(predictions.dtype, np.integer)
    # Inference mode with the trained weights: the labels agree (up to near-ties).
    assert np.mean(predictions == ref["predictions"]) >= 0.95


def _counts_only_env(backend: str) -> dict[str, str]:
    """Worker variables for a check of counts and shapes, not of numbers (the steps above check
    those in the mode users run): PyTensor runs the same graph as Python thunks, so no C module is
    compiled for each preset's shapes. Theano has no such mode (its convolution is C only)."""
    if backend != "pytensor":
        return {}
    return {"PYTENSOR_FLAGS": f"{pytensor_flags()},mode=FAST_COMPILE"}  # the last value wins


@pytest.mark.slow
@pytest.mark.parametrize("preset, shape", [("lenet", (1, 28, 28)), ("cifar_quick", (3, 32, 32))])
def test_preset_param_count(backend, pool, tmp_path, preset, shape):
    spec = build_model(preset, shape, 10)
    data = _arrays(spec, n_train=8, n_test=5)
    config = TrainConfig(framework=backend, optimizer="sgd", learning_rate=0.01).to_dict()
    result, params, predictions = _steps_in_worker(
        pool, tmp_path, backend, spec, config, data, [np.arange(8)], [0.01],
        extra_env=_counts_only_env(backend),
    )
    assert result["param_count"] == spec.param_count
    assert sum(p.size for p in params) == spec.param_count
    assert predictions.shape == (5,)
    assert set(np.unique(predictions)) <= set(range(10))


@pytest.fixture(scope="module")
def workload():
    from dltune._workload import Workload
    from dltune.data import load_dataset

    data = load_dataset(
        "synthetic", n_train=256, n_test=64, height=8, width=8, channels=1, classes=4, seed=0
    )
    return Workload(data, build_model("mlp", data.input_shape, data.num_classes))


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_training_run_through_runtime(backend, pool, workload, threads):
    if threads > usable_cores():
        pytest.skip(f"this machine has {usable_cores()} usable core(s); {threads} requested")
    config = TrainConfig(
        framework=backend, epochs=3, batch_size=32, learning_rate=0.05,
        threads=ThreadConfig.uniform(threads),
    )
    epochs: list[dict] = []
    record = measure(workload, config, pool=pool, on_epoch=epochs.append)

    assert record.status == "ok", record.error
    metrics = record.metrics
    assert metrics["threads"]["intra_op"] == threads
    assert metrics["param_count"] == workload.model.param_count
    losses = [c["train_loss"] for c in metrics["curves"]]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    assert metrics["test_accuracy"] > 1 / 4  # better than chance on 4 balanced classes
    # Evaluation happens after each epoch's timed window, and is timed on its own.
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert metrics["train_time_s"] == pytest.approx(
        sum(c["train_time_s"] for c in metrics["curves"])
    )
    assert metrics["test_time_s"] == metrics["curves"][-1]["eval_time_s"] > 0
