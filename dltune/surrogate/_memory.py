"""The memory surrogate: peak resident memory as a sum of sizes, with trees on what that leaves
and the interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune.surrogate._additive import _crossed, _nnls
from dltune.surrogate._features import ran_in_new_process
from dltune.surrogate._quantile import QuantileGBM

__all__ = ["MIN_GROUNDED_MODEL_RUNS", "MIN_GROUNDED_RUNS", "SIZE_INPUTS", "SIZE_TERMS", "MemoryModel",
           "held_data_mb", "process_floor", "size_terms", "ungrounded_memory"]

# What ``MemoryModel.size_columns`` must point at, in this order.
SIZE_INPUTS = ("log_n_train", "log_n_test", "log_input_size", "log_param_count", "log2_batch",
               "log_activations_per_sample", "channels", "conv_outputs_per_sample")
# The fitted memory terms, in MB per unit (float32 values); each gets a non-negative coefficient
# per group. The data set's own term is known, not fitted (held_data_mb).
SIZE_TERMS = ("process", "parameters", "batch_activations")
# Runs of a framework among the memory model's rows before its memory is predicted: fewer leave
# its size coefficients (and its machines' factors) to a handful of runs.
MIN_GROUNDED_RUNS = 10
# ... and of a model it trained in the knowledge base: one workload's (``kb build --fresh 3``).
MIN_GROUNDED_MODEL_RUNS = 3


def _data_mb(X: np.ndarray, size_columns: tuple[int, ...]) -> np.ndarray:
    log_n, log_test, log_inputs = (np.nan_to_num(X[:, c], nan=-np.inf) for c in size_columns[:3])
    with np.errstate(over="ignore", invalid="ignore"):
        data = (np.exp(log_n) + np.exp(log_test)) * np.exp(log_inputs) * (4.0 / 2**20)
    return np.nan_to_num(data, nan=0.0, posinf=0.0)


def size_terms(X: np.ndarray, size_columns: tuple[int, ...]) -> np.ndarray:
    """The fitted memory terms of a training process (see :class:`MemoryModel`), in MB of
    float32 values: 1 (the process and its libraries), the parameters, and one batch's
    activations."""
    log_params, log2_batch, log_act = (np.nan_to_num(X[:, c], nan=-np.inf) for c in size_columns[3:6])
    mb = 4.0 / 2**20
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.column_stack([np.ones(len(X)), np.exp(log_params) * mb,
                                 np.exp2(log2_batch) * np.exp(log_act) * mb])
    return np.nan_to_num(terms, nan=0.0, posinf=0.0)


def held_data_mb(X: np.ndarray, size_columns: tuple[int, ...],
                 layout_copy_columns: tuple[int, ...] = ()) -> np.ndarray:
    """MB of the data set (training and test samples x input values, float32) a training
    process holds, known from how dltune hands it over: the worker's own arrays, which every
    backend trains from without a copy; one NHWC copy more for a backend among
    ``layout_copy_columns`` (one-hot columns of ``X``) where the model convolves more than one
    channel (dltune holds NCHW; TensorFlow's convolutions take NHWC:
    ``dltune.backends._tensorflow.load_data``)."""
    data = _data_mb(X, size_columns)
    copies = np.ones(len(X))
    if layout_copy_columns:
        channels, conv = (np.nan_to_num(X[:, c]) for c in size_columns[6:8])
        held = np.nan_to_num(X[:, list(layout_copy_columns)]).sum(axis=1) > 0
        copies += held & (channels > 1) & (conv > 0)
    return data * copies


def process_floor(data: dict[str, Any]) -> float:
    """The least a run's process held with its framework imported: a new process's peak, or a
    reused worker's memory as the run started (where recorded)."""
    metrics = data["metrics"]
    if ran_in_new_process(data):
        return float(metrics["peak_rss_mb"])
    return float(min(metrics["peak_rss_mb"], metrics.get("baseline_rss_mb") or np.inf))


def ungrounded_memory(frameworks: Sequence[str], models: Sequence[str | None], learnt: Sequence[bool],
                      floors: Sequence[float | None]) -> dict[str, float]:
    """The frameworks (``"jax"``) and the models a framework trained (``"torch/text_lstm"``)
    that the memory model's rows (``learnt``: runs in a new process, where the fit had enough)
    hold too few runs of, each with the least its framework's process was measured to hold.

    Their memory would be extrapolated from other frameworks' or models' runs, which import
    other libraries. ``floors``, per run: what its framework's process held at the least (a new
    process's peak, or a reused worker's memory as the run started, its framework imported);
    None for a run whose memory is not its backend's now (a framework with only such runs:
    0, the data set it holds being all that is known).
    """
    count: Counter[str] = Counter()
    least: dict[str, float] = {}
    for framework, model, used, mb in zip(frameworks, models, learnt, floors, strict=True):
        count[framework] += bool(used)
        count[f"{framework}/{model}"] += bool(used)
        least.setdefault(framework, float("inf"))
        if mb is not None:
            least[framework] = min(least[framework], float(mb))
    least = {fw: mb if np.isfinite(mb) else 0.0 for fw, mb in least.items()}
    out = {fw: mb for fw, mb in least.items() if count[fw] < MIN_GROUNDED_RUNS}
    for framework, model in sorted({(f, str(m)) for f, m in zip(frameworks, models, strict=True)}):
        if framework not in out and count[f"{framework}/{model}"] < MIN_GROUNDED_MODEL_RUNS:
            out[f"{framework}/{model}"] = least[framework]
    return out


