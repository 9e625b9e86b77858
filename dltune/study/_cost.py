"""A small cost model that predicts a run's wall time, so the study can fit its budget.

Before a framework has been measured, an epoch is assumed to cost three forward passes over the
training set at 2 GFLOP/s plus 2 ms per batch; every measured run then rescales that prior for
its framework (median of observed / prior), so later phases are planned on real figures.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from dltune.config import TrainConfig

__all__ = ["CostModel"]

_FLOP_RATE = 2e9
_STEP_OVERHEAD_S = 0.002
_RUN_OVERHEAD_S = 1.5
# A fresh worker imports its framework once; TensorFlow's import is the slowest.
_START_S = {"tensorflow": 12.0, "torch": 4.0, "mxnet": 4.0, "theano": 8.0, "pytensor": 8.0}


class CostModel:
    """Predicts seconds of wall time per run for one workload; learns from observed runs."""

    def __init__(self, n_train: int, n_test: int, flops_per_sample: int) -> None:
        self.n_train = max(1, int(n_train))
        self.n_test = max(1, int(n_test))
        self.flops_per_sample = max(1, int(flops_per_sample))
        self._ratios: dict[str, list[float]] = {}
        self._started: set[tuple] = set()

    def _prior_epoch_s(self, config: TrainConfig) -> float:
        steps = math.ceil(self.n_train / config.batch_size)
        train = 3 * self.n_train * self.flops_per_sample / _FLOP_RATE + steps * _STEP_OVERHEAD_S
        evaluate = self.n_test * self.flops_per_sample / _FLOP_RATE + 0.01
        return train + evaluate

    def factor(self, framework: str) -> float:
        """Observed / prior time for ``framework`` (1.0 until it has been measured)."""
        ratios = self._ratios.get(framework)
        return statistics.median(ratios) if ratios else 1.0

    def startup_s(self, config: TrainConfig) -> float:
        """Seconds to start a worker for ``config`` (0 when one with its settings has run)."""
        if (config.framework, config.threads) in self._started:
            return 0.0
        return _START_S.get(config.framework, 4.0)

    def predict(self, config: TrainConfig, include_start: bool = True) -> float:
        """Predicted wall seconds of one run of ``config`` (all its epochs, no early stop)."""
        start = self.startup_s(config) if include_start else 0.0
        epoch = self._prior_epoch_s(config) * self.factor(config.framework)
        return start + _RUN_OVERHEAD_S + config.epochs * epoch

    def observe(self, config: TrainConfig, wall_s: float, metrics: dict[str, Any] | None = None,
                warm: bool = True) -> None:
        """Learn from one finished run that took ``wall_s`` seconds.

        ``warm``: its worker is still alive (False for runs of an earlier session).
        """
        if warm:
            self._started.add((config.framework, config.threads))
        epochs = (metrics or {}).get("epochs_run") or config.epochs
        per_epoch = max(wall_s - _RUN_OVERHEAD_S, 0.05) / max(int(epochs), 1)
        self._ratios.setdefault(config.framework, []).append(per_epoch / self._prior_epoch_s(config))
