"""The recurrent layers, LSTM and GRU: one gate layout and initialisation for every backend.

Like every map, a sequence is channels first: the input is (features, steps), as ``Conv1D``
and an ``Embedding`` produce it. The output is the last step's hidden state (units,), or
every step's, (units, steps), with ``return_sequences``. The hidden (and cell) state starts at
zero for every sample. Weights are ``(in, out)`` like a ``Dense`` weight, each gate a block of
``units`` columns:

- ``LSTM``: kernel (F, 4U), recurrent kernel (U, 4U), one bias (4U,); gates i, f, g, o
  (PyTorch's order; MXNet's i, f, c, o and Keras' i, f, c, o are the same)::

      i, f, g, o = σ, σ, tanh, σ of (x W + h R + b)
      c' = f * c + i * g;   h' = o * tanh(c')

  One bias: a second one (PyTorch's and MXNet's ``bias_hh``) only adds to it; the backends
  that hold two keep the second at zero and untrained.
- ``GRU``: kernel (F, 3U), recurrent kernel (U, 3U), input bias (3U,), recurrent bias (3U,);
  gates r, z, n (PyTorch's and MXNet's order; Keras holds z, r, n). The reset gate applies
  after the recurrent product, as in PyTorch, cuDNN, MXNet and Keras' ``reset_after=True``,
  which is why the recurrent bias is a parameter of its own::

      r = σ(x W_r + b_r + h R_r + c_r);   z = σ(x W_z + b_z + h R_z + c_z)
      n = tanh(x W_n + b_n + r * (h R_n + c_n));   h' = (1 - z) * n + z * h

Initialisation: both kernels Glorot-uniform (over the whole matrix, drawn in order from the
spec's stream like every weight), biases zero, except the LSTM's forget-gate bias, one
(Keras' ``unit_forget_bias``: the cell remembers from the start).

Worker-side module: imports only the standard library, numpy and dltune's stdlib-only modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dltune._validation import check_bool, check_int
from dltune.models._layers import Layer, SpecError

__all__ = ["GRU", "LSTM", "RecurrentLayer"]


@dataclass(frozen=True)
class RecurrentLayer(Layer):
    """A recurrent layer over a (features, steps) input: ``units`` hidden values, the last
    step's (or, with ``return_sequences``, every step's) as output."""

    units: int
    return_sequences: bool = False
    # Gate blocks in the weights' columns, and bias vectors of GATES * units each.
    GATES: ClassVar[int] = 0
    BIASES: ClassVar[int] = 1
    # Element-wise operations per hidden unit and step (gate non-linearities, state update).
    ELEMENTWISE: ClassVar[int] = 0

    def __post_init__(self) -> None:
        check_int("units", self.units, 1)
        check_bool("return_sequences", self.return_sequences)

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != 2:
            raise SpecError(f"{type(self).__name__} needs a (features, steps) input. Got {shape}.")
        return (self.units, shape[1]) if self.return_sequences else (self.units,)

    def param_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        width = self.GATES * self.units
        return [(shape[0], width), (self.units, width), *[(width,)] * self.BIASES]

    def flops(self, shape: tuple[int, ...]) -> int:
        features, steps = shape
        width = self.GATES * self.units
        per_step = 2 * width * (features + self.units) + self.BIASES * width + self.ELEMENTWISE * self.units
        return steps * per_step


@dataclass(frozen=True)
class LSTM(RecurrentLayer):
    """Long short-term memory (gates i, f, g, o; one bias): see :mod:`dltune.models._recurrent`."""

    GATES: ClassVar[int] = 4
    ELEMENTWISE: ClassVar[int] = 8
    kind = "lstm"

    def init_params(self, shape: tuple[int, ...], rng: np.random.Generator) -> list[np.ndarray]:
        kernel, recurrent, bias = super().init_params(shape, rng)
        bias[self.units : 2 * self.units] = 1.0
        return [kernel, recurrent, bias]


@dataclass(frozen=True)
class GRU(RecurrentLayer):
    """Gated recurrent unit (gates r, z, n; reset after the recurrent product; an input and a
    recurrent bias): see :mod:`dltune.models._recurrent`."""

    GATES: ClassVar[int] = 3
    BIASES: ClassVar[int] = 2
    ELEMENTWISE: ClassVar[int] = 8
    kind = "gru"
