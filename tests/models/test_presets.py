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


def test_every_preset_declares_modalities_of_dltune_data_and_its_family_by_its_layers():
    from dltune.data import MODALITIES
    from dltune.models import MODEL_PRESETS, model_family

    shapes = {"image": (3, 16, 16), "tabular": (30,), "tokens": (40,), "sequence": (4, 40)}
    for name, preset in MODEL_PRESETS.items():
        assert preset.modalities and set(preset.modalities) <= set(MODALITIES), name
        for modality in preset.modalities:
            spec = build_model(name, shapes[modality], 5, vocab_size=100 if modality == "tokens" else None)
            assert spec.shapes()[-1] == (5,) and model_family(spec) == preset.family, (name, modality)
    assert {p.family for p in MODEL_PRESETS.values()} == {"mlp", "cnn", "resnet", "conv1d", "rnn"}


def test_resnet8_is_a_cifar_style_resnet_with_batch_norm_and_global_pooling():
    from dltune.models import BatchNorm, GlobalAvgPool2D, Residual

    spec = build_model("resnet8", (3, 32, 32), 10)
    blocks = [layer for layer in spec.layers if isinstance(layer, Residual)]
    assert [b.body[0].filters for b in blocks] == [16, 32, 64]
    assert [len(b.shortcut) for b in blocks] == [0, 1, 1]  # a 1x1 projection where channels change
    assert isinstance(spec.layers[1], BatchNorm) and isinstance(spec.layers[-2], GlobalAvgPool2D)
    # Weighted layers: the stem, two convolutions per block and the dense layer.
    convs = 1 + sum(sum(isinstance(x, Conv2D) for x in b.body) for b in blocks)
    assert convs + 1 == 8 and spec.param_count == 78186
    assert build_model("resnet8", (1, 8, 8), 10).shapes()[-1] == (10,)


def test_text_presets_embed_token_ids_and_take_sequences_as_they_are():
    from dltune.models import LSTM, Conv1D, Embedding

    tokens = build_model("text_conv", (40,), 3, vocab_size=500)
    assert tokens.layers[0] == Embedding(500, 32) and isinstance(tokens.layers[1], Conv1D)
    assert tokens.shapes()[4] == (64, 1)  # max pooling over every position
    sequence = build_model("text_lstm", (4, 40), 3)
    assert sequence.layers[0] == LSTM(64) and sequence.shapes() == [(4, 40), (64,), (3,)]
    with pytest.raises(ParameterError, match=r"^The model 'text_lstm' takes token ids: its 'vocab_size' parameter"):
        build_model("text_lstm", (40,), 3)


def test_a_spec_is_taken_where_it_fits_the_data_and_refused_in_one_line_otherwise():
    spec = build_model("mlp", (1, 8, 8), 10)
    assert build_model(spec, (1, 8, 8), 10) is spec
    with pytest.raises(ParameterError) as err:
        build_model(spec, (1, 12, 40), 20)
    assert str(err.value) == ("The model 'mlp' takes input (1, 8, 8) with 10 classes; the data are (1, 12, 40) "
                              "with 20 classes.")
