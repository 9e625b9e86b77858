"""JAX backend: the spec as a pure function of its weights, differentiated by JAX, its optimizer
an optax transformation, one ``jax.jit`` training step compiled per batch shape.

Layouts are the canonical ones (NCHW, NCL, dense weights ``(in, out)``), so weights go in and
out unchanged. The optimizers are PyTorch's definitions, as in every backend: L2 weight decay
added to the gradient first (``optax.add_decayed_weights`` ahead of the rest of the chain), then
plain SGD, heavy-ball momentum without dampening (``optax.trace``) or Adam (betas 0.9 / 0.999,
eps 1e-8); the step is ``-learning_rate * update``, the rate passed to the compiled step per batch.

Threads: XLA's CPU client runs every operation on one intra-op pool (threads named
``tf_XLAEigen``; no separate inter-op pool), sized when the client starts (the first
computation) from ``PJRT_NPROC``, else from the usable cores (CPU affinity). ``XLA_FLAGS``'
``--xla_cpu_multi_thread_eigen=false`` and the OpenMP / MKL / OpenBLAS counts leave it as it is.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from dltune._paths import cache_dir
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
)

__all__ = ["JaxTrainer", "TRAINER", "forward", "optimizer"]

_PREDICT_CHUNK = 1024
_POOL_THREAD_NAME = "tf_XLAEigen"
_ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}
_CONV_DIMENSIONS = {2: ("NCH", "OIH", "NCH"), 3: ("NCHW", "OIHW", "NCHW")}


class _Pass:
    """One forward pass's inputs, consumed in the canonical order: each layer takes its
    parameters and running statistics in turn and appends its new statistics."""

    def __init__(self, params, state, key, train: bool) -> None:
        self.params, self.state = iter(params), iter(state)
        self.new_state: list[jax.Array] = []
        self.key, self.train, self.draws = key, train, 0

    def take(self, n: int) -> list[jax.Array]:
        return [next(self.params) for _ in range(n)]


def _conv(layer: Conv1D | Conv2D, x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    spatial = x.ndim - 2
    padding = [(layer.kernel // 2,) * 2] * spatial if layer.padding == "same" else "VALID"
    out = lax.conv_general_dilated(x, w, (layer.stride,) * spatial, padding,
                                   dimension_numbers=_CONV_DIMENSIONS[x.ndim - 1])
    return out + b.reshape(-1, *(1,) * spatial)


def _pool(layer, x: jax.Array) -> jax.Array:
    """Max or average pooling over the trailing 1 or 2 axes (valid windows)."""
    spatial = x.ndim - 2
    window, strides = (1, 1, *(layer.size,) * spatial), (1, 1, *(layer.stride,) * spatial)
    if isinstance(layer, (MaxPool1D, MaxPool2D)):
        return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, "VALID")
    return lax.reduce_window(x, 0.0, lax.add, window, strides, "VALID") / layer.size**spatial


def _batch_norm(x: jax.Array, gamma: jax.Array, beta: jax.Array, run: _Pass) -> jax.Array:
    axes = (0, *range(2, x.ndim))
    shape = (1, -1, *(1,) * (x.ndim - 2))
    running = [next(run.state), next(run.state)]
    if run.train:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        m = BATCH_NORM_MOMENTUM
        run.new_state += [(1 - m) * r + m * lax.stop_gradient(v) for r, v in zip(running, (mean, var), strict=True)]
    else:
        mean, var = running
        run.new_state += running
    scale = gamma * lax.rsqrt(var + BATCH_NORM_EPSILON)
    return (x - mean.reshape(shape)) * scale.reshape(shape) + beta.reshape(shape)


def _recurrent(layer: LSTM | GRU, x: jax.Array, params: list[jax.Array]) -> jax.Array:
    """LSTM or GRU over ``x`` (N, F, T) as defined in ``dltune/models/_recurrent.py``, with
    ``lax.scan`` over the steps from a zero state."""
    kernel, recurrent, bias, *rest = params
    inputs = jnp.einsum("nft,fg->tng", x, kernel) + bias  # every step's input part at once
    h0 = jnp.zeros((x.shape[0], layer.units), x.dtype)
    if isinstance(layer, LSTM):
        def step(carry, xt):
            h, c = carry
            i, f, g, o = jnp.split(xt + h @ recurrent, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        (last, _), every = lax.scan(step, (h0, h0), inputs)
    else:
        (recurrent_bias,) = rest

        def step(h, xt):
            xr, xz, xn = jnp.split(xt, 3, axis=-1)
            hr, hz, hn = jnp.split(h @ recurrent + recurrent_bias, 3, axis=-1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
            return h, h

        last, every = lax.scan(step, h0, inputs)
    return every.transpose(1, 2, 0) if layer.return_sequences else last


def _layers(layers: tuple, x: jax.Array, run: _Pass) -> jax.Array:
    for layer in layers:
        if isinstance(layer, Residual):
            x = _layers(layer.body, x, run) + _layers(layer.shortcut, x, run)
        elif isinstance(layer, (Conv1D, Conv2D)):
            x = _conv(layer, x, *run.take(2))
        elif isinstance(layer, (MaxPool1D, MaxPool2D, AvgPool1D, AvgPool2D)):
            x = _pool(layer, x)
        elif isinstance(layer, Dense):
            w, b = run.take(2)
            x = x @ w + b
        elif isinstance(layer, Embedding):
            (table,) = run.take(1)
            x = jnp.take(table, x.astype(jnp.int32), axis=0).transpose(0, 2, 1)
        elif isinstance(layer, (LSTM, GRU)):
            x = _recurrent(layer, x, run.take(2 + layer.BIASES))
        elif isinstance(layer, GlobalAvgPool2D):
            x = x.mean(axis=(2, 3))
        elif isinstance(layer, BatchNorm):
            x = _batch_norm(x, *run.take(2), run)
        elif isinstance(layer, Flatten):
            x = x.reshape(x.shape[0], -1)
        elif isinstance(layer, Activation):
            x = _ACTIVATIONS[layer.function](x)
        elif isinstance(layer, Dropout):
            if run.train and layer.rate > 0:
                keep = 1.0 - layer.rate
                run.draws += 1
                mask = jax.random.bernoulli(jax.random.fold_in(run.key, run.draws), keep, x.shape)
                x = jnp.where(mask, x / keep, 0.0)
        else:
            raise TypeError(f"jax backend cannot run layer {layer.kind!r}")
    return x


def forward(spec: ModelSpec, params, state, x: jax.Array, key=None, train: bool = False):
    """Logits for ``x`` and the new running statistics: in training (``train``) dropout draws
    from ``key`` and batch norm uses the batch's statistics; else the running ones in ``state``."""
    run = _Pass(params, state, key, train)
    return _layers(spec.layers, x, run), run.new_state


