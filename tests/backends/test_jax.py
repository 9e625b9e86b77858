"""The JAX backend's own promises, beyond the conformance suite: one compiled training step per
model, optimizer and batch shape, shared by a process's trainers and warmed outside the timed
epochs; weight decay and momentum as state of that one program; a clear refusal of a GPU that
JAX does not see."""

from __future__ import annotations

import pytest

# Runs in the jax worker's interpreter; prints one JSON line.
PROGRAM = r"""
import json, sys
import jax
import numpy as np
from dltune.backends import load_trainer_class
from dltune.models import build_model

cls = load_trainer_class(sys.argv[1])
cls.setup({"intra_op": 1, "inter_op": 1})
rng = np.random.default_rng(0)
x = rng.normal(size=(50, 1, 6, 6)).astype(np.float32)
y = rng.integers(0, 3, 50).astype(np.int64)
spec = build_model("mlp", (1, 6, 6), 3)
config = dict(optimizer="momentum", learning_rate=0.05, momentum=0.9, weight_decay=0.0,
              batch_size=16, epochs=2, seed=1)

def run(**changes):
    trainer = cls(spec, dict(config, **changes))
    trainer.build(spec.init_params(1))
    trainer.load_data(x, y, x, y)
    trainer.compile()
    compiled = trainer._train_step._cache_size()
    trainer.train_epoch([np.arange(i, min(i + 16, 50)) for i in range(0, 50, 16)], np.full(4, 0.05, np.float32))
    return trainer, compiled

first, warmed = run()
after_epoch = first._train_step._cache_size()
decayed, _ = run(weight_decay=0.1)
refused = None
try:
    run(device="cuda")
except ValueError as exc:
    refused = str(exc)
print(json.dumps({
    "warmed": warmed, "after_epoch": after_epoch, "after_second": decayed._train_step._cache_size(),
    "same_program": first._train_step is decayed._train_step,
    "decay_moved": float(np.abs(first.get_params()[0] - decayed.get_params()[0]).max()),
    "refused": refused, "gpu": jax.default_backend() != "cpu", "threads": cls.thread_info(),
}))
"""


@pytest.fixture(scope="module")
def result(in_backend):
    return in_backend("jax", PROGRAM)


def test_one_program_per_batch_shape_compiled_before_training(result):
    # Batches of 16 and the remainder of 2: both compiled by the warm-up, none in the epoch.
    assert result["warmed"] == result["after_epoch"] == 2
    # A second trainer with another weight decay reuses that program, and the decay acts.
    assert result["same_program"] and result["after_second"] == 2
    assert result["decay_moved"] > 1e-4


def test_cuda_refused_with_what_to_install(result):
    if result["gpu"]:
        pytest.skip("this JAX sees a GPU: tests/backends/test_gpu.py checks that path")
    assert result["refused"] is not None
    assert "device='cuda'" in result["refused"] and "jax[cuda12]" in result["refused"]


def test_threads_reported_from_the_pool_itself(result):
    # PJRT_NPROC from the intra-op setting sizes XLA's pool, counted by its threads' name.
    assert result["threads"]["intra_op"] == 1
    assert result["threads"]["pjrt_nproc"] == "1"
