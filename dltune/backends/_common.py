"""What every backend shares: batch order, learning-rate schedule, layout conversions, and
the layers of Theano-style graphs (Theano and PyTensor build them with one dispatch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dltune.models._recurrent import LSTM, RecurrentLayer
from dltune.models._spec import (
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
    MaxPool1D,
    MaxPool2D,
    Residual,
    sequence_shapes,
)

__all__ = [
    "ALIGNMENT",
    "aligned_empty",
    "batch_order",
    "dense_rows_chw_to_hwc",
    "dense_rows_hwc_to_chw",
    "epoch_batch_sizes",
    "CompiledGraphTrainer",
    "graph_batch_norm",
    "GraphOps",
    "graph_conv1d",
    "graph_layers",
    "graph_pool1d",
    "graph_recurrent",
    "graph_updates",
    "graph_windows",
    "is_aligned",
    "learning_rates",
    "load_npy",
    "window_positions",
]

# The byte alignment TensorFlow requires of a buffer it shares rather than copies (Eigen's
# EIGEN_MAX_ALIGN_BYTES); numpy aligns its own allocations to 16 bytes only.
ALIGNMENT = 64


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an :data:`ALIGNMENT` boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def is_aligned(array: np.ndarray) -> bool:
    """Whether a framework can share ``array``'s buffer: C-contiguous, aligned, writeable."""
    return bool(array.flags.c_contiguous and array.flags.writeable and array.ctypes.data % ALIGNMENT == 0)


