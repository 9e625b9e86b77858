"""The summary ``dltune study`` prints at its end states what ran, never a ranking: ranking
frameworks, and calling two of them tied, is the report's job (dltune/report/_headline.py)."""

from __future__ import annotations

import re

from dltune.config import default_preset
from dltune.measure import Measurement
from dltune.study import ComparativeStudyResult, StudyRecord, preset_config
from dltune.study._plan import StudyPlan

DIGITS = {"name": "digits-lenet", "dataset": "digits", "model": "lenet",
          "meta": {"n_train": 300, "n_test": 360, "param_count": 131080},
          "model_spec": {"input_shape": [1, 8, 8], "num_classes": 10}}


def _defaults_run(fw: str, time_s: float, accuracy: float) -> StudyRecord:
    config = preset_config(default_preset(fw), fw).replace(epochs=1)
    metrics = {"train_time_s": time_s, "test_time_s": 0.01, "test_accuracy": accuracy,
               "epochs_run": 1}
    m = Measurement(status="ok", workload=DIGITS, config=config.to_dict(),
                    hardware={"cpu_model": "Test CPU", "logical_cores": 2, "usable_cores": 2},
                    versions={fw: "1.0"}, metrics=metrics)
    return StudyRecord(m, ["defaults"], key=f"{fw}-defaults", label=f"{fw} with its defaults",
                       source="test")


def test_two_frameworks_with_equal_times_are_neither_ranked_nor_compared_by_a_ratio():
    plan = StudyPlan(frameworks=["torch", "tensorflow"], dataset_kind="mnist", epoch_cap=1)
    records = [_defaults_run("torch", 0.75, 0.975), _defaults_run("tensorflow", 0.75, 0.975)]
    result = ComparativeStudyResult("digits-lenet", "sqlite:///study.db", plan, records, ran=2,
                                    elapsed_s=3.0)
    text = result.summary_text()
    assert text.splitlines()[0] == ("study digits-lenet: 2 runs measured, 0 already stored, "
                                    "0 failed, 0 skipped for the budget (3 s); 2 records"), text
    assert "frameworks: torch, tensorflow; epochs capped at 1" in text, text
    assert not re.search(r"fastest|slowest|most accurate|faster|longer|\d\.\dx\b", text), text
    assert "dltune report --storage sqlite:///study.db" in text, text
    assert set(result.summary()) >= {"frameworks", "records", "ran"}
    assert not any(re.search(r"fast|slow|best|rank", key) for key in result.summary()), result.summary()
