"""numpy backend: the Trainer protocol in plain numpy, the reference the other backends match.

It needs no framework, so tuning, surrogate and runtime code can be tested anywhere, and it
defines the shared semantics in readable form: canonical layouts (NCHW, dense weights
``(in, out)``), mean softmax cross-entropy, PyTorch's optimizer definitions (SGD; heavy-ball
momentum without dampening; Adam with betas 0.9 / 0.999 and eps 1e-8), and L2 weight decay
added to the gradient. Convolutions use im2col; correctness comes before speed.

Worker-side module: imports only the standard library, numpy and (optionally) threadpoolctl.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dltune.backends._base import Trainer
from dltune.models._spec import (
    Activation,
    AvgPool2D,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    MaxPool2D,
    ModelSpec,
)

__all__ = ["NumpyTrainer", "TRAINER", "forward", "loss_and_grads"]

_PREDICT_CHUNK = 1024


def _windows(x: np.ndarray, size: int, stride: int) -> np.ndarray:
    """(N, C, OH, OW, size, size) strided view of every pooling / convolution window."""
    view = np.lib.stride_tricks.sliding_window_view(x, (size, size), axis=(2, 3))
    return view[:, :, ::stride, ::stride]


def _scatter_windows(grad_windows: np.ndarray, shape: tuple[int, ...], stride: int) -> np.ndarray:
    """Adjoint of :func:`_windows`: add each window's gradient back onto the input grid."""
    n, c, oh, ow, k, _ = grad_windows.shape
    dx = np.zeros(shape, dtype=grad_windows.dtype)
    for i in range(k):
        for j in range(k):
            dx[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride] += grad_windows[
                :, :, :, :, i, j
            ]
    return dx


def _conv_forward(layer: Conv2D, x: np.ndarray, w: np.ndarray, b: np.ndarray):
    k, s = layer.kernel, layer.stride
    if layer.padding == "same":
        p = k // 2
        x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = _windows(x, k, s)  # (N, C, OH, OW, k, k)
    n, c, oh, ow = win.shape[:4]
    cols = np.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(n * oh * ow, c * k * k)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2), (cols, x.shape, (n, c, oh, ow))


def _conv_backward(layer: Conv2D, cache, w: np.ndarray, dout: np.ndarray):
    cols, padded_shape, (n, c, oh, ow) = cache
    k, s = layer.kernel, layer.stride
    d2 = dout.transpose(0, 2, 3, 1).reshape(n * oh * ow, -1)
    dw = (d2.T @ cols).reshape(w.shape)
    db = d2.sum(axis=0)
    dcols = (d2 @ w.reshape(w.shape[0], -1)).reshape(n, oh, ow, c, k, k).transpose(0, 3, 1, 2, 4, 5)
    dx = _scatter_windows(dcols, padded_shape, s)
    if layer.padding == "same":
        p = k // 2
        dx = dx[:, :, p : padded_shape[2] - p, p : padded_shape[3] - p]
    return dx, dw, db


def _pool_forward(layer: MaxPool2D | AvgPool2D, x: np.ndarray):
    win = _windows(x, layer.size, layer.stride)
    if isinstance(layer, AvgPool2D):
        return win.mean(axis=(4, 5)), x.shape
    flat = win.reshape(*win.shape[:4], -1)
    arg = flat.argmax(axis=-1)
    return np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0], (x.shape, arg)


def _pool_backward(layer: MaxPool2D | AvgPool2D, cache, dout: np.ndarray) -> np.ndarray:
    k = layer.size
    if isinstance(layer, AvgPool2D):
        grad = np.broadcast_to((dout / (k * k))[..., None, None], (*dout.shape, k, k))
        return _scatter_windows(grad, cache, layer.stride)
    shape, arg = cache
    onehot = (arg[..., None] == np.arange(k * k)).reshape(*arg.shape, k, k)
    return _scatter_windows(onehot * dout[..., None, None], shape, layer.stride)


def _activation(function: str, x: np.ndarray) -> np.ndarray:
    if function == "relu":
        return np.maximum(x, 0)
    if function == "tanh":
        return np.tanh(x)
    return 0.5 * (1 + np.tanh(0.5 * x))  # the logistic function, without overflow


def _activation_grad(function: str, y: np.ndarray, dout: np.ndarray) -> np.ndarray:
    """Gradient through the activation, from its output ``y``."""
    if function == "relu":
        return dout * (y > 0)
    if function == "tanh":
        return dout * (1 - y * y)
    return dout * y * (1 - y)


def forward(
    spec: ModelSpec,
    params: list[np.ndarray],
    x: np.ndarray,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, list[Any]]:
    """Logits for ``x`` (NCHW) and the per-layer caches backpropagation needs.

    ``rng`` switches dropout on (training mode); without it dropout is the identity.
    """
    caches: list[Any] = []
    p = 0
    for layer in spec.layers:
        if isinstance(layer, Conv2D):
            x, cache = _conv_forward(layer, x, params[p], params[p + 1])
            p += 2
        elif isinstance(layer, Dense):
            cache = x
            x = x @ params[p] + params[p + 1]
            p += 2
        elif isinstance(layer, (MaxPool2D, AvgPool2D)):
            x, cache = _pool_forward(layer, x)
        elif isinstance(layer, Flatten):
            cache = x.shape
            x = x.reshape(x.shape[0], -1)
        elif isinstance(layer, Activation):
            x = _activation(layer.function, x)
            cache = x
        elif isinstance(layer, Dropout):
            cache = None
            if rng is not None and layer.rate > 0:
                keep = 1.0 - layer.rate
                cache = (rng.random(x.shape) < keep).astype(x.dtype) / np.float32(keep)
                x = x * cache
        else:
            raise TypeError(f"numpy backend cannot run layer {layer.kind!r}")
        caches.append(cache)
    return x, caches


