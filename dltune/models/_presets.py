"""Named model presets: the study's networks (any image of at least 8x8), a CIFAR-style
ResNet, a tabular MLP and text classifiers, each with the data modality it takes and its family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_int
from dltune.models._spec import (
    LSTM,
    Activation,
    AvgPool2D,
    BatchNorm,
    Conv1D,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool2D,
    Layer,
    MaxPool1D,
    MaxPool2D,
    ModelSpec,
    Residual,
    SpecError,
)

__all__ = ["MODEL_PRESETS", "ModelPreset", "available_models", "build_model", "model_family", "model_features"]


def _fit_pools(layers: list[Layer], input_shape: tuple[int, int, int]) -> list[Layer]:
    """Shrink a pool whose window is larger than what reaches it, so small inputs still fit."""
    shape: tuple[int, ...] = input_shape
    fitted: list[Layer] = []
    for layer in layers:
        if isinstance(layer, (MaxPool2D, AvgPool2D)):
            n = min(shape[1], shape[2])
            if layer.size > n:
                layer = type(layer)(size=n, stride=min(layer.stride, n))
        fitted.append(layer)
        shape = layer.output_shape(shape)
    return fitted


def _with_padding(make: Callable[[str], list[Layer]], input_shape: tuple[int, int, int]) -> list[Layer]:
    """The original network with valid padding when the input is large enough, same otherwise."""
    try:
        layers = make("valid")
        shape: tuple[int, ...] = input_shape
        for layer in layers:
            shape = layer.output_shape(shape)
        return layers
    except SpecError:
        return make("same")


def mlp(input_shape: tuple[int, int, int], num_classes: int) -> ModelSpec:
    """Two hidden ReLU layers of 256 and 128 units."""
    layers = [Flatten(), Dense(256), Activation("relu"), Dense(128), Activation("relu"), Dense(num_classes)]
    return ModelSpec("mlp", input_shape, num_classes, tuple(layers))


def lenet(input_shape: tuple[int, int, int], num_classes: int) -> ModelSpec:
    """Caffe's MNIST LeNet: conv 5x5x20 - maxpool 2 - conv 5x5x50 - maxpool 2 - dense 500 - dense."""

    def make(padding: str) -> list[Layer]:
        return [
            Conv2D(20, 5, padding=padding),
            MaxPool2D(2, 2),
            Conv2D(50, 5, padding=padding),
            MaxPool2D(2, 2),
            Flatten(),
            Dense(500),
            Activation("relu"),
            Dense(num_classes),
        ]

    return ModelSpec("lenet", input_shape, num_classes, tuple(_with_padding(make, input_shape)))


def tf_mnist(input_shape: tuple[int, int, int], num_classes: int) -> ModelSpec:
    """TensorFlow's MNIST tutorial net: conv 5x5x32 - pool - conv 5x5x64 - pool - dense 1024 - dropout."""
    layers: list[Layer] = [
        Conv2D(32, 5, padding="same"),
        Activation("relu"),
        MaxPool2D(2, 2),
        Conv2D(64, 5, padding="same"),
        Activation("relu"),
        MaxPool2D(2, 2),
        Flatten(),
        Dense(1024),
        Activation("relu"),
        Dropout(0.5),
        Dense(num_classes),
    ]
    return ModelSpec("tf_mnist", input_shape, num_classes, tuple(_fit_pools(layers, input_shape)))


def cifar_quick(input_shape: tuple[int, int, int], num_classes: int) -> ModelSpec:
    """Caffe's CIFAR-10 "quick" net: three 5x5 convs (32, 32, 64) with pooling, dense 64, dense."""
    layers: list[Layer] = [
        Conv2D(32, 5, padding="same"),
        MaxPool2D(3, 2),
        Activation("relu"),
        Conv2D(32, 5, padding="same"),
        Activation("relu"),
        AvgPool2D(3, 2),
        Conv2D(64, 5, padding="same"),
        Activation("relu"),
        AvgPool2D(3, 2),
        Flatten(),
        Dense(64),
        Dense(num_classes),
    ]
    return ModelSpec("cifar_quick", input_shape, num_classes, tuple(_fit_pools(layers, input_shape)))


def resnet8(input_shape: tuple[int, int, int], num_classes: int) -> ModelSpec:
    """A CIFAR-style ResNet-8: a conv-BN-ReLU stem of 16 filters, then three stages (16, 32, 64
    filters) of one residual block each (two 3x3 conv-BN, a 1x1 projection where the channels
    change), global average pooling and a dense layer. Stages halve the map by 2x2 average
    pooling: dltune's 'same' padding needs stride 1, so no block convolves with stride 2."""
    layers: list[Layer] = [Conv2D(16, 3, padding="same"), BatchNorm(), Activation("relu")]
    channels = 16
    for stage, filters in enumerate((16, 32, 64)):
        if stage:
            layers.append(AvgPool2D(2, 2))
        body = (Conv2D(filters, 3, padding="same"), BatchNorm(), Activation("relu"),
                Conv2D(filters, 3, padding="same"), BatchNorm())
        shortcut = () if filters == channels else (Conv2D(filters, 1),)
        layers += [Residual(body, shortcut), Activation("relu")]
        channels = filters
    layers += [GlobalAvgPool2D(), Dense(num_classes)]
    return ModelSpec("resnet8", input_shape, num_classes, tuple(_fit_pools(layers, input_shape)))


