"""The comparative framework study: defaults, cross-defaults, sweeps, threads and tuning."""

from __future__ import annotations

from dltune.study._cost import CostModel
from dltune.study._defaults import (
    MXNET_GLUON_DEFAULTS,
    STUDY_FRAMEWORKS,
    own_preset,
    preset_config,
    study_presets,
)
from dltune.study._plan import PHASE_SHARES, PHASES, PlannedRun, StudyPlan, config_key, plan_study
from dltune.study._run import StudyResult, run_study
from dltune.study._store import (
    STUDY_PREFIX,
    StudyRecord,
    StudyStore,
    load_storage_records,
    record_from_attrs,
)

__all__ = [
    "MXNET_GLUON_DEFAULTS",
    "PHASES",
    "PHASE_SHARES",
    "STUDY_FRAMEWORKS",
    "STUDY_PREFIX",
    "CostModel",
    "PlannedRun",
    "StudyPlan",
    "StudyRecord",
    "StudyResult",
    "StudyStore",
    "config_key",
    "load_storage_records",
    "own_preset",
    "plan_study",
    "preset_config",
    "record_from_attrs",
    "run_study",
    "study_presets",
]