def _backward(
    spec: ModelSpec, params: list[np.ndarray], caches: list[Any], dlogits: np.ndarray
) -> list[np.ndarray]:
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    p = len(params)
    d = dlogits
    for layer, cache in zip(reversed(spec.layers), reversed(caches), strict=True):
        if isinstance(layer, Conv2D):
            p -= 2
            d, grads[p], grads[p + 1] = _conv_backward(layer, cache, params[p], d)
        elif isinstance(layer, Dense):
            p -= 2
            grads[p] = cache.T @ d
            grads[p + 1] = d.sum(axis=0)
            d = d @ params[p].T
        elif isinstance(layer, (MaxPool2D, AvgPool2D)):
            d = _pool_backward(layer, cache, d)
        elif isinstance(layer, Flatten):
            d = d.reshape(cache)
        elif isinstance(layer, Activation):
            d = _activation_grad(layer.function, cache, d)
        elif isinstance(layer, Dropout) and cache is not None:
            d = d * cache
    return grads


def loss_and_grads(
    spec: ModelSpec,
    params: list[np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator | None = None,
) -> tuple[float, list[np.ndarray]]:
    """Mean softmax cross-entropy of the batch and its gradient for every parameter."""
    logits, caches = forward(spec, params, x, rng)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    log_probs = shifted - log_z
    n = len(y)
    loss = float(-log_probs[np.arange(n), y].mean())
    dlogits = np.exp(log_probs)
    dlogits[np.arange(n), y] -= 1.0
    dlogits /= n
    return loss, _backward(spec, params, caches, dlogits)


class NumpyTrainer(Trainer):
    """Reference trainer in float32 numpy; BLAS threads are its only parallelism."""

    name = "numpy"
    SUPPORTS_GPU = False
    _limits: Any = None

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        n = threads.get("intra_op") or threads.get("blas")
        if n:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:
                return  # the worker's OPENBLAS/OMP variables already set the count
            cls._limits = threadpool_limits(limits=int(n), user_api="blas")

    @classmethod
    def framework_version(cls) -> str:
        return np.__version__

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            blas = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
            return {"intra_op": int(blas) if blas else None, "inter_op": 1}
        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        return {
            "intra_op": max((p["num_threads"] for p in pools), default=1),
            "inter_op": 1,
            "blas": [f"{p['internal_api']} {p.get('version')}" for p in pools],
        }

    def build(self, params: list[np.ndarray]) -> None:
        if self.config.get("device") == "cuda":
            raise ValueError("The numpy backend runs on the CPU only; use device='cpu'.")
        shapes = self.spec.param_shapes()
        if [tuple(p.shape) for p in params] != [tuple(s) for s in shapes]:
            raise ValueError(f"numpy backend: parameter shapes {[p.shape for p in params]} != {shapes}")
        self.params = [np.array(p, dtype=np.float32) for p in params]
        cfg = self.config
        self.kind = cfg["optimizer"]
        self.decay = np.float32(cfg.get("weight_decay", 0.0))
        self.mu = np.float32(cfg.get("momentum", 0.0))
        self.slots = [np.zeros_like(p) for p in self.params]
        self.slots2 = [np.zeros_like(p) for p in self.params] if self.kind == "adam" else []
        self.steps = 0
        self.rng = np.random.default_rng([int(cfg["seed"]), 31337])

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        self.x_train = np.ascontiguousarray(x_train, dtype=np.float32)
        self.y_train = np.ascontiguousarray(y_train, dtype=np.int64)
        self.x_test = np.ascontiguousarray(x_test, dtype=np.float32)

    def _apply(self, grads: list[np.ndarray], lr: np.float32) -> None:
        self.steps += 1
        if self.kind == "adam":
            correction1 = 1.0 - 0.9**self.steps
            correction2 = 1.0 - 0.999**self.steps
            step_size = np.float32(lr / correction1)
            root2 = np.float32(np.sqrt(correction2))
        for i, (w, g) in enumerate(zip(self.params, grads, strict=True)):
            if self.decay:
                g = g + self.decay * w
            if self.kind == "sgd":
                w -= lr * g
            elif self.kind == "momentum":
                buf = self.slots[i]
                buf *= self.mu
                buf += g
                w -= lr * buf
            else:
                m, v = self.slots[i], self.slots2[i]
                m *= np.float32(0.9)
                m += np.float32(0.1) * g
                v *= np.float32(0.999)
                v += np.float32(0.001) * g * g
                w -= step_size * m / (np.sqrt(v) / root2 + np.float32(1e-8))

    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        total = 0.0
        for idx, lr in zip(batches, lrs, strict=True):
            loss, grads = loss_and_grads(
                self.spec, self.params, self.x_train[idx], self.y_train[idx], self.rng
            )
            self._apply(grads, np.float32(lr))
            total += loss * len(idx)
        return total / sum(len(b) for b in batches)

    def predict(self) -> np.ndarray:
        parts = [
            forward(self.spec, self.params, self.x_test[i : i + _PREDICT_CHUNK])[0].argmax(axis=1)
            for i in range(0, len(self.x_test), _PREDICT_CHUNK)
        ]
        return np.concatenate(parts).astype(np.int64)

    def get_params(self) -> list[np.ndarray]:
        return [p.copy() for p in self.params]

    def count_params(self) -> int:
        return int(sum(p.size for p in self.params))


TRAINER = NumpyTrainer
