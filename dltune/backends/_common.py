"""What every backend shares: batch order, learning-rate schedule, layout conversions."""

from __future__ import annotations

from typing import Any

import numpy as np

from dltune.models._spec import BATCH_NORM_EPSILON, BATCH_NORM_MOMENTUM, Conv1D, MaxPool1D

__all__ = [
    "ALIGNMENT",
    "aligned_empty",
    "batch_order",
    "dense_rows_chw_to_hwc",
    "dense_rows_hwc_to_chw",
    "CompiledGraphTrainer",
    "graph_batch_norm",
    "graph_conv1d",
    "graph_pool1d",
    "graph_updates",
    "is_aligned",
    "learning_rates",
    "load_npy",
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


def _graph_windows1d(ops, x, size: int, stride: int, out_len: int):
    """The ``size`` strided views of ``x`` (N, C, L), stacked: (N, C, size, out_len)."""
    return ops.stack([x[:, :, i : i + stride * (out_len - 1) + 1 : stride] for i in range(size)], axis=2)


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
    n = x.shape[0]
    cols = _graph_windows1d(ops, x, k, layer.stride, out_len).dimshuffle(0, 3, 1, 2).reshape((n * out_len, c * k))
    out = ops.dot(cols, w.reshape((f, c * k)).T)
    return out.reshape((n, out_len, f)).dimshuffle(0, 2, 1) + b.dimshuffle("x", 0, "x")


def graph_pool1d(ops, x, layer, in_shape: tuple[int, ...]):
    """1-D max or average pooling for Theano-style graphs; max pooling sends its gradient to
    each window's first maximum, as PyTorch, TensorFlow and MXNet do."""
    _, out_len = layer.output_shape(in_shape)
    windows = _graph_windows1d(ops, x, layer.size, layer.stride, out_len)  # (N, C, size, OL)
    if not isinstance(layer, MaxPool1D):
        return windows.mean(axis=2)
    first = ops.argmax(windows, axis=2, keepdims=True)  # no gradient flows through the index
    positions = ops.arange(layer.size).reshape((1, 1, -1, 1))
    return (windows * ops.eq(positions, first).astype("float32")).sum(axis=2)


class CompiledGraphTrainer:
    """The Trainer methods Theano and PyTensor share once ``compile()`` has set
    ``_train_fn(idx, lr) -> loss`` and ``_predict_fn(x) -> labels`` over shared ``params``.

    A mixin for :class:`dltune.backends._base.Trainer` subclasses (this module imports no
    framework, so both the legacy and the main interpreter can load it).
    """

    predict_chunk = 1024

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
