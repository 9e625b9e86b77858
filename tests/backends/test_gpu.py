"""The GPU paths of the backends that have one (torch, tensorflow).

Everywhere: a framework build without CUDA, or a machine without an NVIDIA GPU, refuses
``device='cuda'`` with an error that says so, not a traceback from inside the framework.
Where ``nvidia-smi`` lists a GPU and the framework sees it: the same optimisation steps on the
GPU as on the CPU (full float32 on both), and a monitored training run through the runtime that
reports the device memory it peaked at. CI has no GPU; there the GPU checks (marked ``gpu``)
skip and say why, the one kind of skip CI allows.
"""

from __future__ import annotations

import os

import pytest

from dltune._bench import interpreter_for, measure
from dltune._errors import DltuneError
from dltune.config import TrainConfig
from dltune.hardware._hardware import _gpus

GPU_BACKENDS = ("torch", "tensorflow", "jax")

_SEES_GPU = {
    "torch": "import torch, json; print(json.dumps({'gpu': torch.cuda.is_available()}))",
    "tensorflow": "import tensorflow as tf, json; "
                  "print(json.dumps({'gpu': bool(tf.config.list_physical_devices('GPU'))}))",
    "jax": "import jax, json; print(json.dumps({'gpu': jax.default_backend() == 'gpu'}))",
}

# Trains three steps of each optimiser from the same weights on the CPU and on the GPU, in one
# process, and prints how far apart the results are (relative to how far the weights moved).
CPU_AGAINST_GPU = r"""
import json, sys
from dltune.backends import load_trainer_class
from dltune.backends._base import steps_apart

trainer_cls = load_trainer_class(sys.argv[1])
trainer_cls.setup({"intra_op": 1, "inter_op": 1})
print(json.dumps(steps_apart(trainer_cls, ("cpu", "cuda"))))
"""


def _framework_available(name: str) -> None:
    try:
        interpreter_for(name)
    except DltuneError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"backend '{name}' cannot run under CI: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def gpu_seen(in_backend):
    """``f(backend)``: whether the backend's own interpreter sees a GPU (asked once each)."""
    seen: dict[str, bool] = {}

    def sees(name: str) -> bool:
        if name not in seen:
            # Without an NVIDIA GPU on the machine no framework is imported to ask.
            seen[name] = bool(_gpus()) and in_backend(name, _SEES_GPU[name])["gpu"]
        return seen[name]

    return sees


@pytest.fixture
def digits():
    from dltune._workload import Workload

    return Workload.from_name("digits", "lenet", n_train=256)


@pytest.mark.slow
@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_cuda_refused_clearly_without_a_gpu(name, pool, gpu_seen, digits):
    _framework_available(name)
    if gpu_seen(name):
        pytest.skip(f"{name} sees a GPU here")
    config = TrainConfig(framework=name, epochs=1, device="cuda")
    record = measure(digits, config, pool=pool)
    assert record.status == "failed"
    message = record.error["message"]
    assert message.startswith("ValueError: "), message
    assert f"The {name} backend was given device='cuda'" in message
    assert "sees no" in message and "device='cpu'" in message


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_same_steps_on_the_gpu_as_on_the_cpu(name, gpu_seen, in_backend):
    _framework_available(name)
    if not gpu_seen(name):
        pytest.skip(f"no GPU that {name} sees here (nvidia-smi lists {len(_gpus())})")
    result = in_backend(name, CPU_AGAINST_GPU)
    for optimizer, diff in result.items():
        assert diff["loss_rel"] < 1e-4, (optimizer, diff)
        assert diff["same_predictions"] >= 0.95, (optimizer, diff)
        if optimizer == "adam":
            # Adam's first steps move each weight by about the learning rate whatever the size
            # of its gradient, so a gradient near zero whose rounding flips its sign moves the
            # other way: single weights differ by their whole step. Over all weights they agree
            # (an H200 on 2026-12-04: 1.8 % of the step's norm; TensorFloat-32: 5.2 %).
            assert diff["param_l2"] < 0.03, (optimizer, diff)
        else:
            # Full float32 on both: every weight tensor agrees to rounding (an H200 on
            # 2026-12-04: at most 0.7 % of its step; TensorFloat-32 convolutions: 9-16 %).
            assert diff["param_rel"] < 2e-2, (optimizer, diff)


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_gpu_training_run_through_runtime(name, pool, gpu_seen, digits):
    _framework_available(name)
    if not gpu_seen(name):
        pytest.skip(f"no GPU that {name} sees here (nvidia-smi lists {len(_gpus())})")
    config = TrainConfig(framework=name, epochs=3, batch_size=32, learning_rate=0.05,
                         device="cuda")
    record = measure(digits, config, pool=pool)

    assert record.status == "ok", record.error
    metrics = record.metrics
    assert metrics["gpu_peak_mb"] > 0
    losses = [c["train_loss"] for c in metrics["curves"]]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    assert metrics["test_accuracy"] > 0.5  # 10 digit classes: chance is 0.1
    assert record.config["device"] == "cuda"
