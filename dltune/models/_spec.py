"""A framework-neutral model description: layers, shapes, parameter count, FLOPs, initial weights.

This module runs inside worker processes, including the legacy runtime: it imports only the
standard library and numpy.

Canonical tensor layouts, which every backend converts from and back to:
- images are NCHW; ``Flatten`` orders features as (channel, row, column);
- a ``Conv2D`` weight is (out_channels, in_channels, kernel_h, kernel_w), its bias (out,);
- a ``Dense`` weight is (in_features, out_features), its bias (out,).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Activation",
    "AvgPool2D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPool2D",
    "ModelSpec",
    "ACTIVATIONS",
]

ACTIVATIONS = ("relu", "tanh", "sigmoid")


class SpecError(ValueError):
    """A model specification is inconsistent with its input."""


@dataclass(frozen=True)
class Layer:
    """Base class of the layers a :class:`ModelSpec` is made of."""

    kind = "layer"

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return []

    def flops(self, shape: tuple[int, ...]) -> int:
        """Forward floating-point operations per sample (a multiply-add counts as two)."""
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}


def _conv_out(n: int, k: int, s: int, padding: str) -> int:
    if padding == "same":
        return -(-n // s)
    return (n - k) // s + 1


@dataclass(frozen=True)
class Conv2D(Layer):
    """2-D convolution with bias; ``padding`` is ``"valid"`` or ``"same"`` (same needs stride 1)."""

    filters: int
    kernel: int
    stride: int = 1
    padding: str = "valid"
    kind = "conv2d"

    def __post_init__(self) -> None:
        if self.padding not in ("valid", "same"):
            raise SpecError(f"Conv2D padding must be 'valid' or 'same'. Got {self.padding!r}.")
        if self.padding == "same" and (self.stride != 1 or self.kernel % 2 == 0):
            raise SpecError("Conv2D with 'same' padding needs stride 1 and an odd kernel.")

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 3:
            raise SpecError(f"Conv2D needs a (channels, height, width) input. Got {shape}.")
        c, h, w = shape
        oh = _conv_out(h, self.kernel, self.stride, self.padding)
        ow = _conv_out(w, self.kernel, self.stride, self.padding)
        if oh < 1 or ow < 1:
            raise SpecError(f"Conv2D kernel {self.kernel} does not fit input {h}x{w}.")
        return (self.filters, oh, ow)

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(self.filters, shape[0], self.kernel, self.kernel), (self.filters,)]

    def flops(self, shape: tuple[int, ...]) -> int:
        f, oh, ow = self.output_shape(shape)
        return 2 * f * oh * ow * shape[0] * self.kernel * self.kernel


@dataclass(frozen=True)
class _Pool(Layer):
    size: int
    stride: int

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 3:
            raise SpecError(f"Pooling needs a (channels, height, width) input. Got {shape}.")
        c, h, w = shape
        oh, ow = _conv_out(h, self.size, self.stride, "valid"), _conv_out(w, self.size, self.stride, "valid")
        if oh < 1 or ow < 1:
            raise SpecError(f"Pool size {self.size} does not fit input {h}x{w}.")
        return (c, oh, ow)

    def flops(self, shape: tuple[int, ...]) -> int:
        c, oh, ow = self.output_shape(shape)
        return c * oh * ow * self.size * self.size


@dataclass(frozen=True)
class MaxPool2D(_Pool):
    """Max pooling without padding (output size rounds down)."""

    kind = "maxpool2d"


@dataclass(frozen=True)
class AvgPool2D(_Pool):
    """Average pooling without padding (output size rounds down)."""

    kind = "avgpool2d"


@dataclass(frozen=True)
class Flatten(Layer):
    """Flattens (C, H, W) to C*H*W features in channel, row, column order."""

    kind = "flatten"

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (int(np.prod(shape)),)


@dataclass(frozen=True)
class Dense(Layer):
    """Fully connected layer with bias."""

    units: int
    kind = "dense"

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 1:
            raise SpecError(f"Dense needs a flat input; add Flatten first. Got {shape}.")
        return (self.units,)

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(shape[0], self.units), (self.units,)]

    def flops(self, shape: tuple[int, ...]) -> int:
        return 2 * shape[0] * self.units


@dataclass(frozen=True)
class Activation(Layer):
    """Element-wise non-linearity: ``relu``, ``tanh`` or ``sigmoid``."""

    function: str = "relu"
    kind = "activation"

    def __post_init__(self) -> None:
        if self.function not in ACTIVATIONS:
            raise SpecError(f"Activation must be one of {ACTIVATIONS}. Got {self.function!r}.")

    def flops(self, shape: tuple[int, ...]) -> int:
        return int(np.prod(shape))


@dataclass(frozen=True)
class Dropout(Layer):
    """Dropout with drop probability ``rate`` during training, identity at test time."""

    rate: float = 0.5
    kind = "dropout"


_KINDS: dict[str, type[Layer]] = {
    cls.kind: cls for cls in (Conv2D, MaxPool2D, AvgPool2D, Flatten, Dense, Activation, Dropout)
}


@dataclass(frozen=True)
class ModelSpec:
    """A sequential classifier: ``layers`` applied to ``input_shape`` (C, H, W), ending in logits."""

    name: str
    input_shape: tuple[int, int, int]
    num_classes: int
    layers: tuple[Layer, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        shapes = self.shapes()
        if shapes[-1] != (self.num_classes,):
            raise SpecError(
                f"The last layer must output {self.num_classes} logits. Got shape {shapes[-1]}."
            )

    def shapes(self) -> list[tuple[int, ...]]:
        """Output shape of every layer, preceded by the input shape."""
        out = [tuple(self.input_shape)]
        for layer in self.layers:
            out.append(layer.output_shape(out[-1]))
        return out

    def param_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of all parameter arrays in order, in the canonical layout."""
        shapes = self.shapes()
        result: list[tuple[int, ...]] = []
        for layer, shape in zip(self.layers, shapes[:-1], strict=True):
            result.extend(layer.param_shapes(shape))
        return result

    @property
    def param_count(self) -> int:
        return int(sum(int(np.prod(s)) for s in self.param_shapes()))

    @property
    def flops_per_sample(self) -> int:
        """Forward FLOPs for one sample; a training step costs about three times this."""
        shapes = self.shapes()
        return int(sum(layer.flops(shape) for layer, shape in zip(self.layers, shapes[:-1], strict=True)))

    @property
    def activations_per_sample(self) -> int:
        """Output elements of every layer for one sample: what memory-bound work scales with
        (activations, pooling, copies), where the FLOPs count only multiply-adds."""
        return int(sum(int(np.prod(s)) for s in self.shapes()[1:]))

    @property
    def conv_outputs_per_sample(self) -> int:
        """Output elements of the convolution layers for one sample: work done per output
        element rather than per multiply-add (bias, unfolding the input into and folding the
        gradient back out of the matrix product) that FLOPs do not capture."""
        return int(sum(int(np.prod(out)) for layer, out in zip(self.layers, self.shapes()[1:], strict=True)
                       if isinstance(layer, Conv2D)))

    def cost_features(self) -> dict[str, Any]:
        """Name, size and cost of the model as the surrogates see it (``Workload.meta_features``)."""
        return {"model": self.name, "param_count": self.param_count,
                "flops_per_sample": self.flops_per_sample,
                "layers": len(self.layers), "activations_per_sample": self.activations_per_sample,
                "conv_outputs_per_sample": self.conv_outputs_per_sample}

    def init_params(self, seed: int) -> list[np.ndarray]:
        """Initial weights, identical for every backend: Glorot-uniform weights, zero biases."""
        rng = np.random.default_rng([int(seed), 7919])
        params: list[np.ndarray] = []
        for shape in self.param_shapes():
            if len(shape) == 1:
                params.append(np.zeros(shape, dtype=np.float32))
                continue
            if len(shape) == 4:
                receptive = shape[2] * shape[3]
                fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
            else:
                fan_in, fan_out = shape
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            params.append(rng.uniform(-limit, limit, size=shape).astype(np.float32))
        return params

    def flatten_input_shape(self) -> tuple[int, int, int] | None:
        """The (C, H, W) shape entering the first ``Flatten``, or None if it flattens nothing 3-D."""
        for layer, shape in zip(self.layers, self.shapes()[:-1], strict=True):
            if isinstance(layer, Flatten) and len(shape) == 3:
                return shape  # type: ignore[return-value]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
            "layers": [layer.to_dict() for layer in self.layers],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        layers = []
        for item in data["layers"]:
            item = dict(item)
            layers.append(_KINDS[item.pop("kind")](**item))
        return cls(
            name=data["name"],
            input_shape=tuple(data["input_shape"]),  # type: ignore[arg-type]
            num_classes=int(data["num_classes"]),
            layers=tuple(layers),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def summary(self) -> str:
        """A table of layers, output shapes and parameter counts."""
        lines = [f"{self.name}: input {self.input_shape}, {self.num_classes} classes"]
        shapes = self.shapes()
        for layer, before, after in zip(self.layers, shapes[:-1], shapes[1:], strict=True):
            n = sum(int(np.prod(s)) for s in layer.param_shapes(before))
            lines.append(f"  {layer.kind:<11} {str(after):<16} {n:>10,d}")
        lines.append(f"  params {self.param_count:,d}, forward FLOPs/sample {self.flops_per_sample:,d}")
        return "\n".join(lines)
