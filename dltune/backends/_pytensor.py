"""PyTensor backend (Theano's maintained successor), in the main environment.

PyTensor 3 has no ``conv2d`` or pooling op, so both are built from its tensor primitives:
a convolution is im2col (the kernel's ``k * k`` windows of the padded input, gathered at once:
:func:`~dltune.backends._common.graph_windows`) followed by one matrix product; pooling reduces
the same windows. Max pooling sends
its gradient to the first maximum of each window, as PyTorch, TensorFlow and MXNet do (a plain
``max`` would share it among tied inputs). Functions are compiled in
:meth:`PyTensorTrainer.compile`, timed apart from training, in the mode
:func:`dltune.envs.pytensor_flags` sets (C ops, compile cache under dltune's cache dir).

Update rules are PyTorch's (see :class:`dltune.config.TrainConfig`), written as updates.
"""

from __future__ import annotations

import os
from typing import Any

if "PYTENSOR_FLAGS" not in os.environ:
    from dltune.envs._flags import pytensor_flags

    os.environ["PYTENSOR_FLAGS"] = pytensor_flags()

import warnings  # noqa: E402

import numpy as np  # noqa: E402

with warnings.catch_warnings():
    # Without a linkable BLAS, PyTensor warns on import; its C matrix products then call
    # numpy's (numpy's OpenBLAS), which is what dltune wants here.
    warnings.simplefilter("ignore", UserWarning)
    import pytensor  # noqa: E402
    import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import get_default_mode  # noqa: E402
from pytensor.tensor.special import log_softmax  # noqa: E402

from dltune.backends._base import Trainer  # noqa: E402
from dltune.backends._common import (  # noqa: E402
    CompiledGraphTrainer,
    GraphOps,
    graph_layers,
    graph_updates,
    graph_windows,
)
from dltune.models._spec import AvgPool2D, Conv2D, MaxPool2D, ModelSpec  # noqa: E402

__all__ = ["PyTensorTrainer", "TRAINER", "build_graph", "conv2d", "pool2d"]

_FLOAT = "float32"


def conv2d(x: Any, w: Any, b: Any, layer: Conv2D, in_shape: tuple[int, ...]) -> Any:
    """Cross-correlation of ``x`` (N, C, H, W) with ``w`` (F, C, k, k), plus ``b``: im2col + matmul."""
    c, h, width = in_shape
    f, oh, ow = layer.output_shape(in_shape)
    k = layer.kernel
    if layer.padding == "same":
        p = k // 2
        padded = pt.zeros((x.shape[0], c, h + 2 * p, width + 2 * p), dtype=_FLOAT)
        x = pt.set_subtensor(padded[:, :, p : p + h, p : p + width], x)
        h, width = h + 2 * p, width + 2 * p
    cols = graph_windows(x, (h, width), k, layer.stride, (oh, ow))  # (k*k, oh, ow, N, C)
    n = x.shape[0]
    cols = cols.dimshuffle(3, 1, 2, 4, 0).reshape((n * oh * ow, c * k * k))
    out = pt.dot(cols, w.reshape((f, c * k * k)).T)  # (N*oh*ow, F)
    return out.reshape((n, oh, ow, f)).dimshuffle(0, 3, 1, 2) + b.dimshuffle("x", 0, "x", "x")


def pool2d(x: Any, layer: MaxPool2D | AvgPool2D, in_shape: tuple[int, ...]) -> Any:
    """Max or average pooling without padding (output size rounds down)."""
    _, oh, ow = layer.output_shape(in_shape)
    windows = graph_windows(x, in_shape[1:], layer.size, layer.stride, (oh, ow))  # (s*s, oh, ow, N, C)
    if isinstance(layer, AvgPool2D):
        return windows.mean(axis=0).dimshuffle(2, 3, 0, 1)
    first = pt.argmax(windows, axis=0, keepdims=True)  # no gradient flows through the index
    positions = pt.arange(layer.size * layer.size).reshape((-1, 1, 1, 1, 1))
    return (windows * pt.eq(positions, first).astype(_FLOAT)).sum(axis=0).dimshuffle(2, 3, 0, 1)


def _scan(fn: Any, **kwargs: Any) -> Any:
    """PyTensor's ``scan``, its outputs only."""
    return pytensor.scan(fn, return_updates=False, **kwargs)


_GRAPH = GraphOps(pt, _scan, conv2d, pool2d,
                  {"relu": lambda h: pt.maximum(h, np.float32(0.0)), "tanh": pt.tanh, "sigmoid": pt.sigmoid})