def load_npy(path: str) -> np.ndarray:
    """A ``.npy`` file read straight into an :func:`aligned_empty` array, so that every
    backend can share it without a copy (``np.load`` allocates 16-byte aligned arrays)."""
    fmt = np.lib.format
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    with open(path, "rb") as f:
        version = fmt.read_magic(f)
        shape, fortran, dtype = readers[version](f) if version in readers else ((), True, None)
        if fortran or dtype is None or dtype.hasobject:
            f.seek(0)
            return np.ascontiguousarray(np.load(f))
        out = aligned_empty(shape, dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        done = 0
        while done < len(view):
            got = f.readinto(view[done:])
            if not got:
                raise ValueError(f"{path} holds {done} of the {len(view)} bytes its header declares")
            done += got
    return out


def batch_order(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Index batches of one epoch: a permutation derived from (seed, epoch), cut in order.

    The last batch keeps the remainder (it may be smaller than ``batch_size``).
    """
    perm = np.random.default_rng([int(seed), int(epoch), 104729]).permutation(n).astype(np.int64)
    return [perm[i : i + batch_size] for i in range(0, n, batch_size)]


def epoch_batch_sizes(n: int, batch_size: int) -> list[int]:
    """The distinct batch sizes of :func:`batch_order`'s epochs: the full one, and the
    remainder's if there is one (what a warm-up runs, so that no first-use cost of a shape
    lands in a timed epoch)."""
    full = min(n, batch_size)
    return [full] + ([n % batch_size] if n > batch_size and n % batch_size else [])


def learning_rates(config: dict, epoch: int, first_iteration: int, n_batches: int) -> np.ndarray:
    """The learning rate of each batch of ``epoch`` under the configured schedule."""
    lr = float(config["learning_rate"])
    schedule = config.get("lr_schedule", "constant")
    t = np.arange(first_iteration, first_iteration + n_batches, dtype=np.float64)
    if schedule == "inv":
        rates = lr * (1.0 + float(config["lr_gamma"]) * t) ** (-float(config["lr_power"]))
    elif schedule == "step":
        rates = np.full(n_batches, lr * float(config["lr_gamma"]) ** (epoch // int(config["lr_step_epochs"])))
    else:
        rates = np.full(n_batches, lr)
    return rates.astype(np.float32)


def dense_rows_chw_to_hwc(weight: np.ndarray, chw: tuple[int, ...]) -> np.ndarray:
    """Reorder a dense weight's input rows from (C, H, W) flatten order to (H, W, C); a
    (C, L) map likewise from (C, L) to (L, C)."""
    k = len(chw)
    order = (*range(1, k), 0, k)
    return weight.reshape(*chw, -1).transpose(order).reshape(int(np.prod(chw)), -1)


def dense_rows_hwc_to_chw(weight: np.ndarray, chw: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`dense_rows_chw_to_hwc`."""
    k = len(chw)
    order = (k - 1, *range(k - 1), k)
    return weight.reshape(*chw[1:], chw[0], -1).transpose(order).reshape(int(np.prod(chw)), -1)


def graph_updates(kind, params, grads, lr, decay, momentum, shared, sqr, sqrt) -> list[tuple]:
    """Symbolic optimizer updates for Theano-style graphs (Theano and PyTensor share this API).

    PyTorch's definitions, as every backend: ``sgd``; ``momentum`` (heavy ball, no dampening);
    ``adam`` (betas 0.9 / 0.999, eps 1e-8); L2 ``decay`` added to each gradient. ``shared``,
    ``sqr`` and ``sqrt`` are the framework's own functions.
    """
    decay = np.float32(decay)
    updates: list[tuple] = []
    if kind == "adam":
        step = shared(np.float32(0.0), name="adam_t")
        t = step + np.float32(1.0)
        updates.append((step, t))
        correction1 = np.float32(1.0) - np.float32(0.9) ** t
        correction2 = np.float32(1.0) - np.float32(0.999) ** t
    for p, g in zip(params, grads, strict=True):
        if decay:
            g = g + decay * p
        if kind == "sgd":
            updates.append((p, p - lr * g))
        elif kind == "momentum":
            buf = shared(np.zeros_like(p.get_value()), name=f"{p.name}_buf")
            new_buf = np.float32(momentum) * buf + g
            updates += [(buf, new_buf), (p, p - lr * new_buf)]
        else:
            m = shared(np.zeros_like(p.get_value()), name=f"{p.name}_m")
            v = shared(np.zeros_like(p.get_value()), name=f"{p.name}_v")
            new_m = np.float32(0.9) * m + np.float32(0.1) * g
            new_v = np.float32(0.999) * v + np.float32(0.001) * sqr(g)
            denom = sqrt(new_v / correction2) + np.float32(1e-8)
            updates += [(m, new_m), (v, new_v), (p, p - lr / correction1 * new_m / denom)]
    return updates


def graph_batch_norm(h, gamma, beta, running: list, train: bool, sqrt) -> tuple[Any, list[tuple]]:
    """Symbolic batch norm over axis 1 for Theano-style graphs, and its running statistics'
    updates (none in inference), as defined in ``dltune/models/_layers.py``.

    ``running`` holds the shared running mean and variance; ``sqrt`` is the framework's own.
    """
    axes = (0, *range(2, h.ndim))
    pattern = ("x", 0, *("x",) * (h.ndim - 2))
    updates: list[tuple] = []
    if train:
        mean = h.mean(axis=axes)
        centred = h - mean.dimshuffle(*pattern)
        var = (centred * centred).mean(axis=axes)
        m = np.float32(BATCH_NORM_MOMENTUM)
        updates = [(stat, (np.float32(1.0) - m) * stat + m * value)
                   for stat, value in zip(running, (mean, var), strict=True)]
    else:
        mean, var = running
        centred = h - mean.dimshuffle(*pattern)
    inv_std = np.float32(1.0) / sqrt(var + np.float32(BATCH_NORM_EPSILON))
    return centred * (gamma * inv_std).dimshuffle(*pattern) + beta.dimshuffle(*pattern), updates


def window_positions(spatial: tuple[int, ...], size: int, stride: int, out: tuple[int, ...]) -> np.ndarray:
    """Flat positions, in a map of shape ``spatial`` (L,) or (H, W), of every window's elements:
    window element first (row-major, as in a conv weight), then output position."""
    axes = [np.arange(size)[:, None] + stride * np.arange(o)[None, :] for o in out]  # (size, o)
    if len(axes) == 1:
        return axes[0].reshape(-1)
    rows, cols = axes
    return (rows[:, None, :, None] * spatial[1] + cols[None, :, None, :]).reshape(-1)


def graph_windows(x, spatial: tuple[int, ...], size: int, stride: int, out: tuple[int, ...]):
    """The windows of ``x`` (N, C, *spatial) for Theano-style graphs: (size**d, *out, N, C).

    One gather of constant positions (``AdvancedSubtensor1``, its gradient one
    ``AdvancedIncSubtensor1``): one compiled C module serves every window and every shape,
    where a strided slice per window element compiled a module per slice.
    """
    n, c = x.shape[0], x.shape[1]
    flat = x.reshape((n, c, int(np.prod(spatial)))).dimshuffle(2, 0, 1)
    picked = flat[window_positions(spatial, size, stride, out)]
    return picked.reshape((size ** len(spatial), *out, n, c))


def graph_conv1d(ops, x, w, b, layer: Conv1D, in_shape: tuple[int, ...]):
    """Cross-correlation of ``x`` (N, C, L) with ``w`` (F, C, k), plus ``b``, for Theano-style
    graphs (``ops``: ``theano.tensor`` or ``pytensor.tensor``): im2col and one matrix product."""
    c, length = in_shape
    f, out_len = layer.output_shape(in_shape)
    k = layer.kernel
    if layer.padding == "same":
        p = k // 2
        padded = ops.zeros((x.shape[0], c, length + 2 * p), dtype="float32")
        x = ops.set_subtensor(padded[:, :, p : p + length], x)
        length += 2 * p
    n = x.shape[0]
    windows = graph_windows(x, (length,), k, layer.stride, (out_len,))  # (k, OL, N, C)
    cols = windows.dimshuffle(2, 1, 3, 0).reshape((n * out_len, c * k))
    out = ops.dot(cols, w.reshape((f, c * k)).T)
    return out.reshape((n, out_len, f)).dimshuffle(0, 2, 1) + b.dimshuffle("x", 0, "x")


def graph_pool1d(ops, x, layer, in_shape: tuple[int, ...]):
    """1-D max or average pooling for Theano-style graphs; max pooling sends its gradient to
    each window's first maximum, as PyTorch, TensorFlow and MXNet do."""
    _, out_len = layer.output_shape(in_shape)
    windows = graph_windows(x, in_shape[1:], layer.size, layer.stride, (out_len,))  # (size, OL, N, C)
    if not isinstance(layer, MaxPool1D):
        return windows.mean(axis=0).dimshuffle(1, 2, 0)
    first = ops.argmax(windows, axis=0, keepdims=True)  # no gradient flows through the index
    positions = ops.arange(layer.size).reshape((-1, 1, 1, 1))
    return (windows * ops.eq(positions, first).astype("float32")).sum(axis=0).dimshuffle(1, 2, 0)


def _graph_sigmoid(ops, x):
    return np.float32(0.5) * (np.float32(1.0) + ops.tanh(np.float32(0.5) * x))  # as the numpy reference


def graph_recurrent(ops, scan, x, params: list, layer: RecurrentLayer):
    """dltune's LSTM or GRU (``dltune/models/_recurrent.py``) on ``x`` (N, F, T) for
    Theano-style graphs: the input projection of every step in one product, then ``scan`` (the
    framework's, returning the outputs only) over the steps' recurrent products."""
    u, steps = layer.units, x.dimshuffle(2, 0, 1)  # (T, N, F)
    kernel, recurrent, bias, *recurrent_bias = params
    flat = ops.dot(steps.reshape((-1, steps.shape[2])), kernel) + bias
    projected = flat.reshape((steps.shape[0], steps.shape[1], kernel.shape[1]))
    h0 = ops.zeros((x.shape[0], u), dtype="float32")

    def lstm_step(a, h, c, r_weight):
        z = a + ops.dot(h, r_weight)
        i, f = _graph_sigmoid(ops, z[:, :u]), _graph_sigmoid(ops, z[:, u : 2 * u])
        c = f * c + i * ops.tanh(z[:, 2 * u : 3 * u])
        return _graph_sigmoid(ops, z[:, 3 * u :]) * ops.tanh(c), c

    def gru_step(a, h, r_weight, r_bias):
        rec = ops.dot(h, r_weight) + r_bias
        r = _graph_sigmoid(ops, a[:, :u] + rec[:, :u])
        z = _graph_sigmoid(ops, a[:, u : 2 * u] + rec[:, u : 2 * u])
        n = ops.tanh(a[:, 2 * u :] + r * rec[:, 2 * u :])
        return (np.float32(1.0) - z) * n + z * h

    if isinstance(layer, LSTM):
        hs = scan(lstm_step, sequences=[projected], outputs_info=[h0, h0], non_sequences=[recurrent])[0]
    else:
        hs = scan(gru_step, sequences=[projected], outputs_info=[h0], non_sequences=[recurrent, *recurrent_bias])
    return hs.dimshuffle(1, 2, 0) if layer.return_sequences else hs[-1]


@dataclass(frozen=True)
class GraphOps:
    """What :func:`graph_layers` takes from a Theano-style framework: its tensor module
    (``theano.tensor`` or ``pytensor.tensor``), its ``scan`` (returning the outputs only), and
    the layers it builds its own way: ``conv2d(h, w, b, layer, in_shape)``,
    ``pool2d(h, layer, in_shape)`` (max and average) and the activations by name."""

    ops: Any
    scan: Callable[..., Any]
    conv2d: Callable[..., Any]
    pool2d: Callable[..., Any]
    activations: dict[str, Callable[[Any], Any]]


def graph_layers(g: GraphOps, layers: tuple, input_shape: tuple[int, ...], h: Any, tensors: Any, running: Any,
                 dropout: Callable[[Any, float], Any] | None, updates: list[tuple[Any, Any]]) -> Any:
    """``layers`` on ``h`` for Theano and PyTensor, taking parameters and running statistics
    from the iterators in order and adding the statistics' updates to ``updates``.

    ``dropout(h, keep)`` (the framework's random mask) turns training mode on (dropout, batch
    statistics); None builds the inference graph.
    """
    ops = g.ops
    for layer, shape in zip(layers, sequence_shapes(layers, input_shape)[:-1], strict=True):
        if isinstance(layer, Residual):
            body = graph_layers(g, layer.body, shape, h, tensors, running, dropout, updates)
            h = body + graph_layers(g, layer.shortcut, shape, h, tensors, running, dropout, updates)
        elif isinstance(layer, Conv2D):
            h = g.conv2d(h, next(tensors), next(tensors), layer, shape)
        elif isinstance(layer, (MaxPool2D, AvgPool2D)):
            h = g.pool2d(h, layer, shape)
        elif isinstance(layer, Embedding):
            # Token ids held as floats; (N, L, dim) rows to the channels-first (N, dim, L).
            h = next(tensors)[ops.cast(h, "int64")].dimshuffle(0, 2, 1)
        elif isinstance(layer, Conv1D):
            h = graph_conv1d(ops, h, next(tensors), next(tensors), layer, shape)
        elif isinstance(layer, (MaxPool1D, AvgPool1D)):
            h = graph_pool1d(ops, h, layer, shape)
        elif isinstance(layer, RecurrentLayer):
            h = graph_recurrent(ops, g.scan, h, [next(tensors) for _ in range(2 + layer.BIASES)], layer)
        elif isinstance(layer, GlobalAvgPool2D):
            h = h.mean(axis=(2, 3))
        elif isinstance(layer, BatchNorm):
            h, moved = graph_batch_norm(h, next(tensors), next(tensors), [next(running), next(running)],
                                        dropout is not None, ops.sqrt)
            updates += moved
        elif isinstance(layer, Flatten):
            h = h.flatten(2)
        elif isinstance(layer, Dense):
            h = ops.dot(h, next(tensors)) + next(tensors)
        elif isinstance(layer, Activation):
            h = g.activations[layer.function](h)
        elif isinstance(layer, Dropout):
            if dropout is not None and layer.rate > 0:
                h = dropout(h, 1.0 - layer.rate)
        else:
            raise TypeError(f"cannot build layer {layer.kind!r} as a graph")
    return h


class CompiledGraphTrainer:
    """The Trainer methods Theano and PyTensor share once ``compile()`` has set
    ``_train_fn(idx, lr) -> loss`` and ``_predict_fn(x) -> labels`` over shared ``params``.

    A mixin for :class:`dltune.backends._base.Trainer` subclasses (this module imports no
    framework, so both the legacy and the main interpreter can load it).
    """

    predict_chunk = 1024

    def _warm_up(self) -> None:
        """The end of ``compile()``: call the compiled functions once on each batch size the
        epochs use and on a prediction chunk (some ops finish compiling, load their C module
        or allocate on first call), then put every shared value back as it was built: weights,
        optimizer state, running statistics and the random stream."""
        data = (self.x_train, self.y_train)
        saved = [(s, s.get_value()) for s in self._train_fn.get_shared() if all(s is not d for d in data)]
        n = self.y_train.get_value(borrow=True).shape[0]
        for size in epoch_batch_sizes(n, int(self.config["batch_size"])):
            self._train_fn(np.arange(size, dtype=np.int64), np.float32(0.0))
        self._predict_fn(self.x_test[: self.predict_chunk])
        for shared, value in saved:
            shared.set_value(value)

    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        if self._train_fn is None:
            self.compile()
        step = self._train_fn
        total = 0.0
        for idx, lr in zip(batches, lrs.astype(np.float32), strict=True):
            total += float(step(np.asarray(idx, dtype=np.int64), lr)) * len(idx)
        return total / sum(len(b) for b in batches)

    def predict(self) -> np.ndarray:
        if self._predict_fn is None:
            self.compile()
        n, chunk = len(self.x_test), self.predict_chunk
        parts = [self._predict_fn(self.x_test[i : i + chunk]) for i in range(0, n, chunk)]
        return np.concatenate(parts).astype(np.int64)

    def get_params(self) -> list[np.ndarray]:
        return [np.array(p.get_value(borrow=False)) for p in self.params]

    def get_state(self) -> list[np.ndarray]:
        return [np.array(a.get_value(borrow=False)) for a in self.state]

    def count_params(self) -> int:
        return int(sum(p.get_value(borrow=True).size for p in self.params))
