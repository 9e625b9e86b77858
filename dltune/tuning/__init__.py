"""Tuning with Optuna: search spaces, ``tune``, workers sharing a study, the dashboard.

Importing this package imports neither Optuna nor any framework; they load when used.
"""

from __future__ import annotations

from dltune.tuning._objective import TUNE_CONSTRAINTS, TUNE_OBJECTIVES, record_from_trial
from dltune.tuning._result import StudyResult, TrialSummary, TuneResult
from dltune.tuning._space import STARTUP_KNOBS, Dimension, SearchSpace
from dltune.tuning._storage import DEFAULT_STORAGE, StorageError, mask_url, open_storage
from dltune.tuning._study_measurements import preset_for
from dltune.tuning._tune import tune
from dltune.tuning._worker import run_worker

__all__ = [
    "DEFAULT_STORAGE",
    "STARTUP_KNOBS",
    "TUNE_CONSTRAINTS",
    "TUNE_OBJECTIVES",
    "Dimension",
    "SearchSpace",
    "StorageError",
    "StudyResult",
    "TrialSummary",
    "TuneResult",
    "mask_url",
    "open_storage",
    "preset_for",
    "record_from_trial",
    "run_worker",
    "tune",
]
