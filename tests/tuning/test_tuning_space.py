"""SearchSpace: defaults, fix / narrow / widen, files, validation, sampling into configurations."""

from __future__ import annotations

import json

import pytest

from dltune import ParameterError, SearchSpace, TrainConfig
from dltune.tuning import STARTUP_KNOBS


def test_defaults_cover_training_and_thread_settings():
    space = SearchSpace(cores=4)
    assert space["learning_rate"].log and space["learning_rate"].low == pytest.approx(1e-4)
    assert space["batch_size"].choices == (16, 32, 64, 128, 256)
    assert set(space["optimizer"].choices) == {"sgd", "momentum", "adam"}
    for name in ("intra_op_threads", "inter_op_threads", "blas_threads"):
        assert (space[name].low, space[name].high) == (1, 4)
    assert space["lr_schedule"].fixed and space["lr_schedule"].value == "constant"
    # a one-core target has nothing to search in the thread dimensions
    assert SearchSpace(cores=1)["intra_op_threads"].fixed


def test_fix_narrow_widen_return_new_spaces():
    space = SearchSpace(cores=2)
    fixed = space.fix(epochs=3, optimizer="adam")
    assert fixed["epochs"].value == 3 and fixed["optimizer"].value == "adam"
    assert not space["epochs"].fixed  # unchanged
    narrow = space.narrow(learning_rate=(1e-3, 1e-1), batch_size=[32, 64])
    assert narrow["batch_size"].choices == (32, 64)
    assert narrow["learning_rate"].low == pytest.approx(1e-3)
    wide = space.widen(learning_rate={"low": 1e-5, "high": 1.0, "log": True}, batch_size=[8, 16, 32, 64, 128, 256, 512])
    assert wide["learning_rate"].high == 1.0 and 512 in wide["batch_size"].choices


def test_narrow_and_widen_refuse_the_wrong_direction():
    space = SearchSpace(cores=2)
    with pytest.raises(ParameterError, match="Cannot narrow 'learning_rate'"):
        space.narrow(learning_rate={"low": 1e-6, "high": 1e-2, "log": True})
    with pytest.raises(ParameterError, match="Cannot widen 'batch_size'"):
        space.widen(batch_size=[32, 64])
    with pytest.raises(ParameterError, match="Cannot narrow 'batch_size'"):
        space.narrow(batch_size=[24])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nonsense": 3}, "Unknown search-space dimension 'nonsense'"),
        ({"learning_rate": {"low": 0.1, "high": 0.01}}, "must have low <= high"),
        ({"weight_decay": {"low": 0.0, "high": 0.1, "log": True}}, "log scale, so low must be > 0"),
        ({"batch_size": 0}, r"The 'batch_size' dimension must take int values in \[1, 65536\]. Got 0"),
        ({"intra_op_threads": {"low": 1, "high": 3}}, r"in \[1, 2\]. Got 3 instead"),
        ({"optimizer": ["sgd", "rmsprop"]}, "must take values in"),
        ({"batch_size": []}, "at least one choice"),
        ({"epochs": {"low": 1}}, "mapping with 'low' and 'high'"),
        ({"optimizer": {"low": 1, "high": 2}}, "takes choices, not a range"),
        ({"momentum": 1.0}, r"\[0.0, 1.0\)"),
    ],
)
def test_invalid_spaces_get_clear_errors(change, message):
    with pytest.raises(ParameterError, match=message):
        SearchSpace(change, cores=2)


def test_yaml_and_json_files(tmp_path):
    yaml_file = tmp_path / "space.yaml"
    yaml_file.write_text("learning_rate: {low: 0.001, high: 0.1, log: true}\nbatch_size: [32, 64]\nepochs: 4\n")
    space = SearchSpace.from_file(yaml_file, cores=2)
    assert space["epochs"].value == 4 and space["batch_size"].choices == (32, 64)
    assert "optimizer" in space  # the rest keep their defaults
    saved = space.save(tmp_path / "copy.json")
    assert SearchSpace.from_file(saved, cores=2) == space
    only = tmp_path / "only.json"
    only.write_text(json.dumps({"defaults": False, "epochs": 2}))
    assert list(SearchSpace.from_file(only, cores=2).dimensions) == ["epochs"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ParameterError, match="must hold a mapping"):
        SearchSpace.from_file(bad)
    with pytest.raises(ParameterError, match="does not exist"):
        SearchSpace.from_file(tmp_path / "missing.yaml")


def test_sampling_builds_config_threads_and_startup_environment():
    import optuna

    space = SearchSpace(cores=2).without_knobs("tensorflow")
    assert "tf_onednn_opts" in space and "omp_wait_policy" not in space
    assert STARTUP_KNOBS["omp_wait_policy"] == ("torch",)
    trial = optuna.trial.FixedTrial({
        "learning_rate": 0.02, "batch_size": 64, "epochs": 3, "optimizer": "adam",
        "weight_decay": 1e-4, "intra_op_threads": 2, "inter_op_threads": 1, "blas_threads": 1,
        "tf_onednn_opts": 0,
    })
    values = space.sample(trial)
    assert "momentum" not in values  # only sampled for the momentum optimizer
    config, env = space.to_config(values, TrainConfig(seed=7))
    assert config.optimizer == "adam" and config.batch_size == 64 and config.seed == 7
    assert (config.threads.intra_op, config.threads.inter_op, config.threads.blas) == (2, 1, 1)
    assert env == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    config.validate(max_cores=2)


def test_params_for_maps_a_config_back_into_the_space():
    space = SearchSpace(cores=2).fix(epochs=2)
    config = TrainConfig(optimizer="momentum", learning_rate=5.0, batch_size=48, momentum=0.9)
    params = space.params_for(config)
    assert params["learning_rate"] == pytest.approx(0.3)  # clipped into the range
    assert "batch_size" not in params  # not a choice: left to the sampler
    assert "epochs" not in params  # fixed dimensions are not parameters
    assert params["momentum"] == pytest.approx(0.9)
