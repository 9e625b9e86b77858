"""The Trainer protocol every backend implements, and the one training driver they all share.

Call order, all inside a worker process:

1. ``Trainer.setup(threads)`` once per process, before anything else: imports the framework
   and applies the thread settings through its API (most frameworks accept them only once).
2. ``trainer = Cls(spec, config)``, then ``build(params)`` with the canonical initial weights,
   ``load_data(...)`` (arrays are NCHW float32, labels int64), ``compile()`` (tracing, graph
   compilation, warm-up: timed separately from training).
3. ``train_epoch(batches, lrs)`` and ``predict()`` alternately, driven by :func:`run_training`,
   which alone owns batch order, schedules, timing, curves and early stopping.

:func:`run_steps` drives the same calls for a few given batches and returns the weights: the
conformance suite uses it to check that every backend takes the same optimisation steps, and
:func:`steps_apart` to compare one backend's steps on two devices.

Nothing here is thread-safe; a worker runs one training at a time.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from dltune.backends._common import batch_order, learning_rates
from dltune.models._spec import ModelSpec

__all__ = ["Trainer", "run_steps", "run_training"]


class Trainer(ABC):
    """One framework's implementation of training a :class:`ModelSpec`."""

    name: ClassVar[str]
    SUPPORTS_GPU: ClassVar[bool] = False

    def __init__(self, spec: ModelSpec, config: dict[str, Any]) -> None:
        self.spec = spec
        self.config = config

    @classmethod
    @abstractmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        """Import the framework and apply thread settings; called once per process."""

    @classmethod
    @abstractmethod
    def framework_version(cls) -> str:
        """The framework's version string."""

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        """The thread counts the framework reports it really uses."""
        return {}

    @abstractmethod
    def build(self, params: list[np.ndarray]) -> None:
        """Create the model with these initial weights (canonical layout)."""

    @abstractmethod
    def load_data(
        self, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray
    ) -> None:
        """Move the data into the framework once."""

    def compile(self) -> None:  # noqa: B027 - optional hook
        """Trace or compile what training and prediction need, then warm up: run them once on
        the batch sizes the epochs use (:func:`~dltune.backends._common.epoch_batch_sizes`)
        where a framework compiles, instantiates or allocates on first use, and leave the
        weights, optimizer state, running statistics and random streams as built. Timed apart
        from training (``compile_time_s``), so a first run trains as fast as a later one."""

    @abstractmethod
    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        """One pass over ``batches`` (train-set indices) with per-batch learning rates.

        Returns the mean training loss over the epoch's samples.
        """

    @abstractmethod
    def predict(self) -> np.ndarray:
        """Predicted labels for the whole test set (inference mode)."""

    @abstractmethod
    def get_params(self) -> list[np.ndarray]:
        """The current weights in the canonical layout and order."""

    def get_state(self) -> list[np.ndarray]:
        """The running statistics (:meth:`ModelSpec.state_shapes`, in that order); a backend
        whose model has any returns them."""
        return []

    @abstractmethod
    def count_params(self) -> int:
        """The trainable parameter count as the framework itself reports it."""

    def device_peak_memory_mb(self) -> float | None:
        """Peak accelerator memory, where the backend ran on one."""
        return None


def run_training(
    trainer_cls: type[Trainer],
    spec: ModelSpec,
    config: dict[str, Any],
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    on_event: Callable[[str, dict[str, Any]], bool | None] = lambda kind, payload: None,
) -> dict[str, Any]:
    """Train and evaluate with the shared semantics; return the metrics.

    ``on_event`` receives ``train_begin`` / ``train_end`` around each timed epoch and ``epoch``
    after each evaluation; returning False from an ``epoch`` event stops training (pruning).
    """
    x_train, y_train, x_test, y_test = data
    trainer = trainer_cls(spec, config)
    trainer.build(spec.init_params(int(config["seed"])))
    trainer.load_data(x_train, y_train, x_test, y_test)
    t0 = time.perf_counter()
    trainer.compile()
    compile_time = time.perf_counter() - t0

    n = len(y_train)
    batch_size = int(config["batch_size"])
    patience = config.get("early_stopping_patience")
    curves: list[dict[str, Any]] = []
    train_time = cpu_time = test_time = 0.0
    iteration, best, since_best = 0, -1.0, 0
    accuracy = loss = float("nan")
    stopped = None
    for epoch in range(int(config["epochs"])):
        batches = batch_order(n, batch_size, int(config["seed"]), epoch)
        lrs = learning_rates(config, epoch, iteration, len(batches))
        on_event("train_begin", {"epoch": epoch})
        c0, w0 = time.process_time(), time.perf_counter()
        loss = float(trainer.train_epoch(batches, lrs))
        epoch_time = time.perf_counter() - w0
        cpu_time += time.process_time() - c0
        on_event("train_end", {"epoch": epoch})
        train_time += epoch_time
        iteration += len(batches)
        e0 = time.perf_counter()
        accuracy = float(np.mean(trainer.predict() == y_test))
        test_time = time.perf_counter() - e0
        curves.append(
            {
                "epoch": epoch + 1,
                "train_loss": loss,
                "test_accuracy": accuracy,
                "train_time_s": epoch_time,
                "eval_time_s": test_time,
                "learning_rate": float(lrs[-1]),
            }
        )
        if on_event("epoch", curves[-1]) is False:
            stopped = "pruned"
            break
        if not math.isfinite(loss):
            stopped = "diverged"
            break
        if accuracy > best:
            best, since_best = accuracy, 0
        else:
            since_best += 1
            if patience is not None and since_best >= int(patience):
                stopped = "early_stopping"
                break

    return {
        "train_time_s": train_time,
        "test_time_s": test_time,
        "compile_time_s": compile_time,
        "test_accuracy": accuracy,
        "final_train_loss": loss,
        "epochs_run": len(curves),
        "stopped": stopped,
        "curves": curves,
        "param_count": int(trainer.count_params()),
        "cpu_time_s": cpu_time,
        "cpu_percent_mean": 100.0 * cpu_time / train_time if train_time > 0 else 0.0,
        "samples_per_s": n * len(curves) / train_time if train_time > 0 else 0.0,
        "gpu_peak_mb": trainer.device_peak_memory_mb(),
    }


