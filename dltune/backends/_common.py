"""What every backend shares: batch order, learning-rate schedule, layout conversions."""

from __future__ import annotations

import numpy as np

__all__ = ["batch_order", "learning_rates", "dense_rows_chw_to_hwc", "dense_rows_hwc_to_chw"]


def batch_order(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Index batches of one epoch: a permutation derived from (seed, epoch), cut in order.

    The last batch keeps the remainder (it may be smaller than ``batch_size``).
    """
    perm = np.random.default_rng([int(seed), int(epoch), 104729]).permutation(n).astype(np.int64)
    return [perm[i : i + batch_size] for i in range(0, n, batch_size)]


def learning_rates(config: dict, epoch: int, first_iteration: int, n_batches: int) -> np.ndarray:
    """The learning rate of each batch of ``epoch`` under the configured schedule."""
    lr = float(config["learning_rate"])
    schedule = config.get("lr_schedule", "constant")
    t = np.arange(first_iteration, first_iteration + n_batches, dtype=np.float64)
    if schedule == "inv":
        rates = lr * (1.0 + float(config["lr_gamma"]) * t) ** (-float(config["lr_power"]))
    elif schedule == "step":
        rates = np.full(n_batches, lr * float(config["lr_gamma"]) ** (epoch // int(config["lr_step_epochs"])))
    else:
        rates = np.full(n_batches, lr)
    return rates.astype(np.float32)


def dense_rows_chw_to_hwc(weight: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """Reorder a dense weight's input rows from (C, H, W) flatten order to (H, W, C)."""
    c, h, w = chw
    return weight.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)


def dense_rows_hwc_to_chw(weight: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """Inverse of :func:`dense_rows_chw_to_hwc`."""
    c, h, w = chw
    return weight.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)
