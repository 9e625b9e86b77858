"""The layers a :class:`dltune.models.ModelSpec` is made of: shapes, parameters, state, FLOPs.

This module runs inside worker processes, including the legacy runtime: it imports only the
standard library, numpy and dltune's stdlib-only error and check modules.

Canonical tensor layouts, which every backend converts from and back to:
- images are NCHW; ``Flatten`` orders features as (channel, row, column);
- sequences are NCL (channels, positions), the input of ``Conv1D`` and the 1-D pools;
- a ``Conv2D`` weight is (out_channels, in_channels, kernel_h, kernel_w), its bias (out,);
- a ``Conv1D`` weight is (out_channels, in_channels, kernel), its bias (out,);
- token sequences are (N, L) integer ids (held as floats); an ``Embedding`` maps them to
  (dim, L), channels first like every map, its weight is (vocab_size, dim);
- a ``Dense`` weight is (in_features, out_features), its bias (out,);
- a ``BatchNorm`` holds a scale and a shift per channel (or feature) as parameters, and a
  running mean and variance as state (:meth:`Layer.state_shapes`), not parameters;
- a ``Residual`` holds its body's parameters and state, then its shortcut's;
- ``LSTM`` and ``GRU`` take (features, steps): see :mod:`dltune.models._recurrent`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_float, check_int

__all__ = [
    "ACTIVATIONS",
    "BATCH_NORM_EPSILON",
    "BATCH_NORM_MOMENTUM",
    "Activation",
    "AvgPool1D",
    "AvgPool2D",
    "BatchNorm",
    "Conv1D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GlobalAvgPool2D",
    "Layer",
    "MaxPool1D",
    "MaxPool2D",
    "Residual",
    "SpecError",
    "sequence_shapes",
]

ACTIVATIONS = ("relu", "tanh", "sigmoid")

# Batch normalisation, the same in every backend: training normalises with the batch's mean and
# biased variance and moves the running statistics by
# ``running = (1 - BATCH_NORM_MOMENTUM) * running + BATCH_NORM_MOMENTUM * batch`` (the batch's
# biased variance too, as Keras and MXNet do); evaluation normalises with the running statistics.
BATCH_NORM_MOMENTUM = 0.1
BATCH_NORM_EPSILON = 1e-5


class SpecError(ParameterError):
    """A model specification is inconsistent with its input."""


@dataclass(frozen=True)
class Layer:
    """Base class of the layers a :class:`ModelSpec` is made of."""

    kind = "layer"

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return []

    def state_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Shapes of the layer's non-trainable state (running statistics), in order."""
        return []

    def init_params(self, shape: tuple[int, ...], rng: np.random.Generator) -> list[np.ndarray]:
        """Initial parameters: Glorot-uniform weights (drawn from ``rng`` in order), zero biases."""
        params: list[np.ndarray] = []
        for pshape in self.param_shapes(shape):
            if len(pshape) == 1:
                params.append(np.zeros(pshape, dtype=np.float32))
                continue
            receptive = int(np.prod(pshape[2:]))
            if len(pshape) > 2:
                fan_in, fan_out = pshape[1] * receptive, pshape[0] * receptive
            else:
                fan_in, fan_out = pshape
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            params.append(rng.uniform(-limit, limit, size=pshape).astype(np.float32))
        return params

    def init_state(self, shape: tuple[int, ...]) -> list[np.ndarray]:
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
    """2-D convolution with bias; ``padding`` is ``"valid"`` or ``"same"`` (same needs stride 1 and an odd kernel)."""

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
class Conv1D(Layer):
    """1-D convolution with bias over a (channels, positions) input; ``padding`` is
    ``"valid"`` or ``"same"`` (same needs stride 1 and an odd kernel)."""

    filters: int
    kernel: int
    stride: int = 1
    padding: str = "valid"
    kind = "conv1d"

    def __post_init__(self) -> None:
        check_int("filters", self.filters, 1)
        check_int("kernel", self.kernel, 1)
        check_int("stride", self.stride, 1)
        check_choice("padding", self.padding, ("valid", "same"))
        if self.padding == "same" and (self.stride != 1 or self.kernel % 2 == 0):
            raise SpecError("Conv1D with 'same' padding needs stride 1 and an odd kernel.")

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 2:
            raise SpecError(f"Conv1D needs a (channels, positions) input. Got {shape}.")
        out = _conv_out(shape[1], self.kernel, self.stride, self.padding)
        if out < 1:
            raise SpecError(f"Conv1D kernel {self.kernel} does not fit input length {shape[1]}.")
        return (self.filters, out)

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(self.filters, shape[0], self.kernel), (self.filters,)]

    def flops(self, shape: tuple[int, ...]) -> int:
        f, out = self.output_shape(shape)
        return 2 * f * out * shape[0] * self.kernel


@dataclass(frozen=True)
class Embedding(Layer):
    """A learned vector of ``dim`` values for each token id in ``[0, vocab_size)``: an (L,)
    sequence of ids becomes a (dim, L) map (channels first, so that ``Conv1D``, the 1-D pools
    and ``BatchNorm`` follow it directly). It must be the first layer; the ids arrive as floats."""

    vocab_size: int
    dim: int
    kind = "embedding"

    def __post_init__(self) -> None:
        check_int("vocab_size", self.vocab_size, 1)
        check_int("dim", self.dim, 1)

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 1:
            raise SpecError(f"Embedding needs an (L,) sequence of token ids as input. Got {shape}.")
        return (self.dim, shape[0])

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(self.vocab_size, self.dim)]