def optimizer(kind: str, weight_decay: float = 0.0, momentum: float = 0.0) -> optax.GradientTransformation:
    """The update direction of optimizer ``kind`` ("sgd", "momentum" or "adam"), before the
    learning rate scales it. Weight decay and momentum live in the optimizer's state
    (``optax.inject_hyperparams``), so one compiled step serves every value of them."""

    def direction(weight_decay, momentum):
        then = {"sgd": optax.identity, "momentum": lambda: optax.trace(decay=momentum, nesterov=False),
                "adam": lambda: optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-8)}[kind]()
        return optax.chain(optax.add_decayed_weights(weight_decay), then)

    # Python floats: inject_hyperparams holds numbers as state, anything else (np.float32) fixed.
    return optax.inject_hyperparams(direction)(weight_decay=float(weight_decay), momentum=float(momentum))


@functools.lru_cache(maxsize=8)
def _programs(spec: ModelSpec, kind: str) -> tuple[Any, Any]:
    """The jitted training step and prediction of ``spec`` with optimizer ``kind``, shared by
    this process's trainers: ``jax.jit`` compiles each once per input shape and device."""
    transform = optimizer(kind)

    def train_step(params, opt_state, state, key, x, y, idx, lr):
        key, draw = jax.random.split(key)

        def loss_of(p):
            logits, new_state = forward(spec, p, state, x[idx], draw, train=True)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y[idx]).mean(), new_state

        (loss, state), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
        updates, opt_state = transform.update(grads, opt_state, params)
        params = [p - lr * u for p, u in zip(params, updates, strict=True)]
        return params, opt_state, state, key, loss

    def predict(params, state, x):
        return forward(spec, params, state, x)[0].argmax(axis=1)

    return jax.jit(train_step, donate_argnums=(0, 1, 2)), jax.jit(predict)


