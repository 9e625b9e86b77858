"""Tuning with Optuna: search spaces, ``tune``, workers sharing a study, the dashboard.

Importing this package imports neither Optuna nor any framework; they load when used.
"""

from __future__ import annotations

from dltune.tuning._objective import OBJECTIVES, record_from_trial
from dltune.tuning._result import StudyResult, TrialSummary, TuneResult
from dltune.tuning._space import STARTUP_KNOBS, Dimension, SearchSpace
from dltune.tuning._storage import DEFAULT_STORAGE, StorageError, mask_url, open_storage
from dltune.tuning._tune import preset_for, run_worker, tune

__all__ = [
    "DEFAULT_STORAGE",
    "OBJECTIVES",
    "STARTUP_KNOBS",
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
