"""Fixtures for backend-specific checks: they run inside the backend's own interpreter, as a
worker would, and hand back a JSON result (the pytest process never imports a framework)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dltune._bench import interpreter_for, worker_extra_env
from dltune._errors import DltuneError
from dltune.config import ThreadConfig
from dltune.runtime import WorkerPool, worker_environment

# Modules the pytest process must never import: backends run in workers only.
FRAMEWORK_MODULES = ("torch", "tensorflow", "keras", "mxnet", "theano", "pytensor", "jax")


@pytest.fixture(scope="module")
def pool():
    """Warm workers shared by a module's tests (reused across tests: see worker_environment)."""
    with WorkerPool(max_workers=2) as workers:
        yield workers


@pytest.fixture(scope="module", autouse=True)
def _parent_imports_no_framework():
    yield
    leaked = sorted(m for m in FRAMEWORK_MODULES if m in sys.modules)
    assert not leaked, f"the pytest process imported framework(s) {leaked}"

# Trains ``spec_name`` with one seed, with other optimizer settings and batch size, with the first
# seed again, with another seed, with a constant learning rate instead of the ``inv`` schedule,
# and with its dropout rates set to 0, all in one process (as a warm worker); prints the
# per-epoch losses.
SEED_AND_SCHEDULE = r"""
import json, sys
import numpy as np
from dltune.backends import load_trainer_class
from dltune.backends._base import run_training
from dltune.models import ModelSpec, build_model

name, spec_name = sys.argv[1], sys.argv[2]
trainer_cls = load_trainer_class(name)
trainer_cls.setup({"intra_op": 1, "inter_op": 1})
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 1, 8, 8)).astype(np.float32)
y = ((x[:, 0, :4].sum((1, 2)) > 0) * 2 + (x[:, 0, :, :4].sum((1, 2)) > 0)).astype(np.int64)
spec = build_model(spec_name, (1, 8, 8), 4)
config = dict(optimizer="momentum", learning_rate=0.05, momentum=0.9, weight_decay=1e-4,
              batch_size=20, epochs=2, seed=7, lr_schedule="inv", lr_gamma=0.5, lr_power=1.0)

def losses(model=spec, **changes):
    result = run_training(trainer_cls, model, dict(config, **changes), (x, y, x, y))
    return [c["train_loss"] for c in result["curves"]], result["test_accuracy"]

def traces():  # TensorFlow: how often each model's epoch was traced (one graph per model)
    if name != "tensorflow":
        return None
    from dltune.backends._tensorflow import _GRAPHS
    return sorted(g.epoch.experimental_get_tracing_count() for g in _GRAPHS.values())

first, accuracy = losses()
changed = losses(momentum=0.5, weight_decay=1e-3, batch_size=16)[0]  # then "again" restarts from the seed
print(json.dumps({
    "first": first,
    "changed": changed,
    "again": losses()[0],
    "other_seed": losses(seed=8)[0],
    "constant_lr": losses(lr_schedule="constant")[0],
    "no_dropout": losses(ModelSpec.from_dict({**spec.to_dict(), "layers": [
        dict(layer, rate=0.0) if layer["kind"] == "dropout" else layer
        for layer in spec.to_dict()["layers"]]}))[0],
    "accuracy": accuracy,
    "traces": traces(),
}))
"""


def _run_in_backend(name: str, script: str, *args: str, extra_env: dict[str, str] | None = None) -> dict:
    try:
        interpreter = interpreter_for(name)
    except DltuneError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"backend '{name}' cannot run under CI: {exc}")
        pytest.skip(str(exc))
    env = worker_environment(ThreadConfig.uniform(1).environment(), worker_extra_env(name))
    env.update(extra_env or {})
    proc = subprocess.run([interpreter, "-c", script, name, *args], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def in_backend():
    """``f(backend, script, *args)``: run a script in the backend's interpreter, its JSON line."""
    return _run_in_backend


@pytest.fixture
def seed_and_schedule():
    """``f(backend, model)``: losses of same-seed, other-seed and constant-rate trainings."""
    return lambda name, model: _run_in_backend(name, SEED_AND_SCHEDULE, model)
