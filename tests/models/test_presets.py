"""Model presets: the study's networks, adapted to any input of at least 8x8."""

from __future__ import annotations

import pytest

from dltune._errors import ParameterError
from dltune.models import build_model
from dltune.models._presets import available_models
from dltune.models._spec import Conv2D, MaxPool2D


@pytest.mark.parametrize("name", ["mlp", "lenet", "tf_mnist", "cifar_quick"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32), (3, 9, 13)])
def test_every_preset_fits_every_input(name, shape):
    spec = build_model(name, shape, 10)
    assert spec.shapes()[-1] == (10,)
    assert spec.param_count > 0 and spec.flops_per_sample > 0


def test_lenet_is_caffes_network_on_mnist():
    spec = build_model("lenet", (1, 28, 28), 10)
    convs = [layer for layer in spec.layers if isinstance(layer, Conv2D)]
    assert [(c.filters, c.kernel, c.padding) for c in convs] == [(20, 5, "valid"), (50, 5, "valid")]
    assert spec.param_count == 431080


def test_lenet_switches_to_same_padding_on_small_inputs():
    spec = build_model("lenet", (1, 8, 8), 10)
    assert all(layer.padding == "same" for layer in spec.layers if isinstance(layer, Conv2D))
    assert spec.flatten_input_shape() == (50, 2, 2)


def test_cifar_quick_shrinks_pools_that_do_not_fit():
    spec = build_model("cifar_quick", (3, 8, 8), 10)
    assert spec.shapes()[-1] == (10,)
    big = build_model("cifar_quick", (3, 32, 32), 10)
    assert isinstance(big.layers[1], MaxPool2D) and big.layers[1].size == 3
    # Pools round down in every backend (Caffe rounds up: 4x4 maps, 145,578 parameters).
    assert big.flatten_input_shape() == (64, 3, 3)
    assert big.param_count == 2432 + 25632 + 51264 + (576 * 64 + 64) + 650


def test_unknown_preset_is_a_parameter_error():
    with pytest.raises(ParameterError, match=r"The 'model' parameter must be one of .*Got 'vgg' instead."):
        build_model("vgg", (1, 8, 8), 10)
    assert available_models() == sorted(available_models())
