"""Theano backend: a symbolic graph (``conv2d`` / ``pool_2d``) compiled to C, in the legacy runtime.

Theano reads ``THEANO_FLAGS`` once, on import. The parent sets it (:func:`dltune.envs.theano_flags`:
explicit BLAS flags, since Theano's own BLAS probe fails on numpy 1.23, and a compile cache under
dltune's cache dir); a worker started without it gets the same flags computed here. Compiling
the training and prediction functions happens in :meth:`TheanoTrainer.compile`, so it is timed
apart from training; with a warm compile cache it mostly loads compiled modules.

Update rules are PyTorch's (see :class:`dltune.config.TrainConfig`), written as Theano updates.
"""

from __future__ import annotations

import os
import sys
from typing import Any

if "THEANO_FLAGS" not in os.environ:
    from dltune.envs._flags import theano_flags
    from dltune.envs._legacy import LegacyRuntime

    os.environ["THEANO_FLAGS"] = theano_flags(runtime=LegacyRuntime(sys.prefix))

import numpy as np  # noqa: E402
import theano  # noqa: E402
import theano.tensor as T  # noqa: E402
from theano.sandbox.rng_mrg import MRG_RandomStreams  # noqa: E402
from theano.tensor.nnet import conv2d  # noqa: E402
from theano.tensor.signal.pool import pool_2d  # noqa: E402

from dltune.backends._base import Trainer  # noqa: E402
from dltune.backends._common import (  # noqa: E402
    CompiledGraphTrainer,
    GraphOps,
    graph_layers,
    graph_updates,
    graph_windows,
)
from dltune.models._spec import AvgPool2D, Conv2D, MaxPool2D, ModelSpec  # noqa: E402

__all__ = ["TheanoTrainer", "TRAINER", "build_graph"]

_FLOAT = "float32"


def _max_pool(h: Any, layer: MaxPool2D, in_shape: tuple[int, ...]) -> Any:
    """``pool_2d`` max pooling whose gradient goes to each window's first maximum.

    Theano's own gradient (MaxPoolGrad) gives a tied window's gradient to every tied input;
    PyTorch, TensorFlow and MXNet give it to the first one (row-major). Images with flat
    backgrounds (MNIST, digits) tie often, so the forward pass stays ``pool_2d`` and only the
    gradient is replaced: the windows (one gather), a one-hot of their argmax, and
    Theano's gradient of that selection.
    """
    size, stride = layer.size, layer.stride
    _, oh, ow = layer.output_shape(in_shape)
    x = T.tensor4("pool_in", dtype=_FLOAT)
    out = pool_2d(x, ws=(size, size), stride=(stride, stride), ignore_border=True, mode="max")

    def first_max_grad(inputs: list[Any], output_grads: list[Any]) -> list[Any]:
        (xi,), (gz,) = inputs, output_grads
        windows = graph_windows(xi, in_shape[1:], size, stride, (oh, ow))  # (s*s, oh, ow, N, C)
        first = T.argmax(windows, axis=0, keepdims=True)
        positions = T.arange(size * size).reshape((-1, 1, 1, 1, 1))
        picked = (windows * T.eq(positions, first)).sum(axis=0).dimshuffle(2, 3, 0, 1)
        return [theano.grad(None, xi, known_grads={picked: gz})]

    return theano.OpFromGraph([x], [out], grad_overrides=first_max_grad, inline=True)(h)


# Theano's compiled scan loop is Cython output of 2017 that does not build on Python 3.11
# (longintrepr.h, PyCode_New): without the module, scan runs its own Python loop over the
# compiled step function (Scan.execute), the fallback Theano takes where Cython is missing.
sys.modules.setdefault("theano.scan_module.scan_perform_ext", None)


def _scan(fn: Any, **kwargs: Any) -> Any:
    """Theano's ``scan``, its outputs only."""
    return theano.scan(fn, **kwargs)[0]


def _conv2d(h: Any, w: Any, b: Any, layer: Conv2D, in_shape: tuple[int, ...]) -> Any:
    out = conv2d(
        h,
        w,
        input_shape=(None, *in_shape),
        filter_shape=(layer.filters, in_shape[0], layer.kernel, layer.kernel),
        border_mode="half" if layer.padding == "same" else "valid",
        subsample=(layer.stride, layer.stride),
        # The canonical layout is cross-correlation (as in PyTorch, TF, MXNet).
        filter_flip=False,
    )
    return out + b.dimshuffle("x", 0, "x", "x")


def _pool2d(h: Any, layer: MaxPool2D | AvgPool2D, in_shape: tuple[int, ...]) -> Any:
    if isinstance(layer, MaxPool2D):
        return _max_pool(h, layer, in_shape)
    return pool_2d(h, ws=(layer.size, layer.size), stride=(layer.stride, layer.stride),
                   ignore_border=True, mode="average_exc_pad")


_GRAPH = GraphOps(T, _scan, _conv2d, _pool2d, {"relu": T.nnet.relu, "tanh": T.tanh, "sigmoid": T.nnet.sigmoid})


