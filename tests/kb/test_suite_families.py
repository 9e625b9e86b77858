from __future__ import annotations

import json

import numpy as np

from dltune._workload import Workload, model_takes
from dltune.backends._numpy import forward
from dltune.backends._registry import BACKENDS
from dltune.config import TrainConfig, default_preset
from dltune.data import DATASETS, dataset_kind
from dltune.kb import SUITES, plan_suite
from dltune.kb._suite import SuiteWorkload, _cost, input_shape
from dltune.models import MODEL_PRESETS

FAMILIES = SUITES["families"]


def test_families_suite_covers_what_the_reference_suite_lacks():
    assert {MODEL_PRESETS[w.model].family for w in FAMILIES} == {"mlp", "cnn", "resnet", "conv1d", "rnn"}
    assert {DATASETS[w.dataset].modality for w in FAMILIES} == {"image", "tabular", "tokens", "sequence"}
    assert {"breast_cancer", "wine", "synthetic_tabular"} <= {w.dataset for w in FAMILIES}
    assert {w.model for w in FAMILIES if w.dataset == "synthetic_tokens"} == {"text_conv", "text_lstm"}
    assert "text_lstm" in {w.model for w in FAMILIES if w.dataset == "synthetic_sequence"}
    assert {"tabular_mlp", "mlp"} <= {w.model for w in FAMILIES if DATASETS[w.dataset].modality == "tabular"}
    assert any(w.model == "resnet8" and input_shape(w) == (3, 32, 32) for w in FAMILIES)
    assert {20, 50} <= {w.params.get("classes") for w in FAMILIES}
    assert max(max(input_shape(w)[1:]) for w in FAMILIES if DATASETS[w.dataset].modality == "image") == 48
    assert max(w.max_epochs for w in FAMILIES) == 30
    # Other workloads than the reference suite's: a new knowledge base, not a re-measurement.
    assert len({w.name for w in FAMILIES}) == len(FAMILIES)
    assert not {w.name for w in FAMILIES} & {w.name for w in SUITES["reference"]}


def test_every_workload_loads_and_its_model_takes_its_data():
    for w in FAMILIES:
        classes = int(w.params.get("classes", 3))
        small = dict(w.params, n_train=max(40, 2 * classes), n_test=max(20, classes))
        workload = Workload.from_name(w.dataset, w.model, **small)
        data = workload.dataset
        assert data.input_shape == input_shape(w), w.name  # what the plan orders and presets by
        assert data.modality in model_takes(w.model)
        assert workload.model.num_classes == data.num_classes
        logits, _ = forward(workload.model, workload.model.init_params(0), data.x_train[:2])
        assert logits.shape == (2, data.num_classes) and np.isfinite(logits).all(), w.name


def test_plan_covers_every_framework_with_its_presets_and_long_training():
    frameworks = list(BACKENDS)
    plan = plan_suite("families", frameworks, configs_per_pair=2, repeats=0, fresh=0)
    assert {(p.workload.name, p.config.framework) for p in plan} == {
        (w.name, f) for w in FAMILIES for f in frameworks}
    assert len({p.key for p in plan}) == len(plan)
    presets = [p for p in plan if p.kind == "preset"]
    assert len(presets) == len(FAMILIES) * len(frameworks)
    for p in presets:
        # Colour images get CIFAR-10's presets, every other input MNIST's.
        assert p.config.preset_name == default_preset(p.config.framework, dataset_kind(input_shape(p.workload)))
        assert p.config.epochs <= p.workload.max_epochs
    assert {dataset_kind(input_shape(p.workload)) for p in presets} == {"mnist", "cifar10"}
    longest = plan_suite("families", ["torch"], configs_per_pair=24, repeats=0, fresh=0)
    assert max(p.config.epochs for p in longest) > 25  # per-epoch curves past the reference's 6


def test_cost_grows_with_what_each_model_reads():
    config = TrainConfig(framework="torch", batch_size=64, epochs=1)

    def cost(w: SuiteWorkload) -> float:
        return _cost(w, config, input_shape(w))

    short, long = (SuiteWorkload("synthetic_tokens", "text_lstm", {"n_train": 1000, "length": n}) for n in (32, 128))
    rows = SuiteWorkload("synthetic_tabular", "tabular_mlp", {"n_train": 1000, "features": 32})
    assert cost(rows) < cost(short) < cost(long)  # a recurrent step costs more than a row's dense layers


def test_cli_build_plan_lists_the_families_suite(cli):
    done = cli("kb", "build", "--suite", "families", "--frameworks", "numpy", "--configs-per-pair", "1",
               "--repeats", "0", "--fresh", "0", "--plan", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {r["workload"] for r in rows} == {w.name for w in FAMILIES}
