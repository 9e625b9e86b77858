"""Run configurations: training settings, thread settings, framework default presets."""

from __future__ import annotations

from dltune.config._goals import (
    CONSTRAINTS,
    OBJECTIVES,
    check_constraints,
    check_objective,
    constraint_flag,
)
from dltune.config._threads import ThreadConfig, thread_grid, usable_cores
from dltune.config._train_config import (
    LR_RANGES,
    LR_SCHEDULES,
    OPTIMIZERS,
    PRESETS,
    TrainConfig,
    available_presets,
    default_preset,
)

__all__ = [
    "CONSTRAINTS",
    "OBJECTIVES",
    "LR_RANGES",
    "LR_SCHEDULES",
    "OPTIMIZERS",
    "PRESETS",
    "ThreadConfig",
    "TrainConfig",
    "available_presets",
    "check_constraints",
    "check_objective",
    "constraint_flag",
    "default_preset",
    "thread_grid",
    "usable_cores",
]
