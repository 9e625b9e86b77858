"""tune's comparison preset: each framework's own (config.default_preset), resolved before the search."""

from __future__ import annotations

import pytest

from dltune import ParameterError, Workload, tune
from dltune.backends import BACKENDS
from dltune.config import default_preset
from dltune.tuning import _tune
from dltune.tuning._study_measurements import preset_for

_COLOUR = {"n_train": 100, "n_test": 40, "height": 8, "width": 8, "channels": 3, "classes": 3}


@pytest.fixture(scope="module")
def colour_workload():
    """A tiny 3-channel synthetic workload: CIFAR-10's presets fit it, and Theano has none there."""
    return Workload.from_name("synthetic", "mlp", **_COLOUR)


def test_theano_on_colour_data_runs_caffes_cifar10_preset(colour_workload):
    config, label = preset_for("theano", colour_workload, max_epochs=2)
    assert (config.framework, config.preset_name, config.batch_size) == ("theano", "caffe", 100)
    assert label == "caffe/cifar10 (no theano preset), epochs capped 10->2"


def test_every_backend_compares_with_its_own_default_preset(colour_workload, tiny_workload):
    for workload, kind in ((tiny_workload, "mnist"), (colour_workload, "cifar10")):
        for framework in BACKENDS:
            config, label = preset_for(framework, workload)
            assert config.framework == framework
            assert config.preset_name == default_preset(framework, kind)
            assert label.startswith(f"{config.preset_name}/{kind}")


def test_a_preset_that_cannot_be_resolved_refuses_the_call_before_any_trial(
    colour_workload, tmp_path, monkeypatch
):
    def no_preset(framework, workload, max_epochs=None):
        raise ParameterError(f"The 'frameworks' parameter names {framework!r}, which has no default "
                             "preset on this workload.")

    monkeypatch.setattr(_tune, "preset_for", no_preset)
    db = tmp_path / "t.db"
    with pytest.raises(ParameterError, match="'frameworks' parameter names 'numpy'"):
        tune(colour_workload, frameworks="numpy", trials=1, storage=f"sqlite:///{db}", seed=0)
    assert not db.exists()  # no study made, no trial run
    # Without the comparison no preset is needed.
    monkeypatch.setattr(_tune, "_run_here", lambda *args: 0)
    result = tune(colour_workload, frameworks="numpy", trials=1, storage=f"sqlite:///{db}",
                  seed=0, compare_preset=False)
    assert result["numpy"].preset is None and result["numpy"].comparison is None
