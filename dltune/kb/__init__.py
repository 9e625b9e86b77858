"""The knowledge base: designed measurement suites, their records and provenance, validation.

``build_kb`` measures a suite into a resumable folder; ``export_kb`` compresses a folder into the
package as ``<suite>.jsonl.gz`` (the shipped knowledge base, every shipped suite's records:
``load_shipped_records``); ``calibrate_machine`` measures
how fast this machine runs a few of its workloads; ``validate_kb`` scores the
surrogates and the recommendation leave-one-workload-out.
"""

from __future__ import annotations

from dltune.kb._build import BuildResult, build_kb, default_build_dir, load_warning
from dltune.kb._calibrate import calibrate_machine, calibration_dir, calibration_records
from dltune.kb._store import (
    RecordStore,
    export_calibration,
    export_kb,
    load_shipped_records,
    read_jsonl,
    shipped_calibration_paths,
    shipped_kb_path,
    shipped_kb_paths,
    shipped_provenance_path,
)
from dltune.kb._suite import SUITES, PlannedRun, SuiteWorkload, plan_suite, run_key
from dltune.kb._validate import ValidationReport, validate_calibrations, validate_kb

__all__ = [
    "SUITES",
    "BuildResult",
    "PlannedRun",
    "RecordStore",
    "SuiteWorkload",
    "ValidationReport",
    "build_kb",
    "calibrate_machine",
    "calibration_dir",
    "calibration_records",
    "default_build_dir",
    "export_calibration",
    "export_kb",
    "load_shipped_records",
    "load_warning",
    "plan_suite",
    "read_jsonl",
    "run_key",
    "shipped_calibration_paths",
    "shipped_kb_path",
    "shipped_kb_paths",
    "shipped_provenance_path",
    "validate_calibrations",
    "validate_kb",
]