def build_graph(
    spec: ModelSpec, x: Any, params: list[Any], rng: Any = None, state: list[Any] = ()
) -> tuple[Any, dict[Any, Any]]:
    """The logits of ``spec`` on the symbolic NCHW batch ``x``, and the updates of the RNG and
    of the shared running statistics ``state``.

    ``rng`` (a shared random generator) turns training mode on (dropout, batch statistics);
    None gives the inference graph.
    """
    current = [rng]  # each dropout mask draws from the generator the previous one returned

    def dropout(h: Any, keep: float) -> Any:
        current[0], mask = current[0].binomial(1, keep, size=h.shape)
        return h * mask.astype(_FLOAT) / np.float32(keep)

    moved: list[tuple[Any, Any]] = []
    h = graph_layers(_GRAPH, spec.layers, tuple(spec.input_shape), x, iter(params), iter(state),
                     None if rng is None else dropout, moved)
    updates = dict(moved)
    if current[0] is not rng:
        updates[rng] = current[0]
    return h, updates


class PyTensorTrainer(CompiledGraphTrainer, Trainer):
    name = "pytensor"
    SUPPORTS_GPU = False

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        # BLAS thread counts come from the environment the parent built (OMP_NUM_THREADS,
        # OPENBLAS_NUM_THREADS), read when numpy's OpenBLAS loads; nothing to set here.
        return None

    @classmethod
    def framework_version(cls) -> str:
        return str(pytensor.__version__)

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        mode = get_default_mode()
        # The C VM runs one op at a time; parallelism is inside BLAS only.
        info: dict[str, Any] = {"linker": type(mode.linker).__name__, "inter_op": 1}
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            return info
        for pool in threadpool_info():
            # Without a linked BLAS, PyTensor's C Gemm / Dot call numpy's.
            if pool["user_api"] == "blas" and "numpy" in pool.get("filepath", ""):
                info["blas_threads"] = pool["num_threads"]
                info["blas_library"] = os.path.basename(pool["filepath"])
        info["intra_op"] = info.get("blas_threads", 1)
        return info

    def build(self, params: list[np.ndarray]) -> None:
        cfg = self.config
        if cfg.get("device") == "cuda":
            raise ValueError("The pytensor backend runs on the CPU only.")
        self.params = [
            pytensor.shared(np.asarray(p, dtype=_FLOAT), name=f"p{i}") for i, p in enumerate(params)
        ]
        self.state = [pytensor.shared(a, name=f"s{i}") for i, a in enumerate(self.spec.init_state())]
        self.rng = pt.random.shared_rng(seed=int(cfg["seed"]), name="dropout_rng")
        self.kind = cfg["optimizer"]
        self.decay = float(cfg.get("weight_decay", 0.0))
        self.mu = float(cfg.get("momentum", 0.0))
        self._train_fn = self._predict_fn = None

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        # borrow=True: over the worker's own arrays, not a copy (since 2026-12-05).
        self.x_train = pytensor.shared(np.ascontiguousarray(x_train, dtype=_FLOAT), name="x_train", borrow=True)
        self.y_train = pytensor.shared(np.ascontiguousarray(y_train, dtype=np.int64), name="y_train", borrow=True)
        self.x_test = np.ascontiguousarray(x_test, dtype=_FLOAT)

    def _updates(self, loss: Any, lr: Any) -> list[tuple[Any, Any]]:
        return graph_updates(self.kind, self.params, pytensor.grad(loss, self.params), lr, self.decay, self.mu,
                             pytensor.shared, pt.sqr, pt.sqrt)

    def compile(self) -> None:
        idx = pt.lvector("idx")
        lr = pt.scalar("lr", dtype=_FLOAT)
        xb, yb = self.x_train[idx], self.y_train[idx]
        logits, moved = build_graph(self.spec, xb, self.params, self.rng, self.state)
        loss = -log_softmax(logits, axis=1)[pt.arange(yb.shape[0]), yb].mean()
        updates = self._updates(loss, lr) + list(moved.items())
        self._train_fn = pytensor.function([idx, lr], loss, updates=updates, name="dltune_train_step")
        x_eval = pt.tensor("x_eval", dtype=_FLOAT, shape=(None,) * (1 + len(self.spec.input_shape)))
        prediction = pt.argmax(build_graph(self.spec, x_eval, self.params, None, self.state)[0], axis=1)
        self._predict_fn = pytensor.function([x_eval], prediction, name="dltune_predict")
        self._warm_up()


TRAINER = PyTensorTrainer
