"""MXNet and Theano backends, run in the legacy runtime's interpreter (never in this process).

They need the legacy runtime (``dltune env install legacy``; ``make test`` installs it first).
Without it they skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

from dltune._bench import interpreter_for, measure, worker_extra_env
from dltune.config import ThreadConfig, TrainConfig
from dltune.envs import LegacyRuntime
from dltune.models import build_model
from dltune.runtime import worker_environment

LEGACY = ("mxnet", "theano")
# Runs in the backend's interpreter: a few steps from the canonical initial weights on the
# given batches, then the weights (canonical layout), the loss and the framework's own count.
STEP_PROGRAM = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from dltune.backends import load_trainer_class
    from dltune.models._spec import ModelSpec
    job = json.load(open(sys.argv[1]))
    cls = load_trainer_class(job["backend"])
    cls.setup({})
    spec = ModelSpec.from_dict(job["spec"])
    data = np.load(job["data"])
    trainer = cls(spec, job["config"])
    trainer.build(spec.init_params(job["config"]["seed"]))
    trainer.load_data(data["x_train"], data["y_train"], data["x_test"], data["y_test"])
    trainer.compile()
    before = [np.array(p, copy=True) for p in trainer.get_params()]  # torch returns views
    batches = [np.asarray(b, dtype=np.int64) for b in job["batches"]]
    loss = trainer.train_epoch(batches, np.asarray(job["lrs"], dtype=np.float32))
    after = trainer.get_params()
    np.savez(job["out"], **{f"p{i}": p for i, p in enumerate(after)},
             **{f"b{i}": p for i, p in enumerate(before)})
    json.dump({"loss": loss, "count": trainer.count_params(), "n": len(after)},
              open(job["out"] + ".json", "w"))
    """
)


@pytest.fixture(scope="module")
def legacy_ready() -> None:
    problem = LegacyRuntime().check()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the legacy runtime is needed under CI: {problem}")
        pytest.skip(f"{problem}; run: dltune env install legacy")


@pytest.fixture(scope="module")
def digits():
    from dltune.data import load_dataset

    return load_dataset("digits")


def _steps(tmp_path, backend: str, spec, config: dict, data: dict, batches, lrs):
    """Run :data:`STEP_PROGRAM` for ``backend`` in its own interpreter; return its results."""
    np.savez(tmp_path / "data.npz", **data)
    out = str(tmp_path / f"{backend}.npz")
    job = {
        "backend": backend, "spec": spec.to_dict(), "config": config,
        "data": str(tmp_path / "data.npz"), "out": out,
        "batches": [np.asarray(b).tolist() for b in batches], "lrs": [float(v) for v in lrs],
    }
    (tmp_path / f"{backend}.json").write_text(json.dumps(job))
    env = worker_environment(ThreadConfig.uniform(1).environment(), worker_extra_env(backend))
    done = subprocess.run(
        [interpreter_for(backend), "-c", STEP_PROGRAM, str(tmp_path / f"{backend}.json")],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads(open(out + ".json").read())
    with np.load(out) as state:
        after = [state[f"p{i}"] for i in range(meta["n"])]
        before = [state[f"b{i}"] for i in range(meta["n"])]
    return meta, before, after


@pytest.mark.slow
@pytest.mark.parametrize("backend", LEGACY)
def test_trains_digits_mlp(legacy_ready, pool, digits, backend):
    """A full run through the worker runtime (LeNet's layers are checked step by step below)."""
    from dltune._workload import Workload

    workload = Workload(digits, build_model("mlp", digits.input_shape, digits.num_classes))
    config = TrainConfig(
        framework=backend, optimizer="momentum", learning_rate=0.05, batch_size=64, epochs=4,
        threads=ThreadConfig.uniform(2),
    )
    record = measure(workload, config, pool=pool)

    assert record.status == "ok", record.error
    metrics = record.metrics
    assert metrics["test_accuracy"] >= 0.9
    assert metrics["param_count"] == workload.model.param_count
    assert metrics["epochs_run"] == 4
    assert metrics["threads"]["intra_op"] == 2
    assert metrics["threads"]["env"]["OMP_NUM_THREADS"] == "2"
    assert record.versions["numpy"] == "1.23.5"
    assert record.versions["framework"] == {"mxnet": "1.9.1", "theano": "1.0.5"}[backend]
    assert metrics["compile_time_s"] >= 0 and metrics["train_time_s"] > 0


def _digits_subset(digits, n_train=96, n_test=32):
    return {
        "x_train": digits.x_train[:n_train], "y_train": digits.y_train[:n_train],
        "x_test": digits.x_test[:n_test], "y_test": digits.y_test[:n_test],
    }


@pytest.mark.slow
def test_same_steps_as_torch_on_digits_lenet(legacy_ready, digits, tmp_path):
    """From the same initial weights, three steps land on the same weights as PyTorch's.

    Digits have flat backgrounds, so max-pooling windows hold ties: this checks that every
    backend sends a tied window's gradient the same way (random data, as in the conformance
    suite, never ties). Every optimizer is covered there; momentum with weight decay here.
    """
    optimizer, decay = "momentum", 5e-4
    spec = build_model("lenet", digits.input_shape, digits.num_classes)
    config = TrainConfig(
        optimizer=optimizer, momentum=0.9, weight_decay=decay, seed=5,
        learning_rate=0.05,
    ).to_dict()
    order = np.random.default_rng(2).permutation(96)
    batches = [order[:32], order[32:64], order[64:]]
    lrs = [config["learning_rate"], config["learning_rate"] / 2, config["learning_rate"] / 4]
    data = _digits_subset(digits)

    ref_meta, init, ref = _steps(tmp_path, "torch", spec, config, data, batches, lrs)
    for backend in LEGACY:
        meta, before, after = _steps(tmp_path, backend, spec, config, data, batches, lrs)
        assert meta["count"] == spec.param_count
        assert meta["loss"] == pytest.approx(ref_meta["loss"], rel=1e-3)
        tol = 2e-3
        for i, (b, a, r, p0) in enumerate(zip(before, after, ref, init, strict=True)):
            np.testing.assert_array_equal(b, p0, err_msg=f"{backend}: initial parameter {i}")
            moved = r - p0
            np.testing.assert_allclose(
                a - p0, moved, rtol=tol, atol=tol * float(np.abs(moved).max()),
                err_msg=f"{backend}: parameter {i} {a.shape} after {optimizer} steps",
            )
