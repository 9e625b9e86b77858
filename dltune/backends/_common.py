"""What every backend shares: batch order, learning-rate schedule, layout conversions."""

from __future__ import annotations

import numpy as np

__all__ = [
    "ALIGNMENT",
    "aligned_empty",
    "batch_order",
    "dense_rows_chw_to_hwc",
    "dense_rows_hwc_to_chw",
    "CompiledGraphTrainer",
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


def dense_rows_chw_to_hwc(weight: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """Reorder a dense weight's input rows from (C, H, W) flatten order to (H, W, C)."""
    c, h, w = chw
    return weight.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)


def dense_rows_hwc_to_chw(weight: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """Inverse of :func:`dense_rows_chw_to_hwc`."""
    c, h, w = chw
    return weight.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)


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

    def count_params(self) -> int:
        return int(sum(p.get_value(borrow=True).size for p in self.params))
