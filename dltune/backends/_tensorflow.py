"""TensorFlow backend: a Keras 3 model on TensorFlow, trained one epoch per tf.function call.

The function is traced once per model and optimizer in a worker process (:class:`_Graph`):
a later run of the same model re-assigns its initial weights and state instead.

The update rules are written out (PyTorch's definitions of SGD, momentum and Adam, L2 weight
decay added to the gradient) so that every backend optimises the same way; Keras' own
optimizers differ in where epsilon and the momentum's learning rate sit.
"""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from dltune.backends._base import Trainer  # noqa: E402
from dltune.backends._common import (  # noqa: E402
    aligned_empty,
    dense_rows_chw_to_hwc,
    dense_rows_hwc_to_chw,
    epoch_batch_sizes,
    is_aligned,
)
from dltune.models._spec import (  # noqa: E402
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

__all__ = ["TensorFlowTrainer", "TRAINER", "build_keras_model", "flattened_chw", "host_tensor",
           "keras_input_shape", "takes_nchw"]


# Test samples per prediction call.
_PREDICT_CHUNK = 1024


def takes_nchw(spec: ModelSpec) -> bool:
    """Whether the model flattens its input before any convolution or pooling: then it takes
    the samples NCHW, as dltune holds them, and its first dense layer's rows are in the
    canonical (C, H, W) order already."""
    for layer in spec.layers:
        if isinstance(layer, Flatten):
            return True
        if not isinstance(layer, (Activation, Dropout)):
            return False
    return True


def keras_input_shape(spec: ModelSpec) -> tuple[int, ...]:
    """One sample's shape as the Keras model takes it: NCHW (NCL) where :func:`takes_nchw`,
    else channels last, NHWC (NLC): TensorFlow's CPU convolutions need it."""
    shape = tuple(spec.input_shape)
    return shape if takes_nchw(spec) else (*shape[1:], shape[0])


def flattened_chw(spec: ModelSpec) -> tuple[int, ...] | None:
    """The (C, H, W) or (C, L) shape whose channels-last flattening the first dense layer's
    rows follow in the Keras model (None: they follow the canonical order)."""
    return None if takes_nchw(spec) else spec.flatten_input_shape()


class _Residual(keras.layers.Layer):
    """``body(x) + shortcut(x)`` over two lists of Keras layers (an empty shortcut: ``x``)."""

    def __init__(self, body: list[Any], shortcut: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body, self.shortcut = body, shortcut

    def call(self, x: Any, training: Any = None) -> Any:
        h, short = x, x
        for layer in self.body:
            h = layer(h, training=training)
        for layer in self.shortcut:
            short = layer(short, training=training)
        return h + short


def build_keras_model(spec: ModelSpec) -> keras.Sequential:
    """The spec as a Keras model on :func:`keras_input_shape` inputs."""
    return keras.Sequential([keras.Input(keras_input_shape(spec)), *_keras_layers(spec.layers)])


def _keras_layers(spec_layers: tuple) -> list[Any]:
    layers: list[Any] = []
    for layer in spec_layers:
        if isinstance(layer, Residual):
            layers.append(_Residual(_keras_layers(layer.body), _keras_layers(layer.shortcut)))
        elif isinstance(layer, Conv2D):
            layers.append(keras.layers.Conv2D(layer.filters, layer.kernel, layer.stride, layer.padding))
        elif isinstance(layer, MaxPool2D):
            layers.append(keras.layers.MaxPooling2D(layer.size, layer.stride))
        elif isinstance(layer, AvgPool2D):
            layers.append(keras.layers.AveragePooling2D(layer.size, layer.stride))
        elif isinstance(layer, Embedding):
            # (N, L, dim): channels last, as the convolutions here take maps.
            layers.append(keras.layers.Embedding(layer.vocab_size, layer.dim))
        elif isinstance(layer, Conv1D):
            layers.append(keras.layers.Conv1D(layer.filters, layer.kernel, layer.stride, layer.padding))
        elif isinstance(layer, LSTM):
            # Keras' weights are the canonical ones: (in, out) kernels, gates i, f, c, o, one bias.
            # Not unrolled (LSTM and GRU): no faster on the CPU, and the loop keeps cuDNN on a GPU.
            layers.append(keras.layers.LSTM(layer.units, return_sequences=layer.return_sequences))
        elif isinstance(layer, GRU):
            # reset_after=True: the reset gate after the recurrent product (see _gru_weights).
            layers.append(keras.layers.GRU(layer.units, return_sequences=layer.return_sequences, reset_after=True))
        elif isinstance(layer, MaxPool1D):
            layers.append(keras.layers.MaxPooling1D(layer.size, layer.stride))
        elif isinstance(layer, AvgPool1D):
            layers.append(keras.layers.AveragePooling1D(layer.size, layer.stride))
        elif isinstance(layer, GlobalAvgPool2D):
            layers.append(keras.layers.GlobalAveragePooling2D())
        elif isinstance(layer, BatchNorm):
            # Channels last: a map reaches it NHWC (takes_nchw is False before a Flatten).
            # Keras' momentum is the running statistics' share: 1 - dltune's.
            layers.append(keras.layers.BatchNormalization(
                axis=-1, momentum=1.0 - BATCH_NORM_MOMENTUM, epsilon=BATCH_NORM_EPSILON))
        elif isinstance(layer, Flatten):
            layers.append(keras.layers.Flatten())
        elif isinstance(layer, Dense):
            layers.append(keras.layers.Dense(layer.units))
        elif isinstance(layer, Activation):
            layers.append(keras.layers.Activation(layer.function))
        elif isinstance(layer, Dropout):
            layers.append(keras.layers.Dropout(layer.rate))
        else:
            raise TypeError(f"tensorflow backend cannot build layer {layer.kind!r}")
    return layers


def host_tensor(array: np.ndarray) -> tf.Tensor:
    """A CPU tensor over ``array``'s own buffer where TensorFlow can share it (C-contiguous,
    writeable, 64-byte aligned: :func:`is_aligned`), else over an aligned copy made once.

    ``tf.constant`` holds two copies of an array while it converts one (586 MB of data: 1,204
    MB more, 618 MB once it settles), and NHWC from NCHW was one more numpy copy before that:
    TensorFlow's peak memory grew by three to four times the data set, against one for the
    other backends (``benchmarks/tf_data_memory.py``).
    """
    if not is_aligned(array):
        shared = aligned_empty(array.shape, array.dtype)
        np.copyto(shared, array)
        array = shared
    try:
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    except (AttributeError, TypeError, ValueError, BufferError):  # no DLPack: a copy after all
        return tf.constant(array)


def _swap_first_gates(a: np.ndarray) -> np.ndarray:
    """A GRU weight's or bias' gate blocks (last axis) from r, z, n to Keras' z, r, n, and back."""
    r, z, n = np.split(a, 3, axis=-1)
    return np.concatenate([z, r, n], axis=-1)


def _gru_weights(weights: list[np.ndarray]) -> list[np.ndarray]:
    """A canonical GRU's kernel, recurrent kernel, input and recurrent bias as Keras holds them."""
    kernel, recurrent, input_bias, recurrent_bias = (_swap_first_gates(w) for w in weights)
    return [kernel, recurrent, np.stack([input_bias, recurrent_bias])]


def _leaf_layers(model: Any) -> list[Any]:
    """The layers in order, a residual's body then its shortcut in its place."""
    result: list[Any] = []
    for layer in model.layers if isinstance(model, keras.Sequential) else model:
        result += _leaf_layers(layer.body + layer.shortcut) if isinstance(layer, _Residual) else [layer]
    return result


def _param_layers(model: Any) -> list[Any]:
    """The layers holding weights, in the canonical order (a residual's body, then its shortcut)."""
    return [layer for layer in _leaf_layers(model) if layer.weights]


class _Graph:
    """A Keras model, its optimizer state, and its training epoch and prediction, traced once.

    Kept per process (:func:`_graph`) for each model spec, device, optimizer kind and whether
    weight decay is on: a later run of the same model in a warm worker re-assigns the initial
    weights and state instead of tracing again. Data, learning rates, momentum and decay are
    arguments or variables, so nothing of one run is baked into the trace; the batch shape is
    dynamic, so every batch size shares it. One trainer uses a graph at a time.
    """

    def __init__(self, spec: ModelSpec, device: str, kind: str, decayed: bool) -> None:
        self.kind, self.decayed = kind, decayed
        with tf.device(device):
            self.model = build_keras_model(spec)
            self.variables = list(self.model.trainable_variables)
            self.slots = [tf.Variable(tf.zeros(v.shape)) for v in self.variables]
            self.slots2 = [tf.Variable(tf.zeros(v.shape)) for v in self.variables] if kind == "adam" else []
            self.step_count, self.loss_sum = tf.Variable(0.0), tf.Variable(0.0)
            self.decay, self.mu = tf.Variable(0.0), tf.Variable(0.0)
        self.seed_states = [layer.seed_generator.state for layer in _leaf_layers(self.model)
                            if getattr(layer, "seed_generator", None) is not None]
        x_spec = tf.TensorSpec([None, *keras_input_shape(spec)], tf.float32)
        index, rates = tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.float32)
        # The whole epoch is one graph (a loop over the batches): no Python, no tensor
        # creation and no function dispatch per step.
        self.epoch = tf.function(self._epoch, input_signature=[x_spec, index, index, index, rates])
        self.infer = tf.function(lambda x: tf.argmax(self.model(x, training=False), axis=1),
                                 input_signature=[x_spec])

    def reset(self, decay: float, mu: float, seed: int) -> None:
        """Optimizer state to zero, this run's decay and momentum, and each dropout's random
        stream to its start for ``seed`` (the weights are the caller's to assign)."""
        for slot in self.slots + self.slots2:
            slot.assign(tf.zeros(slot.shape))
        self.step_count.assign(0.0)
        self.decay.assign(decay)
        self.mu.assign(mu)
        for i, state in enumerate(self.seed_states):
            # Each dropout layer's own stream, derived from the run's seed alone.
            start = int(np.random.default_rng([seed, i, 7919]).integers(1, 2**31))
            state.assign(np.array([start, 0], dtype=np.int64))

    def _apply(self, grads: list[tf.Tensor], lr: tf.Tensor) -> None:
        if self.kind == "adam":
            self.step_count.assign_add(1.0)
            t = self.step_count
            correction1 = 1.0 - tf.pow(0.9, t)
            correction2 = 1.0 - tf.pow(0.999, t)
        for i, (var, grad) in enumerate(zip(self.variables, grads, strict=False)):
            # An embedding's gradient comes as IndexedSlices; every backend updates densely.
            grad = tf.convert_to_tensor(grad)
            if self.decayed:
                grad = grad + self.decay * var.value
            if self.kind == "sgd":
                var.assign_sub(lr * grad)
            elif self.kind == "momentum":
                buf = self.slots[i]
                buf.assign(self.mu * buf + grad)
                var.assign_sub(lr * buf)
            else:
                m, v = self.slots[i], self.slots2[i]
                m.assign(0.9 * m + 0.1 * grad)
                v.assign(0.999 * v + 0.001 * tf.square(grad))
                denom = tf.sqrt(v / correction2) + 1e-8
                var.assign_sub(lr / correction1 * m / denom)

    def _step(self, x: tf.Tensor, y: tf.Tensor, idx: tf.Tensor, lr: tf.Tensor) -> tf.Tensor:
        xb = tf.gather(x, idx)
        yb = tf.gather(y, idx)
        with tf.GradientTape() as tape:
            logits = self.model(xb, training=True)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=logits)
            )
        self._apply(tape.gradient(loss, self.variables), lr)
        self.loss_sum.assign_add(loss * tf.cast(tf.shape(idx)[0], tf.float32))
        return loss

    def _epoch(self, x: tf.Tensor, y: tf.Tensor, order: tf.Tensor, bounds: tf.Tensor, lrs: tf.Tensor) -> tf.Tensor:
        """Batch ``i`` is ``order[bounds[i]:bounds[i + 1]]``, trained with rate ``lrs[i]``."""
        self.loss_sum.assign(0.0)
        for i in tf.range(tf.shape(lrs)[0]):
            self._step(x, y, order[bounds[i] : bounds[i + 1]], lrs[i])
        return self.loss_sum.read_value()