def _pool_threads() -> int | None:
    """How many threads XLA's intra-op pool holds now (Linux: counted by name); else None."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    count = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().strip() == _POOL_THREAD_NAME
        except OSError:
            continue  # the thread ended meanwhile
    return count


class JaxTrainer(Trainer):
    name = "jax"
    SUPPORTS_GPU = True

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        # Read once, when the CPU client starts: the first computation, after this import.
        if threads.get("intra_op"):
            os.environ["PJRT_NPROC"] = str(int(threads["intra_op"]))
        # A GPU run allocates what it uses (its peak is then the model's), not 75 % up front.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        # Compiled programs are kept across processes, as PyTensor's C modules are, however
        # quickly they compiled (JAX's default keeps only those over a second).
        jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

    @classmethod
    def framework_version(cls) -> str:
        return f"{jax.__version__} (optax {optax.__version__})"

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        return {"intra_op": _pool_threads(), "inter_op": None,
                "pjrt_nproc": os.environ.get("PJRT_NPROC")}

    def build(self, params: list[np.ndarray]) -> None:
        cfg = self.config
        if cfg.get("device") == "cuda":
            try:
                self.device = jax.devices("gpu")[0]
            except RuntimeError as exc:
                raise ValueError(
                    f"The jax backend was given device='cuda', but this JAX ({jax.__version__}) "
                    "sees no GPU; use device='cpu', or JAX with CUDA (`pip install "
                    "'jax[cuda12]'`) on a machine with an NVIDIA GPU."
                ) from exc
            # Full float32, as on the CPU and in every other backend (see the torch backend).
            jax.config.update("jax_default_matmul_precision", "highest")
        else:
            self.device = jax.devices("cpu")[0]
        shapes = [tuple(s) for s in self.spec.param_shapes()]
        if [tuple(p.shape) for p in params] != shapes:
            raise ValueError(f"jax backend: parameter shapes {[p.shape for p in params]} != {shapes}")
        put = lambda a: jax.device_put(np.asarray(a, dtype=np.float32), self.device)  # noqa: E731
        self.params = [put(p) for p in params]
        self.state = [put(a) for a in self.spec.init_state()]
        transform = optimizer(cfg["optimizer"], float(cfg.get("weight_decay", 0.0)), float(cfg.get("momentum", 0.0)))
        self.opt_state = jax.device_put(transform.init(self.params), self.device)
        self.key = jax.device_put(jax.random.key(int(cfg["seed"])), self.device)
        self._train_step, self._predict = _programs(self.spec, cfg["optimizer"])

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        put = lambda a, dtype: jax.device_put(np.ascontiguousarray(a, dtype=dtype), self.device)  # noqa: E731
        self.x_train, self.y_train = put(x_train, np.float32), put(y_train, np.int32)
        self.n_train = len(y_train)
        self.test_chunks = [put(x_test[i : i + _PREDICT_CHUNK], np.float32)
                            for i in range(0, len(x_test), _PREDICT_CHUNK)]

    def compile(self) -> None:
        """Compile the training step for the batch size and the epoch's last, smaller batch,
        and the prediction for the test chunks, by running them on copies of the weights and
        optimizer state (whose results are dropped: training starts from the same ones)."""
        done = []
        for size in epoch_batch_sizes(self.n_train, int(self.config["batch_size"])):
            copies = jax.tree.map(jnp.copy, (self.params, self.opt_state, self.state))
            done.append(self._train_step(*copies, self.key, self.x_train, self.y_train,
                                         np.zeros(size, np.int32), np.float32(0.0)))
        done += [self._predict(self.params, self.state, chunk) for chunk in self.test_chunks]
        jax.block_until_ready(done)

    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        step, losses = self._train_step, []
        for idx, lr in zip(batches, lrs.astype(np.float32), strict=True):
            # The step donates (frees) its weights and states: only those it returns are live.
            self.params, self.opt_state, self.state, self.key, loss = step(
                self.params, self.opt_state, self.state, self.key, self.x_train, self.y_train,
                np.asarray(idx, np.int32), lr)
            losses.append(loss)
        sizes = np.array([len(b) for b in batches], dtype=np.float64)
        return float(np.dot(np.asarray(jax.device_get(losses), dtype=np.float64), sizes) / sizes.sum())

    def predict(self) -> np.ndarray:
        labels = [self._predict(self.params, self.state, c) for c in self.test_chunks]
        return np.concatenate(jax.device_get(labels)).astype(np.int64)

    def get_params(self) -> list[np.ndarray]:
        return [np.array(p) for p in self.params]

    def get_state(self) -> list[np.ndarray]:
        return [np.array(a) for a in self.state]

    def count_params(self) -> int:
        return int(sum(p.size for p in jax.tree.leaves(self.params)))

    def device_peak_memory_mb(self) -> float | None:
        if self.device.platform == "cpu":
            return None
        stats = self.device.memory_stats() or {}
        return stats["peak_bytes_in_use"] / 2**20 if "peak_bytes_in_use" in stats else None


TRAINER = JaxTrainer