def build_graph(
    spec: ModelSpec,
    x: Any,
    params: list[Any],
    dropout_rng: MRG_RandomStreams | None,
    state: list[Any] = (),
) -> tuple[Any, list[tuple[Any, Any]]]:
    """The logits of ``spec`` applied to the symbolic NCHW batch ``x`` with shared ``params``,
    and the updates of the shared running statistics ``state``.

    ``dropout_rng`` turns training mode on (dropout, batch statistics); None gives the
    inference graph.
    """

    def dropout(h: Any, keep: float) -> Any:
        return h * dropout_rng.binomial(h.shape, p=keep, dtype=_FLOAT) / np.float32(keep)

    updates: list[tuple[Any, Any]] = []
    h = graph_layers(_GRAPH, spec.layers, tuple(spec.input_shape), x, iter(params), iter(state),
                     None if dropout_rng is None else dropout, updates)
    return h, updates


def _blas_threads() -> dict[str, Any]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {}
    ldflags = theano.config.blas.ldflags
    info: dict[str, Any] = {}
    for pool in threadpool_info():
        path = pool.get("filepath", "")
        if pool["user_api"] == "blas" and "dltune-blas" in ldflags and "scipy.libs" in path:
            # The OpenBLAS Theano's compiled modules link (dltune-blas/libopenblas.so).
            info["blas_threads"] = pool["num_threads"]
            info["blas_library"] = os.path.basename(path)
        elif pool["user_api"] == "openmp":
            info["openmp_threads"] = pool["num_threads"]
    if "blas_threads" not in info:
        # No BLAS linked: Theano's fallback calls numpy's dot, i.e. numpy's OpenBLAS.
        for pool in threadpool_info():
            if pool["user_api"] == "blas" and "numpy" in pool.get("filepath", ""):
                info["blas_threads"] = pool["num_threads"]
                info["blas_library"] = os.path.basename(pool["filepath"])
    return info


class TheanoTrainer(CompiledGraphTrainer, Trainer):
    name = "theano"
    SUPPORTS_GPU = False

    @classmethod
    def setup(cls, threads: dict[str, Any]) -> None:
        # Thread counts come from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, read when the
        # libraries load; nothing in Theano's API changes them later.
        if theano.config.device != "cpu":
            raise RuntimeError(f"the theano backend needs device=cpu, got {theano.config.device}")

    @classmethod
    def framework_version(cls) -> str:
        return str(theano.__version__)

    @classmethod
    def thread_info(cls) -> dict[str, Any]:
        info: dict[str, Any] = {
            "openmp": bool(theano.config.openmp),
            "blas_ldflags": theano.config.blas.ldflags,
            "compiledir": theano.config.compiledir,
        }
        info.update(_blas_threads())
        # Theano runs one op at a time: there is no inter-op parallelism.
        info["inter_op"] = 1
        info["intra_op"] = info.get("blas_threads", 1)
        return info

    def build(self, params: list[np.ndarray]) -> None:
        cfg = self.config
        if cfg.get("device") == "cuda":
            raise ValueError("The theano backend runs on the CPU only.")
        self.params = [
            theano.shared(np.asarray(p, dtype=_FLOAT), name=f"p{i}", borrow=False)
            for i, p in enumerate(params)
        ]
        self.state = [theano.shared(a, name=f"s{i}") for i, a in enumerate(self.spec.init_state())]
        self.rng = MRG_RandomStreams(int(cfg["seed"]) % 2147462579 + 1)
        self.kind = cfg["optimizer"]
        self.decay = float(cfg.get("weight_decay", 0.0))
        self.mu = float(cfg.get("momentum", 0.0))
        self._train_fn = self._predict_fn = None

    def load_data(self, x_train, y_train, x_test, y_test) -> None:
        self.x_train = theano.shared(np.ascontiguousarray(x_train, dtype=_FLOAT), borrow=True)
        self.y_train = theano.shared(np.ascontiguousarray(y_train, dtype=np.int64), borrow=True)
        self.x_test = np.ascontiguousarray(x_test, dtype=_FLOAT)

    def _updates(self, loss: Any, lr: Any) -> list[tuple[Any, Any]]:
        return graph_updates(self.kind, self.params, T.grad(loss, self.params), lr, self.decay, self.mu,
                             theano.shared, T.sqr, T.sqrt)

    def compile(self) -> None:
        idx = T.lvector("idx")
        lr = T.scalar("lr", dtype=_FLOAT)
        batch = T.TensorType(_FLOAT, (False,) * (1 + len(self.spec.input_shape)))
        x = batch("x")
        logits, moved = build_graph(self.spec, x, self.params, self.rng, self.state)
        y = T.lvector("y")
        loss = T.nnet.categorical_crossentropy(T.nnet.softmax(logits), y).mean()
        self._train_fn = theano.function(
            [idx, lr],
            loss,
            updates=self._updates(loss, lr) + moved,
            givens={x: self.x_train[idx], y: self.y_train[idx]},
            name="dltune_train_step",
        )
        x_eval = batch("x_eval")
        prediction = T.argmax(build_graph(self.spec, x_eval, self.params, None, self.state)[0], axis=1)
        self._predict_fn = theano.function([x_eval], prediction, name="dltune_predict")
        self._warm_up()


TRAINER = TheanoTrainer
