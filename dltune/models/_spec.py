"""A framework-neutral model description: layers, shapes, parameter count, FLOPs, initial weights.

This module runs inside worker processes, including the legacy runtime: it imports only the
standard library and numpy. The layers and the canonical tensor layouts are in
:mod:`dltune.models._layers` and :mod:`dltune.models._recurrent` (re-exported here), the
registry of layer kinds here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dltune._validation import check_choice
from dltune.models._layers import (
    ACTIVATIONS,
    BATCH_NORM_EPSILON,
    BATCH_NORM_MOMENTUM,
    Activation,
    AvgPool1D,
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
    Residual,
    SpecError,
    sequence_shapes,
)
from dltune.models._recurrent import GRU, LSTM

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "AvgPool1D",
    "AvgPool2D",
    "BATCH_NORM_EPSILON",
    "BATCH_NORM_MOMENTUM",
    "BatchNorm",
    "Conv1D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GRU",
    "GlobalAvgPool2D",
    "LSTM",
    "Layer",
    "MaxPool1D",
    "MaxPool2D",
    "ModelSpec",
    "Residual",
    "SpecError",
    "layer_from_dict",
    "sequence_shapes",
]

_KINDS: dict[str, type[Layer]] = {
    cls.kind: cls
    for cls in (Conv2D, MaxPool2D, AvgPool2D, GlobalAvgPool2D, BatchNorm, Conv1D, MaxPool1D, AvgPool1D,
                Embedding, LSTM, GRU, Flatten, Dense, Activation, Dropout, Residual)
}


def layer_from_dict(item: dict[str, Any]) -> Layer:
    """The layer a :meth:`Layer.to_dict` dictionary describes (a residual's sequences too)."""
    item = dict(item)
    kind = check_choice("kind", item.pop("kind", None), sorted(_KINDS))
    for name in ("body", "shortcut"):
        if kind == "residual" and name in item:
            item[name] = tuple(layer_from_dict(x) for x in item[name])
    return _KINDS[kind](**item)


@dataclass(frozen=True)
class ModelSpec:
    """A sequential classifier: ``layers`` applied to ``input_shape`` (C, H, W) for images,
    (C, L) for sequences or (L,) for token ids into an ``Embedding``, ending in logits."""

    name: str
    input_shape: tuple[int, ...]
    num_classes: int
    layers: tuple[Layer, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if any(isinstance(layer, Embedding) for layer in self.layers[1:]):
            raise SpecError("An Embedding must be the first layer: it takes the token ids.")
        shapes = self.shapes()
        if shapes[-1] != (self.num_classes,):
            raise SpecError(
                f"The last layer must output {self.num_classes} logits. Got shape {shapes[-1]}."
            )

    def shapes(self) -> list[tuple[int, ...]]:
        """Output shape of every layer, preceded by the input shape."""
        return sequence_shapes(self.layers, self.input_shape)

    def param_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of all parameter arrays in order, in the canonical layout."""
        shapes = self.shapes()
        result: list[tuple[int, ...]] = []
        for layer, shape in zip(self.layers, shapes[:-1], strict=True):
            result.extend(layer.param_shapes(shape))
        return result

    def state_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of all non-trainable state arrays (running statistics) in order."""
        shapes = self.shapes()
        result: list[tuple[int, ...]] = []
        for layer, shape in zip(self.layers, shapes[:-1], strict=True):
            result.extend(layer.state_shapes(shape))
        return result

    def init_state(self) -> list[np.ndarray]:
        """Initial state (running means zero, running variances one), in :meth:`state_shapes` order."""
        return [a for layer, shape in zip(self.layers, self.shapes()[:-1], strict=True)
                for a in layer.init_state(shape)]

    @property
    def param_count(self) -> int:
        """Trainable parameters; running statistics (:meth:`state_shapes`) are not counted."""
        return int(sum(int(np.prod(s)) for s in self.param_shapes()))

    @property
    def flops_per_sample(self) -> int:
        """Forward FLOPs for one sample; a training step costs about three times this."""
        shapes = self.shapes()
        return int(sum(layer.flops(shape) for layer, shape in zip(self.layers, shapes[:-1], strict=True)))

    def work_by_kind(self) -> dict[str, int]:
        """Forward FLOPs per sample by layer kind (``Layer.kind``: ``"dense"``, ``"conv2d"``,
        ...), each layer's own :meth:`Layer.flops`; kinds without FLOPs are left out. Sums to
        :attr:`flops_per_sample`: what the time model divides by each kind's throughput."""
        out: dict[str, int] = {}
        for layer, shape in zip(self.layers, self.shapes()[:-1], strict=True):
            flops = int(layer.flops(shape))
            if flops:
                out[layer.kind] = out.get(layer.kind, 0) + flops
        return out

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
                       if isinstance(layer, (Conv2D, Conv1D))))

    def cost_features(self) -> dict[str, Any]:
        """Name, size and cost of the model as the surrogates see it (``Workload.meta_features``)."""
        return {"model": self.name, "param_count": self.param_count,
                "flops_per_sample": self.flops_per_sample,
                "layers": len(self.layers), "activations_per_sample": self.activations_per_sample,
                "conv_outputs_per_sample": self.conv_outputs_per_sample}

    def init_params(self, seed: int) -> list[np.ndarray]:
        """Initial weights, identical for every backend: each layer's :meth:`Layer.init_params`
        (Glorot-uniform weights, zero biases, batch-norm scales one), from one random stream."""
        rng = np.random.default_rng([int(seed), 7919])
        return [a for layer, shape in zip(self.layers, self.shapes()[:-1], strict=True)
                for a in layer.init_params(shape, rng)]

    def flatten_input_shape(self) -> tuple[int, ...] | None:
        """The (C, H, W) or (C, L) shape entering the first ``Flatten``, or None if it flattens
        no map."""
        for layer, shape in zip(self.layers, self.shapes()[:-1], strict=True):
            if isinstance(layer, Flatten) and len(shape) >= 2:
                return shape
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
        return cls(
            name=data["name"],
            input_shape=tuple(data["input_shape"]),
            num_classes=int(data["num_classes"]),
            layers=tuple(layer_from_dict(item) for item in data["layers"]),
        )

    @classmethod
    def from_file(cls, path: Any) -> ModelSpec:
        """The model a YAML or JSON file describes, checked field by field
        (:func:`dltune.models.load_spec`)."""
        from dltune.models._spec_file import load_spec

        return load_spec(path)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def summary(self) -> str:
        """A table of layers (a residual's body and shortcut indented below it), output shapes
        and parameter counts."""
        lines = [f"{self.name}: input {self.input_shape}, {self.num_classes} classes"]

        def add(layers: tuple[Layer, ...], shape: tuple[int, ...], indent: str) -> None:
            shapes = sequence_shapes(layers, shape)
            for layer, before, after in zip(layers, shapes[:-1], shapes[1:], strict=True):
                n = sum(int(np.prod(s)) for s in layer.param_shapes(before))
                lines.append(f"  {indent + layer.kind:<19} {str(after):<16} {n:>10,d}")
                if isinstance(layer, Residual):
                    for part in ("body", "shortcut"):
                        inner = getattr(layer, part)
                        lines.append(f"  {indent}  {part}:" + ("" if inner else " identity"))
                        add(inner, before, indent + "    ")

        add(self.layers, tuple(self.input_shape), "")
        state = sum(int(np.prod(s)) for s in self.state_shapes())
        running = f" (and {state:,d} running statistics)" if state else ""
        lines.append(f"  params {self.param_count:,d}{running}, forward FLOPs/sample {self.flops_per_sample:,d}")
        return "\n".join(lines)