def tabular_mlp(input_shape: tuple[int], num_classes: int) -> ModelSpec:
    """For (F,) feature rows: dense 128 - batch norm - ReLU - dropout 0.1 - dense 64 - batch
    norm - ReLU - dense."""
    layers: list[Layer] = [Dense(128), BatchNorm(), Activation("relu"), Dropout(0.1),
                           Dense(64), BatchNorm(), Activation("relu"), Dense(num_classes)]
    return ModelSpec("tabular_mlp", input_shape, num_classes, tuple(layers))


def _embedded(input_shape: tuple[int, ...], vocab_size: int | None) -> list[Layer]:
    """A 32-wide embedding for (L,) token ids; nothing for (F, L) sequences, already vectors."""
    return [Embedding(vocab_size, 32)] if len(input_shape) == 1 and vocab_size is not None else []


def text_conv(input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None) -> ModelSpec:
    """For (L,) token ids (embedded 32 wide) or (F, L) sequences: a 1-D convolution of 64
    filters of width 5 with ReLU, max pooling over all positions, dropout 0.5 and a dense layer
    (Kim's CNN)."""
    steps = input_shape[-1]
    layers: list[Layer] = [*_embedded(input_shape, vocab_size), Conv1D(64, 5, padding="same"),
                           Activation("relu"), MaxPool1D(steps, steps), Flatten(), Dropout(0.5),
                           Dense(num_classes)]
    return ModelSpec("text_conv", input_shape, num_classes, tuple(layers))


def text_lstm(input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None) -> ModelSpec:
    """For (L,) token ids (embedded 32 wide) or (F, L) sequences: an LSTM of 64 units (its last
    step's state) and a dense layer."""
    layers: list[Layer] = [*_embedded(input_shape, vocab_size), LSTM(64), Dense(num_classes)]
    return ModelSpec("text_lstm", input_shape, num_classes, tuple(layers))


@dataclass(frozen=True)
class ModelPreset:
    """A preset: what builds it from the data's shape and classes (and vocabulary, for token
    ids), the data modalities it takes (``dltune.data``'s names) and its :func:`model_family`."""

    build: Callable[..., ModelSpec]
    modalities: tuple[str, ...]
    family: str

    @property
    def takes_tokens(self) -> bool:
        return "tokens" in self.modalities


MODEL_PRESETS: dict[str, ModelPreset] = {
    "mlp": ModelPreset(mlp, ("image", "tabular"), "mlp"),
    "lenet": ModelPreset(lenet, ("image",), "cnn"),
    "tf_mnist": ModelPreset(tf_mnist, ("image",), "cnn"),
    "cifar_quick": ModelPreset(cifar_quick, ("image",), "cnn"),
    "resnet8": ModelPreset(resnet8, ("image",), "resnet"),
    "tabular_mlp": ModelPreset(tabular_mlp, ("tabular",), "mlp"),
    "text_conv": ModelPreset(text_conv, ("tokens", "sequence"), "conv1d"),
    "text_lstm": ModelPreset(text_lstm, ("tokens", "sequence"), "rnn"),
}


def _kinds(layers: tuple[Layer, ...]) -> set[str]:
    """The kinds of ``layers`` and of every layer nested in them (a residual's body and shortcut)."""
    found: set[str] = set()
    for layer in layers:
        found.add(layer.kind)
        found |= _kinds(getattr(layer, "body", ())) | _kinds(getattr(layer, "shortcut", ()))
    return found


def model_family(spec: ModelSpec) -> str:
    """The family a model belongs to, by its layers (the first that applies): ``rnn`` (a
    recurrent layer), ``resnet`` (a residual block), ``conv1d``, ``cnn`` (a 2-D convolution),
    else ``mlp``. The knowledge base's coverage is judged per family, so that a user's own
    network is compared with the measured ones of its kind."""
    kinds = _kinds(spec.layers)
    for family, marks in (("rnn", {"lstm", "gru"}), ("resnet", {"residual"}), ("conv1d", {"conv1d"}),
                          ("cnn", {"conv2d"})):
        if kinds & marks:
            return family
    return "mlp"


def model_features(spec: ModelSpec) -> dict[str, Any]:
    """The model's part of a workload's meta-features: its name, size and cost
    (:meth:`ModelSpec.cost_features`), its :func:`model_family` and the input shape it takes."""
    return {**spec.cost_features(), "model_family": model_family(spec), "input_shape": list(spec.input_shape)}


def available_models() -> list[str]:
    return sorted(MODEL_PRESETS)


def build_model(name: str | ModelSpec, input_shape: tuple[int, ...], num_classes: int,
                vocab_size: int | None = None) -> ModelSpec:
    """The preset ``name`` for inputs of ``input_shape`` ((C, H, W) images, (F,) features, (L,)
    token ids, (F, L) sequences) and ``num_classes`` classes; token ids need the ``vocab_size``.

    A :class:`ModelSpec` (e.g. from :func:`~dltune.models.load_spec`) is returned as it is where it
    takes that input and those classes, and refused in one line otherwise.
    """
    shape, classes = tuple(int(v) for v in input_shape), int(num_classes)
    if isinstance(name, ModelSpec):
        if (tuple(name.input_shape), name.num_classes) != (shape, classes):
            raise SpecError(f"The model {name.name!r} takes input {tuple(name.input_shape)} with "
                            f"{name.num_classes} classes; the data are {shape} with {classes} classes.")
        return name
    preset = MODEL_PRESETS[check_choice("model", name, available_models())]
    if not preset.takes_tokens:
        return preset.build(shape, classes)
    if len(shape) == 1 and vocab_size is None:
        raise ParameterError(f"The model {name!r} takes token ids: its 'vocab_size' parameter must be "
                             "an int >= 1. Got None instead.")
    return preset.build(shape, classes, None if vocab_size is None else check_int("vocab_size", vocab_size, 1))
