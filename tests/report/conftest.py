"""Study records built in the test: four frameworks, every phase, known numbers."""

from __future__ import annotations

import pytest

from dltune.config import ThreadConfig, default_preset
from dltune.measure import Measurement
from dltune.study import StudyRecord, preset_config, study_presets
from dltune.study._plan import thread_variants

FRAMEWORKS = ("torch", "tensorflow", "mxnet", "theano")
_SPEED = {"torch": 4.0, "tensorflow": 1.5, "mxnet": 2.0, "theano": 3.0}
_MEM = {"torch": 380.0, "tensorflow": 1030.0, "mxnet": 450.0, "theano": 300.0}


def _record(config, phases, label, *, accuracy=None, hw_cores=2, failed=False) -> StudyRecord:
    fw = config.framework
    train = _SPEED[fw] * config.epochs * 64 / config.batch_size ** 0.5 / 8
    if accuracy is None:
        accuracy = min(0.99, 0.55 + 0.08 * config.epochs - 0.02 * abs(config.learning_rate - 0.05) * 10)
    metrics = {
        "train_time_s": train,
        "test_time_s": 0.02 * _SPEED[fw],
        "test_accuracy": accuracy,
        "cpu_percent_mean": 100.0 + config.batch_size / 10 + (config.threads.intra_op or 2) * 20,
        "peak_rss_mb": _MEM[fw] + config.batch_size * 0.5,
        "epochs_run": config.epochs,
    }
    m = Measurement(
        status="failed" if failed else "ok",
        workload={"name": "digits-lenet", "dataset": "digits", "model": "lenet",
                  "meta": {"n_train": 1437, "n_test": 360, "param_count": 131080},
                  "model_spec": {"input_shape": [1, 8, 8], "num_classes": 10}},
        config=config.to_dict(),
        hardware={"cpu_model": "Test CPU", "logical_cores": 2, "usable_cores": hw_cores,
                  "target": "test-2c"},
        versions={fw: "1.0"},
        metrics={} if failed else metrics,
        error={"kind": "crash", "message": "worker died"} if failed else None,
    )
    return StudyRecord(m, list(phases), key=label, label=label, source="test")


def make_records() -> list[StudyRecord]:
    recs: list[StudyRecord] = []
    for i, fw in enumerate(FRAMEWORKS):
        for preset in study_presets():
            config = preset_config(preset, fw).replace(epochs=min(preset_config(preset, fw).epochs, 5))
            own = preset == default_preset(fw)
            acc = 0.90 + 0.02 * i if own else 0.40 + 0.1 * study_presets().index(preset) + 0.01 * i
            phases = ["defaults", "cross_defaults", "sweep:batch_size", "sweep:learning_rate",
                      "sweep:epochs", "threads"] if own else ["cross_defaults"]
            recs.append(_record(config, phases, f"{fw} with {preset} defaults", accuracy=acc))
        base = preset_config(default_preset(fw), fw).replace(epochs=5)
        for b in (16, 64, 256):
            recs.append(_record(base.replace(batch_size=b), ["sweep:batch_size"], f"{fw} batch {b}"))
        for lr in (0.005, 0.5):
            recs.append(_record(base.replace(learning_rate=lr), ["sweep:learning_rate"], f"{fw} lr {lr}",
                                accuracy=0.3 + 0.05 * i if lr == 0.5 else None))
        for e in (1, 2):
            recs.append(_record(base.replace(epochs=e), ["sweep:epochs"], f"{fw} epochs {e}"))
        for name, threads in thread_variants(2)[1:]:
            recs.append(_record(base.replace(threads=threads), ["threads"], f"{fw} {name}"))
        for t in range(3):
            recs.append(_record(base.replace(learning_rate=0.02 * (t + 1), batch_size=32 * (t + 1)),
                                ["tune"], None, accuracy=0.93 + 0.01 * t + 0.005 * i))
    recs.append(_record(preset_config("torch", "theano").replace(threads=ThreadConfig(intra_op=1)),
                        ["threads"], "theano failing", failed=True))
    return recs


@pytest.fixture(scope="session")
def records() -> list[StudyRecord]:
    return make_records()


@pytest.fixture(scope="session")
def report(records):
    """The report of ``records``, built once (drawing the figures takes seconds)."""
    from dltune.report import build_report

    return build_report(records)
