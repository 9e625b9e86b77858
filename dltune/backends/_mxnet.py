"""MXNet backend: a hybridized Gluon ``HybridSequential``, run in the legacy runtime.

MXNet reads its thread settings (``OMP_NUM_THREADS``, ``MXNET_CPU_WORKER_NTHREADS``,
``MXNET_ENGINE_TYPE``) once, when it is imported, so the parent puts them in the worker's
environment (see :func:`dltune.envs.mxnet_env`) and this module only imports MXNet.

The update rules are PyTorch's (see :class:`dltune.config.TrainConfig`): plain SGD and Adam go
through MXNet's fused update operators with the arguments that make them equal to PyTorch's
(Adam's bias corrections folded into the learning rate and epsilon); momentum is written out,
because MXNet's ``sgd_mom_update`` keeps ``-lr * buffer`` and so differs once the learning
rate changes between batches.
"""

from __future__ import annotations

import math
import os
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from dltune.backends._base import Trainer
from dltune.backends._common import epoch_batch_sizes
from dltune.models._spec import (
    BATCH_NORM_EPSILON,
    BATCH_NORM_MOMENTUM,
    GRU,
    LSTM,
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

__all__ = ["MXNetTrainer", "TRAINER", "build_gluon_model"]

# How many batches the Python loop may queue ahead of MXNet's asynchronous engine.
_MAX_QUEUED_BATCHES = 16
_PREDICT_CHUNK = 1024


class _Residual(gluon.HybridBlock):
    """``body(x) + shortcut(x)`` (an empty shortcut passes ``x`` through)."""

    def __init__(self, body: tuple, shortcut: tuple, shape: tuple[int, ...]) -> None:
        super().__init__()
        with self.name_scope():
            self.body = _gluon_sequence(body, shape)
            self.shortcut = _gluon_sequence(shortcut, shape)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.body(x) + self.shortcut(x)


class _Recurrent(gluon.HybridBlock):
    """dltune's LSTM or GRU (models/_recurrent.py) on a channels-first (N, F, T) map: Gluon's
    fused layer, whose gate orders (LSTM i, f, c, o; GRU r, z, n) and reset placement are dltune's."""

    def __init__(self, layer: LSTM | GRU, features: int) -> None:
        super().__init__()
        self.return_sequences = layer.return_sequences
        with self.name_scope():
            kind = gluon.rnn.LSTM if isinstance(layer, LSTM) else gluon.rnn.GRU
            self.rnn = kind(layer.units, layout="NTC", input_size=features)
        if isinstance(layer, LSTM):
            # dltune's LSTM has one bias: Gluon's second (initialised to zeros) only adds to it.
            self.rnn.l0_h2h_bias.grad_req = "null"

    def trained_params(self) -> list[Any]:
        """The kernels ((out, in): the canonical ones transposed), then the trained biases."""
        rnn = self.rnn
        return [p for p in (rnn.l0_i2h_weight, rnn.l0_h2h_weight, rnn.l0_i2h_bias, rnn.l0_h2h_bias)
                if p.grad_req != "null"]

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        out = self.rnn(F.transpose(x, axes=(0, 2, 1)))  # (N, T, units)
        if self.return_sequences:
            return F.transpose(out, axes=(0, 2, 1))
        return F.squeeze(F.slice_axis(out, axis=1, begin=-1, end=None), axis=1)


def build_gluon_model(spec: ModelSpec) -> gluon.nn.HybridSequential:
    """The spec as a Gluon network on NCHW / NCW inputs (canonical flatten order is native)."""
    return _gluon_sequence(spec.layers, tuple(spec.input_shape))


def _gluon_sequence(layers: tuple, input_shape: tuple[int, ...]) -> gluon.nn.HybridSequential:
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        for layer, shape in zip(layers, sequence_shapes(layers, input_shape)[:-1], strict=True):
            if isinstance(layer, Residual):
                net.add(_Residual(layer.body, layer.shortcut, shape))
            elif isinstance(layer, Conv2D):
                pad = layer.kernel // 2 if layer.padding == "same" else 0
                net.add(
                    gluon.nn.Conv2D(
                        layer.filters, layer.kernel, strides=layer.stride, padding=pad,
                        in_channels=shape[0], layout="NCHW",
                    )
                )
            elif isinstance(layer, MaxPool2D):
                net.add(gluon.nn.MaxPool2D(layer.size, layer.stride))
            elif isinstance(layer, AvgPool2D):
                net.add(gluon.nn.AvgPool2D(layer.size, layer.stride))
            elif isinstance(layer, Embedding):
                # (N, L, dim) transposed to dltune's channels-first (N, dim, L).
                net.add(gluon.nn.Embedding(layer.vocab_size, layer.dim),
                        gluon.nn.HybridLambda(lambda F, x: F.transpose(x, axes=(0, 2, 1))))
            elif isinstance(layer, Conv1D):
                pad = layer.kernel // 2 if layer.padding == "same" else 0
                net.add(
                    gluon.nn.Conv1D(
                        layer.filters, layer.kernel, strides=layer.stride, padding=pad,
                        in_channels=shape[0], layout="NCW",
                    )
                )
            elif isinstance(layer, (LSTM, GRU)):
                net.add(_Recurrent(layer, shape[0]))
            elif isinstance(layer, MaxPool1D):
                net.add(gluon.nn.MaxPool1D(layer.size, layer.stride))
            elif isinstance(layer, AvgPool1D):
                net.add(gluon.nn.AvgPool1D(layer.size, layer.stride))
            elif isinstance(layer, GlobalAvgPool2D):
                net.add(gluon.nn.GlobalAvgPool2D(), gluon.nn.Flatten())  # (N, C, 1, 1) to (N, C)
            elif isinstance(layer, BatchNorm):
                # Gluon's momentum is the running statistics' share: 1 - dltune's. Its running
                # variance moves by the biased batch variance, as dltune's.
                net.add(gluon.nn.BatchNorm(axis=1, momentum=1.0 - BATCH_NORM_MOMENTUM,
                                           epsilon=BATCH_NORM_EPSILON, in_channels=shape[0]))
            elif isinstance(layer, Flatten):
                net.add(gluon.nn.Flatten())
            elif isinstance(layer, Dense):
                net.add(gluon.nn.Dense(layer.units, in_units=shape[0]))
            elif isinstance(layer, Activation):
                net.add(gluon.nn.Activation(layer.function))
            elif isinstance(layer, Dropout):
                net.add(gluon.nn.Dropout(layer.rate))
            else:
                raise TypeError(f"mxnet backend cannot build layer {layer.kind!r}")
    return net


def _leaf_blocks(net: gluon.nn.HybridSequential) -> list[Any]:
    """The blocks in the canonical order: a residual's body, then its shortcut."""
    result: list[Any] = []
    for b in net:
        result += _leaf_blocks(b.body) + _leaf_blocks(b.shortcut) if isinstance(b, _Residual) else [b]
    return result


def _param_blocks(net: gluon.nn.HybridSequential) -> list[Any]:
    return [b for b in _leaf_blocks(net) if isinstance(
        b, (gluon.nn.Conv2D, gluon.nn.Conv1D, gluon.nn.Dense, gluon.nn.BatchNorm, gluon.nn.Embedding, _Recurrent))]


def _running_stats(net: gluon.nn.HybridSequential) -> list[Any]:
    return [p for b in _leaf_blocks(net) if isinstance(b, gluon.nn.BatchNorm) for p in (b.running_mean, b.running_var)]

def _shared(array: np.ndarray, ctx: Any) -> Any:
    """An NDArray over ``array``'s memory on the CPU (a copy on a GPU context)."""
    shared = mx.nd.from_numpy(array, zero_copy=True)
    return shared if ctx == mx.cpu() else shared.as_in_context(ctx)


class MXNetTrainer(Trainer):
    name = "mxnet"
    SUPPORTS_GPU = False

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        # Every thread setting MXNet has is read at import from the environment the parent
        # built; nothing can be changed afterwards. Start the engine now so that its threads
        # exist (and are counted) before training.
        mx.nd.zeros((1,)).wait_to_read()

    @classmethod
    def framework_version(cls) -> str:
        return str(mx.__version__)

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        info: dict[str, Any] = {
            "engine": os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
            # The engine's CPU worker pool; MXNet's default is one thread.
            "engine_worker_threads": int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")),
            "inter_op": int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")),
            "mkldnn": bool(mx.runtime.Features().is_enabled("MKLDNN")),
        }
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            return info
        for pool in threadpool_info():
            path = pool.get("filepath", "")
            if pool["user_api"] == "openmp":
                # The OpenMP runtime MXNet's operators (and oneDNN) run on: intra-op threads.
                info["intra_op"] = pool["num_threads"]
                info["openmp_library"] = os.path.basename(path)
            elif pool["user_api"] == "blas" and os.sep + "mxnet" + os.sep in path:
                info["blas_threads"] = pool["num_threads"]
        return info

    def build(self, params: list[np.ndarray]) -> None:
        cfg = self.config
        if cfg.get("device") == "cuda":
            raise ValueError("The mxnet backend runs on the CPU only (the legacy wheel has no CUDA).")
        mx.random.seed(int(cfg["seed"]))
        self.ctx = mx.cpu()
        self.net = build_gluon_model(self.spec)
        self.net.initialize(ctx=self.ctx)
        self.params: list[Any] = []
        # Whether each parameter is a Dense or recurrent weight: (out, in), the canonical (in, out) transposed.
        self._transposed: list[bool] = []
        for block in _param_blocks(self.net):
            if isinstance(block, _Recurrent):
                weights = block.trained_params()
                self.params += weights
                self._transposed += [True, True] + [False] * (len(weights) - 2)
                continue
            if isinstance(block, gluon.nn.BatchNorm):
                weights = [block.gamma, block.beta]
            elif isinstance(block, gluon.nn.Embedding):
                weights = [block.weight]
            else:
                weights = [block.weight, block.bias]
            self.params += weights
            self._transposed += [isinstance(block, gluon.nn.Dense)] + [False] * (len(weights) - 1)
        for p, value, transposed in zip(self.params, params, self._transposed, strict=True):
            p.set_data(mx.nd.array(value.T if transposed else value, ctx=self.ctx))
        for stat, value in zip(_running_stats(self.net), self.spec.init_state(), strict=True):
            stat.set_data(mx.nd.array(value, ctx=self.ctx))
        self.net.hybridize(static_alloc=True)
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.kind = cfg["optimizer"]
        self.decay = float(cfg.get("weight_decay", 0.0))
        self.mu = float(cfg.get("momentum", 0.0))
        zeros = [mx.nd.zeros(p.shape, ctx=self.ctx) for p in self.params]
        self.slots = zeros if self.kind in ("momentum", "adam") else []
        self.slots2 = [mx.nd.zeros(p.shape, ctx=self.ctx) for p in self.params] if self.kind == "adam" else []
        self.steps = 0

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        # NDArrays over the worker's own arrays (``from_numpy(zero_copy=True)``, which marks them
        # read-only); ``mx.nd.array`` copied the data set (until 2026-12-05).
        self.x_train, self.x_test = (
            _shared(np.ascontiguousarray(x, dtype=np.float32), self.ctx) for x in (x_train, x_test))
        self.y_train = mx.nd.array(y_train, ctx=self.ctx, dtype=np.float32)

    def _forward_backward(self, idx: Any) -> Any:
        xb = mx.nd.take(self.x_train, idx)
        yb = mx.nd.take(self.y_train, idx)
        with autograd.record(train_mode=True):
            loss = self.loss_fn(self.net(xb), yb).mean()
        loss.backward()
        return loss

    def compile(self) -> None:
        # Build both cached graphs (training with gradients, inference) on the shapes of the
        # epochs' batches. Gradients are written but no update is applied, so the weights stay
        # as built. The training passes move the running statistics: they are put back afterwards.
        running = [(stat, stat.data().copy()) for stat in _running_stats(self.net)]
        for n in epoch_batch_sizes(int(self.x_train.shape[0]), int(self.config["batch_size"])):
            self._forward_backward(mx.nd.arange(n, ctx=self.ctx)).wait_to_read()
        self.net(self.x_test[:_PREDICT_CHUNK]).wait_to_read()
        for stat, value in running:
            stat.set_data(value)
        mx.nd.waitall()

    def _update(self, lr: float) -> None:
        decay = self.decay
        if self.kind == "sgd":
            for p in self.params:
                w = p.data()
                mx.nd.sgd_update(w, p.grad(), lr=lr, wd=decay, out=w)
        elif self.kind == "momentum":
            for p, buf in zip(self.params, self.slots, strict=True):
                w, g = p.data(), p.grad()
                buf *= self.mu
                buf += g
                if decay:
                    buf += decay * w
                w -= lr * buf
        else:
            self.steps += 1
            c1 = 1.0 - 0.9**self.steps
            c2 = math.sqrt(1.0 - 0.999**self.steps)
            # PyTorch: w -= lr / c1 * m / (sqrt(v) / c2 + eps); adam_update: w -= lr' * m / (sqrt(v) + eps').
            for p, m, v in zip(self.params, self.slots, self.slots2, strict=True):
                w = p.data()
                mx.nd.adam_update(
                    w, p.grad(), m, v, lr=lr * c2 / c1, beta1=0.9, beta2=0.999,
                    epsilon=1e-8 * c2, wd=decay, out=w,
                )

    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        order = mx.nd.array(np.concatenate(batches), ctx=self.ctx, dtype=np.int64)
        total = mx.nd.zeros((1,), ctx=self.ctx)
        start = 0
        for i, (batch, lr) in enumerate(zip(batches, lrs.tolist(), strict=True)):
            size = len(batch)
            loss = self._forward_backward(order[start : start + size])
            self._update(lr)
            total += loss * size
            start += size
            if (i + 1) % _MAX_QUEUED_BATCHES == 0:
                total.wait_to_read()
        result = float(total.asscalar()) / start
        mx.nd.waitall()
        return result

    def predict(self) -> np.ndarray:
        n = int(self.x_test.shape[0])
        parts = [
            self.net(self.x_test[i : i + _PREDICT_CHUNK]).argmax(axis=1).asnumpy()
            for i in range(0, n, _PREDICT_CHUNK)
        ]
        return np.concatenate(parts).astype(np.int64)

    def get_params(self) -> list[np.ndarray]:
        result = []
        for p, transposed in zip(self.params, self._transposed, strict=True):
            a = p.data().asnumpy()
            result.append(np.ascontiguousarray(a.T) if transposed else a)
        return result

    def get_state(self) -> list[np.ndarray]:
        return [stat.data().asnumpy() for stat in _running_stats(self.net)]

    def count_params(self) -> int:
        # Trainable parameters only: the running statistics have no gradient.
        return int(sum(p.data().size for p in self.net.collect_params().values() if p.grad_req != "null"))


TRAINER = MXNetTrainer
