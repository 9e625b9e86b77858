"""The comparative framework study: defaults, cross-defaults, sweeps, threads and tuning."""

from __future__ import annotations

from dltune.measure._store import (
    STUDY_PREFIX,
    StudyRecord,
    StudyStore,
    load_storage_records,
)
from dltune.study._cost import CostModel
from dltune.study._defaults import (
    MXNET_GLUON_DEFAULTS,
    STUDY_FRAMEWORKS,
    preset_config,
    study_presets,
)
from dltune.study._plan import PHASE_SHARES, PHASES, StudyPlan, StudyRun, config_key, plan_study
from dltune.study._run import ComparativeStudyResult, run_study

__all__ = [
    "MXNET_GLUON_DEFAULTS",
    "PHASES",
    "PHASE_SHARES",
    "STUDY_FRAMEWORKS",
    "STUDY_PREFIX",
    "ComparativeStudyResult",
    "CostModel",
    "StudyPlan",
    "StudyRecord",
    "StudyRun",
    "StudyStore",
    "config_key",
    "load_storage_records",
    "plan_study",
    "preset_config",
    "run_study",
    "study_presets",
]
