"""Modalities: which readings an array allows, the canonical layout of each, and a workload's
refusal of data its model does not take, in one line naming both."""

from __future__ import annotations

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune._workload import Workload, as_workload, default_model
from dltune.cli import main
from dltune.data import array_modalities, dataset_kind, from_arrays, load_dataset
from dltune.models import Conv1D, Dense, Flatten, ModelSpec

_Y = np.arange(40) % 2


@pytest.mark.parametrize(("shape", "dtype", "readings"), [
    ((3, 8, 8), float, ("image",)),
    ((8, 8), float, ("image", "sequence")),   # a square grey image, or a sequence for a sequence model
    ((20, 16), float, ("sequence",)),         # never silently a 20x16 image
    ((30,), float, ("tabular",)),
    ((64,), float, ("tabular", "image")),     # also flat 8x8 images
    ((16,), float, ("tabular",)),             # 4x4 is too small to be an image
    ((30,), np.int64, ("tokens", "tabular")),
])
def test_an_arrays_readings_follow_its_shape_and_dtype(shape, dtype, readings):
    assert array_modalities(np.zeros((5, *shape), dtype=dtype)) == readings


def test_each_modality_gets_its_canonical_layout_and_normalisation():
    rng = np.random.default_rng(0)
    rows = rng.normal(5.0, [1.0, 10.0, 100.0], size=(40, 3))
    tabular = from_arrays(rows[:30], _Y[:30], rows[30:], _Y[30:])
    assert (tabular.modality, tabular.input_shape, tabular.features) == ("tabular", (3,), 3)
    np.testing.assert_allclose(tabular.x_train.mean(axis=0), 0, atol=1e-5)  # per feature
    np.testing.assert_allclose(tabular.x_train.std(axis=0), 1, atol=1e-4)

    ids = rng.integers(0, 50, size=(40, 12))
    tokens = from_arrays(ids[:30], _Y[:30], ids[30:], _Y[30:])
    assert (tokens.modality, tokens.input_shape, tokens.sequence_length) == ("tokens", (12,), 12)
    assert tokens.vocab_size == int(ids.max()) + 1
    assert np.array_equal(tokens.x_test, ids[30:].astype(np.float32))  # ids are not normalised

    steps = rng.normal(size=(40, 20, 3)) * [1.0, 5.0, 50.0]
    seq = from_arrays(steps[:30], _Y[:30], steps[30:], _Y[30:])
    assert (seq.modality, seq.input_shape, seq.features, seq.sequence_length) == ("sequence", (3, 20), 3, 20)
    # (N, T, F) becomes channels-first (N, F, T), each feature standardised over samples and steps.
    expected = (steps[:30] - steps[:30].mean(axis=(0, 1))) / steps[:30].std(axis=(0, 1))
    np.testing.assert_allclose(seq.x_train, expected.transpose(0, 2, 1), atol=1e-4)
    assert "sequences (T, F) of shape (20, 3)" in seq.summary()


def test_arrays_that_cannot_be_read_as_asked_are_refused():
    with pytest.raises(ParameterError, match=r"The 'x_train' parameter must be image samples, images "
                                             r"\(C, H, W\)\. Got shape \(40, 20, 16\), which reads as sequences"):
        from_arrays(np.zeros((40, 20, 16)), _Y, np.zeros((40, 20, 16)), _Y, modality="image")
    with pytest.raises(ParameterError, match=r"token ids in \[0, 16777215\]\. Got -1 instead"):
        from_arrays(np.full((40, 5), -1), _Y, np.zeros((40, 5), dtype=int), _Y)
    with pytest.raises(ParameterError, match=r"must be images .* Got shape \(40,\) instead"):
        from_arrays(np.zeros(40), _Y, np.zeros(40), _Y)


