"""Candidate configurations for a recommendation: frameworks x space-filling configurations."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dltune.backends._registry import default_framework_names, is_retired
from dltune.config import LR_RANGES, OPTIMIZERS, ThreadConfig, TrainConfig, thread_grid
from dltune.recommend._policy import DEFAULT_POLICY, RecommendPolicy

__all__ = ["candidate_configs", "candidate_threads", "default_frameworks", "measured_candidates",
           "retired_frameworks"]

_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def _threads(n: int, usable: int) -> ThreadConfig:
    # Fewer threads than usable cores run pinned to that many cores (a hardware target of its own).
    if n >= usable:
        return ThreadConfig.uniform(n)
    return ThreadConfig(intra_op=n, inter_op=1, blas=n, cores=n)


def default_frameworks(predictable: Sequence[str], here: bool = True) -> list[str]:
    """The candidate frameworks when none are named, among ``predictable`` (those the surrogates
    can predict), in its order: the maintained default frameworks
    (:func:`~dltune.backends._registry.default_framework_names`; with ``here`` False, those
    registered as defaults whether or not installed here). Where the knowledge base predicts
    none of them (one of its own, e.g. numpy's), every one of ``predictable`` that is not
    retired. Never a retired framework: ``recommend`` and ``kb validate`` pick among these."""
    defaults = default_framework_names(installed=here)
    chosen = [f for f in predictable if f in defaults]
    return chosen or [f for f in predictable if not is_retired(f)]


def retired_frameworks(frameworks: Sequence[str]) -> list[str]:
    """Those of ``frameworks`` that are retired (shown for comparison, labelled "retired")."""
    return [f for f in frameworks if is_retired(f)]


def candidate_threads(usable_cores: int, most: int | None = None) -> list[ThreadConfig]:
    """The thread settings candidates try: the machine's :func:`~dltune.config.thread_grid`
    (1, 2, 4, ... and every usable core), the counts a calibration measures; with ``most``, those
    up to it and ``most`` itself (pinned to that many cores): no count beyond what was measured
    (``PerformanceModel.threads_evidence``)."""
    if most is None or most >= usable_cores:
        return [_threads(n, usable_cores) for n in thread_grid(usable_cores)]
    return [_threads(n, usable_cores) for n in thread_grid(most)]


def measured_candidates(measured: list[dict[str, Any]], frameworks: list[str], usable_cores: int,
                        policy: RecommendPolicy = DEFAULT_POLICY,
                        most_threads: int | None = None) -> tuple[list[TrainConfig], list[int]]:
    """Configurations measured on the workload (``PerformanceModel.measured_runs``) as
    candidates: each of the requested frameworks' CPU ones once per thread setting (up to
    ``most_threads``: :func:`candidate_threads`); and which measured configuration each
    candidate is."""
    configs, which = [], []
    for i, m in enumerate(measured):
        config = dict(m["config"])
        if config.get("framework") not in frameworks or config.pop("device", "cpu") != "cpu":
            continue
        # Fields this TrainConfig knows (a record of another dltune version may hold others).
        base = TrainConfig.from_dict({k: v for k, v in config.items() if k in _FIELDS})
        for threads in candidate_threads(usable_cores, most_threads):
            configs.append(base.replace(threads=threads))
            which.append(i)
    return configs, which


def candidate_configs(
    frameworks: list[str],
    usable_cores: int,
    epochs_range: tuple[int, int],
    dataset_kind: str = "mnist",
    seed: int = 0,
    *,
    policy: RecommendPolicy = DEFAULT_POLICY,
    most_threads: int | None = None,
) -> list[TrainConfig]:
    """A grid over optimizer x batch size x epochs x threads, times a few learning rates, plus presets.

    The grid is deterministic so that repeated calls recommend the same thing; learning rates are
    spread over each optimizer's log range by a seeded low-discrepancy sequence. Its batch sizes,
    epoch counts, thread counts and size are ``policy``'s (:class:`RecommendPolicy`); its
    threads (and the presets') at most ``most_threads`` (:func:`candidate_threads`).
    """
    rng = np.random.default_rng(seed)
    low_e, high_e = epochs_range
    # Spaced by ratio, not difference: 1 to 2 epochs is as large a step in time as 15 to 30.
    epochs = sorted({low_e, high_e, *np.geomspace(low_e, high_e, policy.candidate_epochs).round().astype(int).tolist()})
    threads = candidate_threads(usable_cores, most_threads)
    batches = policy.candidate_batches
    per_cell = max(1, policy.grid_per_framework // (len(OPTIMIZERS) * len(batches) * len(epochs) * len(threads)))
    configs: list[TrainConfig] = []
    for framework in frameworks:
        for optimizer in OPTIMIZERS:
            lo, hi = LR_RANGES[optimizer]
            grid = (np.arange(3 * per_cell) + rng.random()) / (3 * per_cell)
            lrs = [round(math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))), 6) for u in grid]
            for batch in batches:
                for n_epochs in epochs:
                    for thread_config in threads:
                        for lr in lrs:
                            configs.append(TrainConfig(
                                framework=framework, optimizer=optimizer, learning_rate=lr,
                                momentum=0.9, batch_size=batch, epochs=int(n_epochs),
                                threads=thread_config,
                            ))
        configs.extend(_presets(framework, dataset_kind, high_e, threads[-1]))
    return configs


def _presets(framework: str, dataset_kind: str, max_epochs: int, threads: ThreadConfig) -> list[TrainConfig]:
    from dltune.config import available_presets

    out = []
    for name in available_presets(dataset_kind):
        config = TrainConfig.preset(name, dataset_kind, framework=framework)
        out.append(config.replace(epochs=min(config.epochs, max_epochs), early_stopping_patience=None,
                                  threads=threads))
    return out


def describe(config: TrainConfig) -> dict[str, Any]:
    """The few fields that tell configurations apart, for tables."""
    t = config.threads
    return {
        "framework": config.framework, "optimizer": config.optimizer, "lr": config.learning_rate,
        "batch": config.batch_size, "epochs": config.epochs,
        "threads": t.intra_op if t.intra_op is not None else "default",
        "preset": config.preset_name,
    }
