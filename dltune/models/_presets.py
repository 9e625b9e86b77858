"""Named model presets, adapted to any input of at least 8x8."""

from __future__ import annotations

from collections.abc import Callable

from dltune._validation import check_choice
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    Layer,
    MaxPool2D,
    ModelSpec,
    SpecError,
)

__all__ = ["MODEL_PRESETS", "build_model", "available_models"]


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


MODEL_PRESETS: dict[str, Callable[[tuple[int, int, int], int], ModelSpec]] = {
    "mlp": mlp,
    "lenet": lenet,
    "tf_mnist": tf_mnist,
    "cifar_quick": cifar_quick,
}


def available_models() -> list[str]:
    return sorted(MODEL_PRESETS)


def build_model(name: str, input_shape: tuple[int, int, int], num_classes: int) -> ModelSpec:
    """The preset ``name`` for inputs of ``input_shape`` (C, H, W) and ``num_classes`` classes."""
    check_choice("model", name, available_models())
    return MODEL_PRESETS[name](tuple(int(v) for v in input_shape), int(num_classes))  # type: ignore[arg-type]