def run_steps(
    trainer_cls: type[Trainer],
    spec: ModelSpec,
    config: dict[str, Any],
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    batches: list[np.ndarray],
    lrs: np.ndarray,
) -> dict[str, Any]:
    """Build from the canonical initial weights, train on exactly ``batches``, report the state.

    Returns the weights after the steps (canonical layout), the running statistics, the mean
    loss over the steps, the test-set predictions and the backend's own parameter count.
    """
    x_train, y_train, x_test, y_test = data
    trainer = trainer_cls(spec, config)
    trainer.build(spec.init_params(int(config["seed"])))
    trainer.load_data(x_train, y_train, x_test, y_test)
    trainer.compile()
    loss = float(trainer.train_epoch([np.asarray(b, dtype=np.int64) for b in batches],
                                     np.asarray(lrs, dtype=np.float32)))
    return {
        "params": [np.asarray(p) for p in trainer.get_params()],
        "state": [np.asarray(a) for a in trainer.get_state()],
        "loss": loss,
        "predictions": np.asarray(trainer.predict()),
        "param_count": int(trainer.count_params()),
    }


def steps_apart(trainer_cls: type[Trainer], devices: tuple[str, str] = ("cpu", "cuda")) -> dict[str, dict[str, float]]:
    """Three steps of SGD, momentum and Adam on LeNet (12x12x1, 4 classes, dropout off: the
    devices' random streams differ) from the same weights on each of ``devices``, per optimizer
    how far apart the second device's results are from the first's: ``loss_rel`` (the mean
    loss's relative difference), ``param_rel`` (the largest difference in any weight tensor as
    a share of that tensor's largest step), ``param_l2`` (the norm of all differences against
    the norm of all steps) and ``same_predictions`` (the share of equal test predictions).
    The GPU check (tests/backends/test_gpu.py) and ``benchmarks/gpu_torch.py`` use it."""
    from dltune.models import build_model

    lenet = build_model("lenet", (1, 12, 12), 4).to_dict()
    spec = ModelSpec.from_dict({**lenet, "layers": [
        dict(layer, rate=0.0) if layer["kind"] == "dropout" else layer for layer in lenet["layers"]]})
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 1, 12, 12)).astype(np.float32)
    y = rng.integers(0, 4, 96).astype(np.int64)
    order = rng.permutation(96)
    batches = [order[i * 32:(i + 1) * 32] for i in range(3)]
    out = {}
    for optimizer, lrs in (("sgd", [0.1, 0.1, 0.05]), ("momentum", [0.05, 0.05, 0.02]),
                           ("adam", [1e-3, 1e-3, 5e-4])):
        config = dict(optimizer=optimizer, learning_rate=lrs[0], momentum=0.9, weight_decay=1e-3,
                      seed=5, batch_size=32)
        init = spec.init_params(5)
        first, second = (run_steps(trainer_cls, spec, dict(config, device=d), (x, y, x, y), batches,
                                   np.float32(lrs)) for d in devices)
        worst = max(float(np.abs(b - a).max() / np.abs(a - p0).max())
                    for a, b, p0 in zip(first["params"], second["params"], init, strict=True))
        moved = np.concatenate([(a - p0).ravel() for a, p0 in zip(first["params"], init, strict=True)])
        apart = np.concatenate([(b - a).ravel() for a, b in zip(first["params"], second["params"], strict=True)])
        out[optimizer] = {
            "loss_rel": abs(second["loss"] - first["loss"]) / abs(first["loss"]),
            "param_rel": worst,
            "param_l2": float(np.linalg.norm(apart) / np.linalg.norm(moved)),
            "same_predictions": float(np.mean(second["predictions"] == first["predictions"])),
        }
    return out
