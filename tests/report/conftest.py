"""Study records built in the test (four frameworks, every phase, known numbers), and a small
storage measured for real as ``make demo`` leaves one."""

from __future__ import annotations

import pytest

from dltune.config import ThreadConfig, default_preset
from dltune.measure import Measurement
from dltune.study import StudyRecord, preset_config, study_presets
from dltune.study._plan import thread_variants

FRAMEWORKS = ("torch", "tensorflow", "mxnet", "theano")
_SPEED = {"torch": 4.0, "tensorflow": 1.5, "mxnet": 2.0, "theano": 3.0}
_MEM = {"torch": 380.0, "tensorflow": 1030.0, "mxnet": 450.0, "theano": 300.0}


# MNIST: the data set the original study published figures for (shown beside it, and only it).
WORKLOAD = {"name": "mnist-lenet", "dataset": "mnist", "model": "lenet",
            "meta": {"n_train": 60000, "n_test": 10000, "param_count": 431080},
            "model_spec": {"input_shape": [1, 28, 28], "num_classes": 10}}


def _record(config, phases, label, *, accuracy=None, hw_cores=2, failed=False, workload=None,
            extra_metrics=None) -> StudyRecord:
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
        **(extra_metrics or {}),
    }
    m = Measurement(
        status="failed" if failed else "ok",
        workload=workload or WORKLOAD,
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


@pytest.fixture(scope="session")
def demo_storage(tmp_path_factory) -> str:
    """A storage as ``make demo`` leaves one, in small (numpy, 1 epoch, a few hundred digits):
    bench runs of digits-lenet, and a tune of digits-mlp with its preset and best trials measured
    again."""
    from dltune import Workload, benchmark
    from dltune.config import TrainConfig
    from dltune.tuning import SearchSpace, tune

    url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'dltune.db'}"
    lenet = Workload.from_name("digits", "lenet", n_train=120, n_test=60)
    benchmark(lenet, TrainConfig(framework="numpy", epochs=1), repeats=2, storage=url)
    space = SearchSpace(cores=1).update(learning_rate={"low": 0.01, "high": 0.3, "log": True},
                                        batch_size=[16, 32, 64], epochs={"low": 1, "high": 1})
    mlp = Workload.from_name("digits", "mlp", n_train=300, n_test=150)
    tune(mlp, frameworks=["numpy"], space=space, trials=3, storage=url, seed=0, preset_epochs=1,
         repeat_best=2)
    return url


@pytest.fixture(scope="session")
def demo_report(demo_storage):
    from dltune.report import build_report, load_study_records

    return build_report(load_study_records(storage=demo_storage))
