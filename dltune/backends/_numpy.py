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
from dltune.backends._numpy_recurrent import recurrent_backward, recurrent_forward
from dltune.models._recurrent import RecurrentLayer
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
    ModelSpec,
    Residual,
    sequence_shapes,
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


def _windows1d(x: np.ndarray, size: int, stride: int) -> np.ndarray:
    """(N, C, OL, size) strided view of every 1-D window of ``x`` (N, C, L)."""
    return np.lib.stride_tricks.sliding_window_view(x, size, axis=2)[:, :, ::stride]


def _scatter_windows1d(grad_windows: np.ndarray, shape: tuple[int, ...], stride: int) -> np.ndarray:
    """Adjoint of :func:`_windows1d`."""
    out_len, k = grad_windows.shape[2:]
    dx = np.zeros(shape, dtype=grad_windows.dtype)
    for i in range(k):
        dx[:, :, i : i + stride * out_len : stride] += grad_windows[:, :, :, i]
    return dx


def _conv1d_forward(layer: Conv1D, x: np.ndarray, w: np.ndarray, b: np.ndarray):
    k = layer.kernel
    if layer.padding == "same":
        x = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2)))
    win = _windows1d(x, k, layer.stride)  # (N, C, OL, k)
    n, c, out_len = win.shape[:3]
    cols = np.ascontiguousarray(win.transpose(0, 2, 1, 3)).reshape(n * out_len, c * k)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, out_len, -1).transpose(0, 2, 1), (cols, x.shape, (n, c, out_len))


def _conv1d_backward(layer: Conv1D, cache, w: np.ndarray, dout: np.ndarray):
    cols, padded_shape, (n, c, out_len) = cache
    k = layer.kernel
    d2 = dout.transpose(0, 2, 1).reshape(n * out_len, -1)
    dw = (d2.T @ cols).reshape(w.shape)
    dcols = (d2 @ w.reshape(w.shape[0], -1)).reshape(n, out_len, c, k).transpose(0, 2, 1, 3)
    dx = _scatter_windows1d(dcols, padded_shape, layer.stride)
    if layer.padding == "same":
        dx = dx[:, :, k // 2 : padded_shape[2] - k // 2]
    return dx, dw, d2.sum(axis=0)


def _pool1d_forward(layer: MaxPool1D | AvgPool1D, x: np.ndarray):
    win = _windows1d(x, layer.size, layer.stride)
    if isinstance(layer, AvgPool1D):
        return win.mean(axis=3), x.shape
    arg = win.argmax(axis=3)
    return np.take_along_axis(win, arg[..., None], axis=3)[..., 0], (x.shape, arg)


def _pool1d_backward(layer: MaxPool1D | AvgPool1D, cache, dout: np.ndarray) -> np.ndarray:
    k = layer.size
    if isinstance(layer, AvgPool1D):
        return _scatter_windows1d(np.broadcast_to((dout / k)[..., None], (*dout.shape, k)), cache, layer.stride)
    shape, arg = cache
    return _scatter_windows1d((arg[..., None] == np.arange(k)) * dout[..., None], shape, layer.stride)


def _batch_norm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                        state: list[np.ndarray], train: bool):
    """Normalise over every axis but the channels (axis 1); in training, with the batch's
    statistics, moving ``state`` (running mean, running variance) in place."""
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if train:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        m = np.float32(BATCH_NORM_MOMENTUM)
        state[0] *= 1 - m
        state[0] += m * mean
        state[1] *= 1 - m
        state[1] += m * var
    else:
        mean, var = state
    inv_std = (1.0 / np.sqrt(var + np.float32(BATCH_NORM_EPSILON))).astype(x.dtype)
    xhat = (x - mean.reshape(shape)) * inv_std.reshape(shape)
    return xhat * gamma.reshape(shape) + beta.reshape(shape), (xhat, inv_std, train)


def _batch_norm_backward(cache, gamma: np.ndarray, dout: np.ndarray):
    xhat, inv_std, train = cache
    axes = (0, *range(2, dout.ndim))
    shape = (1, -1) + (1,) * (dout.ndim - 2)
    dgamma, dbeta = (dout * xhat).sum(axis=axes), dout.sum(axis=axes)
    scale = (gamma * inv_std).reshape(shape)
    if not train:
        return dout * scale, dgamma, dbeta
    n = dout.size // dout.shape[1]
    # The batch's mean and variance depend on every sample: the textbook batch-norm gradient.
    dx = scale * (dout - (dbeta / n).reshape(shape) - xhat * (dgamma / n).reshape(shape))
    return dx, dgamma, dbeta


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
    state: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, list[Any]]:
    """Logits for ``x`` (NCHW) and the per-layer caches backpropagation needs.

    ``rng`` switches training mode on: dropout draws, and batch norm uses the batch's
    statistics and moves the running ones in ``state`` in place. Without it dropout is the
    identity and batch norm uses ``state``. ``state`` defaults to :meth:`ModelSpec.init_state`.
    """
    if state is None:
        state = spec.init_state()
    return _forward_layers(spec.layers, params, x, rng, state)


def _counts(layers: tuple, shape: tuple[int, ...]) -> tuple[int, int]:
    """How many parameter and state arrays ``layers`` hold on an input of ``shape``."""
    pairs = list(zip(layers, sequence_shapes(layers, shape)[:-1], strict=True))
    return sum(len(la.param_shapes(sh)) for la, sh in pairs), sum(len(la.state_shapes(sh)) for la, sh in pairs)