def test_a_model_that_does_not_take_the_data_is_refused_in_one_line_naming_both(monkeypatch):
    from dltune import _workload

    x = np.random.default_rng(0).random((200, 20, 16))
    with pytest.raises(ParameterError) as info:
        as_workload((x, np.arange(200) % 2), model="lenet")
    assert str(info.value).startswith("The model 'lenet' takes images (C, H, W); the data are sequences "
                                      "(T, F) of shape (20, 16)")
    assert "\n" not in str(info.value)
    with pytest.raises(ParameterError, match=r"^The model 'lenet' takes images \(C, H, W\); the data are "
                                             r"tabular rows \(F,\) of shape \(30,\) \(models that take them: "
                                             r"mlp, tabular_mlp\)\.$"):
        Workload.from_name("breast_cancer", "lenet")
    images_only = {n: p for n, p in _workload.MODEL_PRESETS.items() if "sequence" not in p.modalities}
    monkeypatch.setattr(_workload, "MODEL_PRESETS", images_only)
    with pytest.raises(ParameterError, match="which no model preset takes: pass your own model"):
        as_workload((x, np.arange(200) % 2))


def test_the_model_chooses_among_an_arrays_readings():
    x = np.random.default_rng(0).random((50, 64))
    y = np.arange(50) % 2
    assert as_workload((x, y), model="lenet").dataset.input_shape == (1, 8, 8)  # flat images
    assert as_workload((x, y)).model.name == default_model("tabular") == "tabular_mlp"
    assert as_workload((x, y)).dataset.input_shape == (64,)
    tokens = as_workload((np.random.default_rng(1).integers(0, 30, size=(50, 10)), y))
    assert (tokens.model.name, tokens.model.input_shape) == (default_model("tokens"), (10,))
    # A spec of the user's takes what its input's rank says: a sequence's canonical (F, T) shape,
    # or flat images for a (C, H, W) input.
    spec = ModelSpec("seq", (16, 20), 2, (Conv1D(4, 3), Flatten(), Dense(2)))
    seq = as_workload((np.zeros((50, 20, 16)), y), model=spec)
    assert seq.model is spec and seq.dataset.modality == "sequence"
    image_spec = ModelSpec("img", (1, 8, 8), 2, (Flatten(), Dense(2)))
    assert as_workload((x, y), model=image_spec).dataset.input_shape == (1, 8, 8)
    with pytest.raises(ParameterError, match=r"^The model 'img' takes images \(C, H, W\); the data are "
                                             r"sequences \(T, F\) of shape \(20, 16\)"):
        as_workload((np.zeros((50, 20, 16)), y), model=image_spec)


def test_the_data_kind_comes_from_the_whole_shape():
    assert dataset_kind((3, 32, 32)) == "cifar10"
    assert [dataset_kind(s) for s in ((3,), (3, 50), (1, 8, 8))] == ["mnist"] * 3  # 3 features is not colour
    assert dataset_kind(3) == "cifar10"  # an image's channels, as before


def test_the_cli_refuses_a_model_that_does_not_take_the_data_in_one_line(capsys):
    assert main(["bench", "--workload", "synthetic_sequence", "--data", "n_train=20", "--data", "n_test=10",
                 "--model", "lenet", "--frameworks", "numpy", "--storage", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dltune bench: error: The model 'lenet' takes images (C, H, W); the data are "
                          "sequences (T, F) of shape (32, 4)") and err.count("\n") == 1


@pytest.mark.parametrize(("name", "params", "shape"), [
    ("synthetic_tabular", {"features": 12}, (12,)),
    ("synthetic_sequence", {"length": 16, "features": 3}, (3, 16)),
    ("synthetic_tokens", {"length": 24, "vocab_size": 300}, (24,)),
])
def test_generated_data_of_each_modality_gets_harder_with_difficulty(name, params, shape):
    def landmark(difficulty: float) -> float:
        data = load_dataset(name, n_train=300, n_test=150, difficulty=difficulty, seed=3, **params)
        assert data.input_shape == shape and data.num_classes == 2 + 2 * (name == "synthetic_sequence")
        features = data.meta_features()
        # Image-named meta-features too: a sequence is F channels of 1 x T, the rest 1 x length.
        assert (features["modality"], features["channels"] * features["height"] * features["width"],
                features["input_size"]) == (data.modality, int(np.prod(shape)), int(np.prod(shape)))
        return features["landmark_logreg"]

    assert landmark(0.0) > landmark(1.0) + 0.1