# Graphs kept in this process, the most recently used last; a few models' worth of variables.
_GRAPHS: dict[tuple[Any, ...], _Graph] = {}
_MAX_GRAPHS = 4


def _graph(spec: ModelSpec, device: str, kind: str, decayed: bool) -> _Graph:
    """The process's :class:`_Graph` for this model and optimizer, built on first use."""
    key = (json.dumps(spec.to_dict(), sort_keys=True), device, kind, decayed)
    graph = _GRAPHS.pop(key, None)
    if graph is None:
        graph = _Graph(spec, device, kind, decayed)
        while len(_GRAPHS) >= _MAX_GRAPHS:
            _GRAPHS.pop(next(iter(_GRAPHS)))
    _GRAPHS[key] = graph
    return graph


class TensorFlowTrainer(Trainer):
    name = "tensorflow"
    SUPPORTS_GPU = True

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        if threads.get("intra_op"):
            tf.config.threading.set_intra_op_parallelism_threads(int(threads["intra_op"]))
        if threads.get("inter_op"):
            tf.config.threading.set_inter_op_parallelism_threads(int(threads["inter_op"]))

    @classmethod
    def framework_version(cls) -> str:
        return f"{tf.__version__} (keras {keras.__version__})"

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        # 0 means "TensorFlow's default", which is one thread per usable core.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        intra = tf.config.threading.get_intra_op_parallelism_threads() or cores
        inter = tf.config.threading.get_inter_op_parallelism_threads() or cores
        return {"intra_op": intra, "inter_op": inter}

    def build(self, params: list[np.ndarray]) -> None:
        keras.utils.set_random_seed(int(self.config["seed"]))
        device = "/GPU:0" if self.config.get("device") == "cuda" else "/CPU:0"
        self.device = device
        if device == "/GPU:0":
            if not tf.config.list_physical_devices("GPU"):
                raise ValueError(
                    f"The tensorflow backend was given device='cuda', but this TensorFlow "
                    f"({tf.__version__}) sees no GPU; use device='cpu', or TensorFlow with "
                    "CUDA (`pip install tensorflow[and-cuda]`) on a machine with an NVIDIA GPU."
                )
            # Full float32, as on the CPU and in every other backend (see the torch backend).
            tf.config.experimental.enable_tensor_float_32_execution(False)
        cfg = self.config
        self.kind = cfg["optimizer"]
        self.decay = float(cfg.get("weight_decay", 0.0))
        self.mu = float(cfg.get("momentum", 0.0))
        self.graph = _graph(self.spec, device, self.kind, self.decay != 0.0)
        self.model = self.graph.model
        self._initial = params
        self._assign(params)

    def _assign(self, params: list[np.ndarray]) -> None:
        """The weights ``params`` and the initial running statistics, optimizer state and
        random streams: the state every run starts from."""
        flat_chw = flattened_chw(self.spec)
        tensors, states = iter(params), iter(self.spec.init_state())
        first_dense = True
        for layer in _param_layers(self.model):
            if isinstance(layer, keras.layers.GRU):
                layer.set_weights(_gru_weights([next(tensors) for _ in range(4)]))
                continue
            w, *rest = (next(tensors) for _ in layer.trainable_weights)
            if w.ndim == 4:
                w = w.transpose(2, 3, 1, 0)
            elif w.ndim == 3:
                w = w.transpose(2, 1, 0)
            elif isinstance(layer, keras.layers.Dense) and first_dense:
                if flat_chw is not None:
                    w = dense_rows_chw_to_hwc(w, flat_chw)
                first_dense = False
            running = [next(states) for _ in layer.non_trainable_weights]
            layer.set_weights([w, *rest, *running])
        self.graph.reset(self.decay, self.mu, int(self.config["seed"]))

    @property
    def x_layout(self) -> tuple[int, ...]:
        """The shape of one sample as the model takes it (:func:`keras_input_shape`)."""
        return keras_input_shape(self.spec)

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        # Tensors over the worker's own NCHW arrays (host_tensor): as they are where the model
        # takes NCHW or there is one channel (the same buffer either way); otherwise one NHWC
        # copy, transposed once here (a per-batch transpose in the graph was measured 15 %
        # slower on a 3-channel MLP, 2 % on LeNet).
        nhwc = self.x_layout != tuple(self.spec.input_shape)
        tensors = [host_tensor(np.moveaxis(x, 1, -1) if nhwc else x) for x in (x_train, x_test)]
        tensors.insert(1, host_tensor(y_train.astype(np.int64, copy=False)))
        if not self.device.startswith("/CPU"):
            with tf.device(self.device):
                tensors = [tf.identity(t) for t in tensors]
        self.x_train, self.y_train, self.x_test = tensors

    def compile(self) -> None:
        """Trace (once per :class:`_Graph`), then warm up: the epoch on each batch size the
        epochs use and the prediction on each chunk size, after which the weights and state
        are put back as they were built. Every run warms up: the first epoch call after the
        state is assigned is slower again (about 80 ms on LeNet, 2 cores), traced or not."""
        graph = self.graph
        graph.epoch.get_concrete_function()
        graph.infer.get_concrete_function()
        for size in epoch_batch_sizes(int(self.x_test.shape[0]), _PREDICT_CHUNK):
            graph.infer(self.x_test[:size])
        train = epoch_batch_sizes(int(self.y_train.shape[0]), int(self.config["batch_size"]))
        graph.epoch(self.x_train, self.y_train, np.concatenate([np.arange(s) for s in train]),
                    np.cumsum([0, *train], dtype=np.int64), np.zeros(len(train), dtype=np.float32))
        self._assign(self._initial)

    def train_epoch(self, batches: list[np.ndarray], lrs: np.ndarray) -> float:
        bounds = np.cumsum([0] + [len(b) for b in batches], dtype=np.int64)
        order = np.concatenate(batches).astype(np.int64, copy=False)
        total = self.graph.epoch(self.x_train, self.y_train, order, bounds, np.asarray(lrs, dtype=np.float32))
        return float(total.numpy()) / int(bounds[-1])

    def predict(self) -> np.ndarray:
        n = int(self.x_test.shape[0])
        chunk = _PREDICT_CHUNK
        return np.concatenate([self.graph.infer(self.x_test[i : i + chunk]).numpy() for i in range(0, n, chunk)])

    def get_params(self) -> list[np.ndarray]:
        flat_chw = flattened_chw(self.spec)
        result: list[np.ndarray] = []
        first_dense = True
        for layer in _param_layers(self.model):
            w, *rest = (np.asarray(v) for v in layer.trainable_weights)
            if isinstance(layer, keras.layers.GRU):
                result += [_swap_first_gates(a) for a in (w, rest[0], *rest[1])]
                continue
            if w.ndim == 4:
                w = w.transpose(3, 2, 0, 1)
            elif w.ndim == 3:
                w = w.transpose(2, 1, 0)
            elif isinstance(layer, keras.layers.Dense) and first_dense:
                if flat_chw is not None:
                    w = dense_rows_hwc_to_chw(w, flat_chw)
                first_dense = False
            result += [np.ascontiguousarray(w), *rest]
        return result

    def get_state(self) -> list[np.ndarray]:
        return [np.asarray(v) for layer in _param_layers(self.model) for v in layer.non_trainable_weights]

    def count_params(self) -> int:
        # Trainable weights only: Keras' count_params() adds the running statistics.
        return int(sum(np.prod(v.shape) for v in self.model.trainable_weights))

    def device_peak_memory_mb(self) -> float | None:
        if self.device.startswith("/GPU"):
            return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        return None


TRAINER = TensorFlowTrainer