def _forward_layers(layers: tuple, params: list[np.ndarray], x: np.ndarray,
                    rng: np.random.Generator | None, state: list[np.ndarray]) -> tuple[np.ndarray, list[Any]]:
    caches: list[Any] = []
    p = s = 0
    for layer in layers:
        if isinstance(layer, Residual):
            shape = x.shape[1:]
            (n_body, s_body), (n, n_state) = _counts(layer.body, shape), _counts((layer,), shape)
            body, c_body = _forward_layers(layer.body, params[p : p + n_body], x, rng, state[s : s + s_body])
            short, c_short = _forward_layers(layer.shortcut, params[p + n_body : p + n], x, rng,
                                             state[s + s_body : s + n_state])
            x, cache = body + short, (c_body, c_short, n_body, n)
            p += n
            s += n_state
        elif isinstance(layer, Conv2D):
            x, cache = _conv_forward(layer, x, params[p], params[p + 1])
            p += 2
        elif isinstance(layer, Dense):
            cache = x
            x = x @ params[p] + params[p + 1]
            p += 2
        elif isinstance(layer, (MaxPool2D, AvgPool2D)):
            x, cache = _pool_forward(layer, x)
        elif isinstance(layer, Conv1D):
            x, cache = _conv1d_forward(layer, x, params[p], params[p + 1])
            p += 2
        elif isinstance(layer, Embedding):
            cache = x.astype(np.int64)
            x = params[p][cache].transpose(0, 2, 1)
            p += 1
        elif isinstance(layer, (MaxPool1D, AvgPool1D)):
            x, cache = _pool1d_forward(layer, x)
        elif isinstance(layer, RecurrentLayer):
            n = 2 + layer.BIASES  # the kernels, then the biases
            x, cache = recurrent_forward(layer, x, params[p : p + n])
            p += n
        elif isinstance(layer, GlobalAvgPool2D):
            cache = x.shape
            x = x.mean(axis=(2, 3))
        elif isinstance(layer, BatchNorm):
            x, cache = _batch_norm_forward(x, params[p], params[p + 1], state[s : s + 2], rng is not None)
            p += 2
            s += 2
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
    return _backward_layers(spec.layers, params, caches, dlogits)[0]


def _backward_layers(
    layers: tuple, params: list[np.ndarray], caches: list[Any], d: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray]:
    """The gradients of ``layers``' parameters and of their input, from their output's ``d``."""
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    p = len(params)
    for layer, cache in zip(reversed(layers), reversed(caches), strict=True):
        if isinstance(layer, Residual):
            c_body, c_short, n_body, n = cache
            p -= n
            g_body, d_body = _backward_layers(layer.body, params[p : p + n_body], c_body, d)
            g_short, d_short = _backward_layers(layer.shortcut, params[p + n_body : p + n], c_short, d)
            grads[p : p + n] = g_body + g_short
            d = d_body + d_short
        elif isinstance(layer, Conv2D):
            p -= 2
            d, grads[p], grads[p + 1] = _conv_backward(layer, cache, params[p], d)
        elif isinstance(layer, Dense):
            p -= 2
            grads[p] = cache.T @ d
            grads[p + 1] = d.sum(axis=0)
            d = d @ params[p].T
        elif isinstance(layer, (MaxPool2D, AvgPool2D)):
            d = _pool_backward(layer, cache, d)
        elif isinstance(layer, Conv1D):
            p -= 2
            d, grads[p], grads[p + 1] = _conv1d_backward(layer, cache, params[p], d)
        elif isinstance(layer, Embedding):
            p -= 1
            grads[p] = np.zeros_like(params[p])
            np.add.at(grads[p], cache, d.transpose(0, 2, 1))
        elif isinstance(layer, (MaxPool1D, AvgPool1D)):
            d = _pool1d_backward(layer, cache, d)
        elif isinstance(layer, RecurrentLayer):
            n = 2 + layer.BIASES
            p -= n
            d, grads[p : p + n] = recurrent_backward(layer, cache, params[p : p + n], d)
        elif isinstance(layer, GlobalAvgPool2D):
            n, c, h, w = cache
            d = np.broadcast_to((d / np.float32(h * w))[:, :, None, None], cache).copy()
        elif isinstance(layer, BatchNorm):
            p -= 2
            d, grads[p], grads[p + 1] = _batch_norm_backward(cache, params[p], d)
        elif isinstance(layer, Flatten):
            d = d.reshape(cache)
        elif isinstance(layer, Activation):
            d = _activation_grad(layer.function, cache, d)
        elif isinstance(layer, Dropout) and cache is not None:
            d = d * cache
    return grads, d


def loss_and_grads(
    spec: ModelSpec,
    params: list[np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator | None = None,
    state: list[np.ndarray] | None = None,
) -> tuple[float, list[np.ndarray]]:
    """Mean softmax cross-entropy of the batch and its gradient for every parameter
    (``rng`` and ``state`` as in :func:`forward`)."""
    logits, caches = forward(spec, params, x, rng, state)
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
        self.state = self.spec.init_state()
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
                self.spec, self.params, self.x_train[idx], self.y_train[idx], self.rng, self.state
            )
            self._apply(grads, np.float32(lr))
            total += loss * len(idx)
        return total / sum(len(b) for b in batches)

    def predict(self) -> np.ndarray:
        parts = [
            forward(self.spec, self.params, self.x_test[i : i + _PREDICT_CHUNK], None, self.state)[0].argmax(axis=1)
            for i in range(0, len(self.x_test), _PREDICT_CHUNK)
        ]
        return np.concatenate(parts).astype(np.int64)

    def get_params(self) -> list[np.ndarray]:
        return [p.copy() for p in self.params]

    def get_state(self) -> list[np.ndarray]:
        return [a.copy() for a in self.state]

    def count_params(self) -> int:
        return int(sum(p.size for p in self.params))


TRAINER = NumpyTrainer