class MemoryModel(QuantileGBM):
    """Peak resident memory in MB: a sum of sizes, with trees on what that leaves
    (:class:`~dltune.surrogate.MemorySurrogate` is the estimator).

    With ``size_columns`` (the columns named in :data:`SIZE_INPUTS`) and ``group_columns``
    (one-hot frameworks) the memory is modelled as

        MB = process + parameters x b + batch activations x c + the data set it holds

    (sizes in MB of float32 values) with non-negative coefficients per group, fitted by
    non-negative least squares on relative errors: what the framework and its libraries take,
    and how many copies of the weights (gradients, optimizer state) and of one batch's
    activations it keeps. The data set it holds is known, not fitted (:func:`held_data_mb`: the
    worker's arrays, and the copy ``layout_copy_columns`` names). Trees on
    the log ratio of measured to modelled memory correct the point and give the interval. The
    sizes let the model extrapolate to a data set larger than any measured, which trees on the
    log memory alone cannot. Without ``size_columns`` the trees learn the log memory alone.

    The data set's copies are known rather than fitted because a data coefficient per
    framework would rest on the few large data sets (docs/explanation/how-recommend-decides.md#the-surrogates;
    ``benchmarks/memory_extrapolation.py`` measures the extrapolation).
    """

    def __init__(self, size_columns: tuple[int, ...] = (), group_columns: tuple[int, ...] = (),
                 layout_copy_columns: tuple[int, ...] = (), coverage: float = 0.8,
                 max_iter: int = 100, learning_rate: float = 0.08,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0, tree_columns: tuple[int, ...] | None = None) -> None:
        super().__init__(coverage, max_iter, learning_rate, max_leaf_nodes, min_samples_leaf,
                         l2_regularization, calibrate, cv, random_state, tree_columns)
        self.size_columns = size_columns
        self.group_columns = group_columns
        self.layout_copy_columns = layout_copy_columns

    def _held_mb(self, X: np.ndarray) -> np.ndarray:
        return held_data_mb(X, tuple(self.size_columns), tuple(self.layout_copy_columns))

    def _fit_sizes(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        ok = np.isfinite(y) & (y > 0)
        terms = size_terms(X[ok], tuple(self.size_columns))
        return _nnls(_crossed(terms, X[ok], tuple(self.group_columns)), y[ok], self._held_mb(X[ok]))

    def _modelled(self, X: np.ndarray, coef: np.ndarray | None = None) -> np.ndarray:
        """MB from the sizes alone (1 where there are none)."""
        if not len(self.size_columns):
            return np.ones(len(X))
        coef = self.size_coef_ if coef is None else coef
        out = (_crossed(size_terms(X, tuple(self.size_columns)), X, tuple(self.group_columns)) @ coef
               + self._held_mb(X))
        # A group the fit never saw has no sizes: a floor keeps the log finite.
        return np.maximum(out, 1e-6)

    def _fit(self, X: np.ndarray, y: np.ndarray, groups: Any = None) -> MemoryModel:
        if len(self.size_columns) not in (0, len(SIZE_INPUTS)):
            raise ParameterError(
                f"The 'size_columns' parameter must name {len(SIZE_INPUTS)} columns "
                f"({', '.join(SIZE_INPUTS)}) or none. Got {len(self.size_columns)} instead."
            )
        self.size_coef_ = np.zeros(0)
        if len(self.size_columns):
            self.size_coef_ = self._fit_sizes(X, y)
        return super()._fit(X, y, groups)

    def _fold_targets(self, X: np.ndarray, y: np.ndarray, t: np.ndarray, train: np.ndarray) -> np.ndarray:
        if not len(self.size_columns):
            return t
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) - np.log(self._modelled(X, self._fit_sizes(X[train], y[train])))

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) - np.log(self._modelled(X))

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return self._modelled(X) * np.exp(t)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        arrays[f"{prefix}size_coef"] = self.size_coef_
        return arrays

    def load_arrays(self, arrays, prefix: str) -> MemoryModel:
        super().load_arrays(arrays, prefix)
        self.size_coef_ = np.asarray(arrays[f"{prefix}size_coef"], dtype=np.float64)
        return self