@dataclass(frozen=True)
class _Pool1D(Layer):
    size: int
    stride: int

    def __post_init__(self) -> None:
        check_int("size", self.size, 1)
        check_int("stride", self.stride, 1)

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 2:
            raise SpecError(f"1-D pooling needs a (channels, positions) input. Got {shape}.")
        out = _conv_out(shape[1], self.size, self.stride, "valid")
        if out < 1:
            raise SpecError(f"Pool size {self.size} does not fit input length {shape[1]}.")
        return (shape[0], out)

    def flops(self, shape: tuple[int, ...]) -> int:
        c, out = self.output_shape(shape)
        return c * out * self.size


@dataclass(frozen=True)
class MaxPool1D(_Pool1D):
    """1-D max pooling without padding (output length rounds down)."""

    kind = "maxpool1d"


@dataclass(frozen=True)
class AvgPool1D(_Pool1D):
    """1-D average pooling without padding (output length rounds down)."""

    kind = "avgpool1d"


@dataclass(frozen=True)
class GlobalAvgPool2D(Layer):
    """The mean of each channel over its whole map: (C, H, W) to (C,)."""

    kind = "globalavgpool2d"

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 3:
            raise SpecError(f"GlobalAvgPool2D needs a (channels, height, width) input. Got {shape}.")
        return (shape[0],)

    def flops(self, shape: tuple[int, ...]) -> int:
        return int(np.prod(shape))


@dataclass(frozen=True)
class BatchNorm(Layer):
    """Batch normalisation over the channels of a (C, H, W) map or the features of a (F,)
    vector: a trainable scale (ones) and shift (zeros) per channel, running mean (zeros) and
    variance (ones) as state; :data:`BATCH_NORM_MOMENTUM` and :data:`BATCH_NORM_EPSILON`."""

    kind = "batchnorm"

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) not in (1, 2, 3):
            raise SpecError(f"BatchNorm needs a (channels, ...) or (features,) input. Got {shape}.")
        return shape

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(shape[0],), (shape[0],)]

    def state_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(shape[0],), (shape[0],)]

    def init_params(self, shape: tuple[int, ...], rng: np.random.Generator) -> list[np.ndarray]:
        return [np.ones(shape[0], dtype=np.float32), np.zeros(shape[0], dtype=np.float32)]

    def init_state(self, shape: tuple[int, ...]) -> list[np.ndarray]:
        return [np.zeros(shape[0], dtype=np.float32), np.ones(shape[0], dtype=np.float32)]

    def flops(self, shape: tuple[int, ...]) -> int:
        return 2 * int(np.prod(shape))


@dataclass(frozen=True)
class Flatten(Layer):
    """Flattens (C, H, W) to C*H*W features in channel, row, column order ((C, L) likewise)."""

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

    def __post_init__(self) -> None:
        check_float("rate", self.rate, 0.0, 1.0, high_open=True)


def sequence_shapes(layers: tuple[Layer, ...], shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The output shape of every layer in ``layers`` applied in order to ``shape``, preceded by it."""
    out = [tuple(shape)]
    for layer in layers:
        out.append(layer.output_shape(out[-1]))
    return out


@dataclass(frozen=True)
class Residual(Layer):
    """``body(x) + shortcut(x)``: two layer sequences on the same input, added. An empty
    ``shortcut`` is the identity; a ResNet block that changes the shape projects it there (a
    strided 1x1 ``Conv2D``). Parameters and state are the body's, then the shortcut's."""

    body: tuple[Layer, ...]
    shortcut: tuple[Layer, ...] = ()
    kind = "residual"

    def __post_init__(self) -> None:
        for name in ("body", "shortcut"):
            layers = getattr(self, name)
            if not isinstance(layers, (tuple, list)) or not all(isinstance(x, Layer) for x in layers):
                raise ParameterError(f"The '{name}' parameter must be a sequence of layers. Got {layers!r} instead.")
            object.__setattr__(self, name, tuple(layers))
        if not self.body:
            raise ParameterError("The 'body' parameter must hold at least one layer. Got () instead.")

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        body, shortcut = sequence_shapes(self.body, shape)[-1], sequence_shapes(self.shortcut, shape)[-1]
        if body != shortcut:
            raise SpecError(f"Residual adds its body's output {body} to its shortcut's {shortcut}: "
                            "they must be equal (project the shortcut, e.g. with a 1x1 Conv2D).")
        return body

    def _parts(self, shape: tuple[int, ...]):
        for layers in (self.body, self.shortcut):
            yield from zip(layers, sequence_shapes(layers, shape)[:-1], strict=True)

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [p for layer, before in self._parts(shape) for p in layer.param_shapes(before)]

    def state_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [a for layer, before in self._parts(shape) for a in layer.state_shapes(before)]

    def init_params(self, shape: tuple[int, ...], rng: np.random.Generator) -> list[np.ndarray]:
        return [p for layer, before in self._parts(shape) for p in layer.init_params(before, rng)]

    def init_state(self, shape: tuple[int, ...]) -> list[np.ndarray]:
        return [a for layer, before in self._parts(shape) for a in layer.init_state(before)]

    def flops(self, shape: tuple[int, ...]) -> int:
        return sum(layer.flops(before) for layer, before in self._parts(shape)) + int(np.prod(self.output_shape(shape)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "body": [layer.to_dict() for layer in self.body],
                "shortcut": [layer.to_dict() for layer in self.shortcut]}
