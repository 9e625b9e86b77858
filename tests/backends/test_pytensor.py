"""PyTensor backend: im2col convolution and pooling built from tensor primitives.

PyTensor runs in worker processes (``measure``) or a subprocess, never in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dltune._bench import measure, worker_extra_env
from dltune.config import ThreadConfig, TrainConfig
from dltune.envs import pytensor_flags
from dltune.models import build_model
from dltune.models._spec import AvgPool2D, Conv2D, Dense, Flatten, MaxPool2D, ModelSpec
from dltune.runtime import worker_environment


@pytest.fixture(scope="module", autouse=True)
def pytensor_ready():
    import importlib.util

    if importlib.util.find_spec("pytensor") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pytensor is needed under CI: pip install 'dltune[pytensor]'")
        pytest.skip("pytensor is not installed: pip install 'dltune[pytensor]'")
    yield


@pytest.fixture(scope="module")
def digits():
    from dltune.data import load_dataset

    return load_dataset("digits")


# Runs in a subprocess: each backend's forward pass and a few steps from the same weights.
PROGRAM = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from dltune.backends import load_trainer_class
    from dltune.models._spec import ModelSpec
    job = json.load(open(sys.argv[1]))
    data = np.load(job["data"])
    spec = ModelSpec.from_dict(job["spec"])
    out = {}
    for backend in ("torch", "pytensor"):
        cls = load_trainer_class(backend)
        cls.setup({})
        trainer = cls(spec, job["config"])
        trainer.build(spec.init_params(job["config"]["seed"]))
        trainer.load_data(data["x_train"], data["y_train"], data["x_test"], data["y_test"])
        trainer.compile()
        predictions = trainer.predict()
        batches = [np.asarray(b, dtype=np.int64) for b in job["batches"]]
        loss = trainer.train_epoch(batches, np.asarray(job["lrs"], dtype=np.float32))
        out[backend] = {"loss": loss, "count": trainer.count_params(),
                        "predictions": predictions.tolist(),
                        "params": [p.tolist() for p in trainer.get_params()]}
    json.dump(out, open(job["out"], "w"))
    """
)


def _compare_with_torch(tmp_path, spec: ModelSpec, data: dict, config: dict, batches, lrs):
    np.savez(tmp_path / "data.npz", **data)
    job = {
        "spec": spec.to_dict(), "config": config, "data": str(tmp_path / "data.npz"),
        "out": str(tmp_path / "out.json"), "batches": [np.asarray(b).tolist() for b in batches],
        "lrs": [float(v) for v in lrs],
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = worker_environment(ThreadConfig.uniform(1).environment(), worker_extra_env("pytensor"))
    # The graph (convolution, pooling, flatten order) as Python thunks: no C module compiled per op
    # and shape; test_conformance.py runs the C mode users get against the numpy reference.
    env["PYTENSOR_FLAGS"] = f"{pytensor_flags()},mode=FAST_COMPILE"  # the last value wins
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "job.json")],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / "out.json").read_text())


# Strided, overlapping and average pooling, same and valid padding, several channels.
POOLING_NET = ModelSpec(
    "pooling_net",
    (3, 10, 9),
    4,
    (
        Conv2D(5, 3, padding="same"),
        MaxPool2D(3, 2),
        Conv2D(4, 2, stride=2),
        AvgPool2D(2, 1),
        Flatten(),
        Dense(4),
    ),
)


@pytest.mark.slow
def test_same_predictions_and_steps_as_torch(tmp_path, digits):
    """Forward pass (im2col convolution, pooling, flatten order) and three momentum steps.

    LeNet on digits has tied max-pooling windows (flat backgrounds); the pooling net has
    overlapping, strided and average pooling on random data.
    """
    rng = np.random.default_rng(0)
    cases = [
        (
            build_model("lenet", digits.input_shape, digits.num_classes),
            {"x_train": digits.x_train[:96], "y_train": digits.y_train[:96],
             "x_test": digits.x_test[:64], "y_test": digits.y_test[:64]},
        ),
        (
            POOLING_NET,
            {"x_train": rng.normal(size=(96, 3, 10, 9)).astype(np.float32),
             "y_train": rng.integers(0, 4, 96).astype(np.int64),
             "x_test": rng.normal(size=(64, 3, 10, 9)).astype(np.float32),
             "y_test": rng.integers(0, 4, 64).astype(np.int64)},
        ),
    ]
    config = TrainConfig(optimizer="momentum", momentum=0.9, weight_decay=5e-4, seed=4).to_dict()
    order = rng.permutation(96)
    batches, lrs = [order[:32], order[32:64], order[64:]], [0.05, 0.03, 0.01]
    for spec, data in cases:
        out = _compare_with_torch(tmp_path, spec, data, config, batches, lrs)
        ref, got = out["torch"], out["pytensor"]
        assert got["count"] == ref["count"] == spec.param_count
        assert np.mean(np.array(got["predictions"]) == np.array(ref["predictions"])) >= 0.95
        assert got["loss"] == pytest.approx(ref["loss"], rel=1e-3)
        init = spec.init_params(4)
        for i, (a, r, p0) in enumerate(zip(got["params"], ref["params"], init, strict=True)):
            moved = np.asarray(r) - p0
            np.testing.assert_allclose(
                np.asarray(a) - p0, moved, rtol=2e-3, atol=2e-3 * float(np.abs(moved).max()),
                err_msg=f"{spec.name}: parameter {i} {p0.shape}",
            )


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mlp", "lenet"])
def test_trains_digits(digits, model, pool):
    from dltune._workload import Workload

    workload = Workload(digits, build_model(model, digits.input_shape, digits.num_classes))
    config = TrainConfig(
        framework="pytensor", optimizer="momentum", learning_rate=0.05, batch_size=64, epochs=4,
        threads=ThreadConfig.uniform(1),
    )
    record = measure(workload, config, pool=pool)

    assert record.status == "ok", record.error
    metrics = record.metrics
    assert metrics["test_accuracy"] >= 0.9
    assert metrics["param_count"] == workload.model.param_count
    assert metrics["threads"]["intra_op"] == 1
    assert metrics["threads"]["linker"] == "VMLinker"
