"""The training-time surrogate: training seconds as a sum of costs, with trees on what that
leaves and the interval."""

from __future__ import annotations

from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune.surrogate._additive import _crossed, _nnls
from dltune.surrogate._quantile import QuantileGBM

__all__ = ["COST_INPUTS", "COST_TERMS", "KINDS", "TERM_KINDS", "TrainTimeModel", "cost_terms", "kind_shares"]

# What ``TrainTimeModel.cost_columns`` must point at, in this order.
COST_INPUTS = ("epochs", "log_batches_per_epoch", "log_n_train", "log_param_count",
               "log_flops_per_sample", "log_input_size", "threads", "log_layers",
               "log_activations_per_sample", "is_momentum", "is_adam", "fresh_process",
               "conv_outputs_per_sample")
# The cost terms, in seconds per unit; each gets a non-negative coefficient per group.
COST_TERMS = ("run", "fresh_run", "fresh_run_x_layers", "epoch", "step", "step_x_params",
              "step_x_layers", "step_x_layers_if_multithreaded",
              "momentum_step", "momentum_step_x_params", "adam_step", "adam_step_x_params",
              "sample_x_inputs", "sample_x_activations", "sample_x_activations_per_thread",
              "sample_x_conv_outputs", "sample_x_conv_outputs_per_thread",
              "sample_x_dense_flops", "sample_x_dense_flops_per_thread",
              "sample_x_conv_flops", "sample_x_conv_flops_per_thread")

# Which work each cost term is (the layer kind whose throughput it divides by, or the per-run
# and per-epoch, per-step and per-layer-per-step overheads) and whether it runs in parallel
# (``/ threads``): a machine is described by one multiplier of the reference machine's
# throughput per (kind, share) and framework (``dltune kb calibrate``;
# ``CalibrationMixin._fit_machine_kinds``). Element-wise work covers the inputs and every
# layer's outputs: activations, pooling, copies.
TERM_KINDS: tuple[str, ...] = (
    "run", "run", "run", "run", "step", "step", "step_x_layers", "step_x_layers",
    "step", "step", "step", "step",
    "elementwise", "elementwise", "elementwise/parallel", "conv", "conv/parallel",
    "dense", "dense/parallel", "conv", "conv/parallel")
KINDS: tuple[str, ...] = tuple(dict.fromkeys(TERM_KINDS))


def kind_shares(contributions: np.ndarray) -> np.ndarray:
    """Per-term seconds (:meth:`TrainTimeModel.term_seconds`) summed per :data:`KINDS` entry."""
    index = np.array([KINDS.index(k) for k in TERM_KINDS])
    out = np.zeros((len(contributions), len(KINDS)))
    for j in range(len(KINDS)):
        out[:, j] = contributions[:, index == j].sum(axis=1)
    return out


def cost_terms(X: np.ndarray, cost_columns: tuple[int, ...]) -> np.ndarray:
    """The additive cost terms of training (see :class:`TrainTimeModel`), one row per row of X.

    Dense FLOPs are taken as twice the parameters (each weight is one multiply-add per sample),
    the remainder of the forward FLOPs as convolution FLOPs, which reuse each weight many times.
    Per output element of the convolutions there is work the FLOPs miss (bias, unfolding the
    input for the matrix product and folding the gradient back), so equal outputs cost about
    the same whatever the input channels. With more than one thread each layer's operations
    also pay a synchronisation per step, and element-wise work over the activations runs in
    parallel.
    """
    (epochs, log_batches, log_n, log_params, log_flops, log_inputs, threads, log_layers, log_act,
     momentum, adam, fresh, conv_out) = (np.nan_to_num(X[:, c]) if i >= 9 else X[:, c]
                                         for i, c in enumerate(cost_columns))
    with np.errstate(over="ignore", invalid="ignore"):
        steps = epochs * np.ceil(np.exp(log_batches) - 1e-9)
        samples = epochs * np.exp(log_n)
        params, flops = np.exp(log_params), np.exp(log_flops)
        dense = np.minimum(flops, 2.0 * params)
        conv = np.maximum(flops - 2.0 * params, 0.0)
        threads = np.where(np.isfinite(threads) & (threads >= 1), threads, 1.0)
        layers, act = np.exp(log_layers), np.exp(log_act)
        terms = np.column_stack([
            np.ones(len(X)), fresh, fresh * layers,
            epochs, steps, steps * params, steps * layers, steps * layers * (threads > 1),
            steps * momentum, steps * params * momentum, steps * adam, steps * params * adam,
            samples * np.exp(log_inputs), samples * act, samples * act / threads,
            samples * conv_out, samples * conv_out / threads,
            samples * dense, samples * dense / threads, samples * conv, samples * conv / threads,
        ])
    return np.nan_to_num(terms, nan=0.0, posinf=0.0)


class TrainTimeModel(QuantileGBM):
    """Training seconds as a sum of costs, with trees on what that leaves and the interval
    (:class:`~dltune.surrogate.TrainTimeSurrogate` is the estimator).

    With ``cost_columns`` (the columns named in :data:`COST_INPUTS`) the time is modelled as

        seconds = run + new process x (f + layers x g) + epoch x epochs
                  + steps x (step + parameters x p + layers x (l + [threads > 1] x s)
                             + optimizer's extra per step and per parameter: momentum
                             buffers, Adam's two moments)
                  + samples x (inputs x a + activations x (m + n / threads)
                               + convolution outputs x (o + q / threads)
                               + dense FLOPs x (b + c / threads)
                               + convolution FLOPs x (d + e / threads))

    with non-negative coefficients per group (``group_columns``: one-hot frameworks; and, where
    ``subgroup_columns`` are given and a row has one, per subgroup: framework x model), fitted
    by non-negative least squares on relative errors: a warm-up per run (graph tracing), more
    of it in a run that is its process's first (``fresh_process``: lazy initialisations), a
    per-epoch and a per-step overhead (Python dispatch, per-layer kernel launches, optimizer
    updates over all weights), data movement (inputs, every layer's activations), and
    compute at a learned throughput split into a serial and a parallel
    share (Amdahl's law), so it extrapolates to larger workloads and other thread counts in a
    way a tree cannot. Quantile trees on the log ratio of measured to modelled time give the
    interval; the point prediction is the cost model's own unless ``correct_point``, where a
    squared-error tree ensemble on that log ratio corrects it (by default not: the trees learn
    the measured workloads, not what carries over; docs/explanation/how-recommend-decides.md#the-surrogates).

    Without ``cost_columns`` the trees learn the log throughput ``log(work) - log(seconds)``
    alone, ``X[:, work_column]`` holding ``log(epochs x samples x FLOPs per sample)``.
    """

    def __init__(self, work_column: int = -1, cost_columns: tuple[int, ...] = (),
                 group_columns: tuple[int, ...] = (), subgroup_columns: tuple[int, ...] = (),
                 correct_point: bool = False,
                 coverage: float = 0.8, max_iter: int = 30,
                 learning_rate: float = 0.08, max_leaf_nodes: int = 15, min_samples_leaf: int = 4,
                 l2_regularization: float = 0.1, calibrate: bool = True, cv: int = 3,
                 random_state: int = 0, tree_columns: tuple[int, ...] | None = None) -> None:
        super().__init__(coverage, max_iter, learning_rate, max_leaf_nodes, min_samples_leaf,
                         l2_regularization, calibrate, cv, random_state, tree_columns)
        self.work_column = work_column
        self.cost_columns = cost_columns
        self.group_columns = group_columns
        self.subgroup_columns = subgroup_columns
        self.correct_point = correct_point

    def _point_target(self, X: np.ndarray) -> np.ndarray:
        if len(self.cost_columns) and not self.correct_point:
            return np.zeros(len(X))
        return super()._point_target(X)

    def _modelled(self, X: np.ndarray, coefs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Seconds from the cost model alone (1 where there is none), with the fitted
        coefficients or ``coefs`` = (per group, per subgroup)."""
        if not len(self.cost_columns):
            return np.ones(len(X))
        coef, sub = coefs if coefs is not None else (self.cost_coef_, self.sub_coef_)
        terms = cost_terms(X, tuple(self.cost_columns))
        out = _crossed(terms, X, tuple(self.group_columns)) @ coef
        if len(self.subgroup_columns):
            # Framework x model where the fit saw that pair (it has costs), the framework's
            # otherwise: a fit on part of the records (one machine's) may lack a pair.
            seen = sub.reshape(len(self.subgroup_columns), -1).any(axis=1)
            known = (np.nan_to_num(X[:, list(self.subgroup_columns)]) * seen).sum(axis=1) > 0
            fine = _crossed(terms, X, tuple(self.subgroup_columns)) @ sub
            out = np.where(known, fine, out)
        # A group the fit never saw has no costs: a tiny floor keeps the log finite.
        return np.maximum(out, 1e-6)

    def term_seconds(self, X: np.ndarray) -> np.ndarray:
        """Each cost term's seconds (rows x :data:`COST_TERMS`) as :meth:`_modelled` sums them:
        the framework x model's coefficients where the fit saw that pair, else the framework's."""
        terms = cost_terms(X, tuple(self.cost_columns))
        n_terms = terms.shape[1]

        def per_term(columns: tuple[int, ...], coef: np.ndarray) -> np.ndarray:
            crossed = _crossed(terms, X, columns) * coef
            return crossed.reshape(len(X), -1, n_terms).sum(axis=1)

        out = per_term(tuple(self.group_columns), self.cost_coef_)
        if len(self.subgroup_columns):
            seen = self.sub_coef_.reshape(len(self.subgroup_columns), -1).any(axis=1)
            known = (np.nan_to_num(X[:, list(self.subgroup_columns)]) * seen).sum(axis=1) > 0
            out = np.where(known[:, None], per_term(tuple(self.subgroup_columns), self.sub_coef_), out)
        return out

    def _fit_costs(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = np.isfinite(y) & (y > 0)
        terms = cost_terms(X[ok], tuple(self.cost_columns))
        coef = _nnls(_crossed(terms, X[ok], tuple(self.group_columns)), y[ok])
        sub = np.zeros(0)
        if len(self.subgroup_columns):
            sub = _nnls(_crossed(terms, X[ok], tuple(self.subgroup_columns)), y[ok])
        return coef, sub

    def _fold_targets(self, X: np.ndarray, y: np.ndarray, t: np.ndarray, train: np.ndarray) -> np.ndarray:
        if not len(self.cost_columns):
            return t
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) - np.log(self._modelled(X, self._fit_costs(X[train], y[train])))

    def _fit(self, X: np.ndarray, y: np.ndarray, groups: Any = None) -> TrainTimeModel:
        if len(self.cost_columns) not in (0, len(COST_INPUTS)):
            raise ParameterError(
                f"The 'cost_columns' parameter must name {len(COST_INPUTS)} columns "
                f"({', '.join(COST_INPUTS)}) or none. Got {len(self.cost_columns)} instead."
            )
        self.cost_coef_ = self.sub_coef_ = np.zeros(0)
        if len(self.cost_columns):
            self.cost_coef_, self.sub_coef_ = self._fit_costs(X, y)
        return super()._fit(X, y, groups)

    def _to_target(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            if not len(self.cost_columns):
                return X[:, self.work_column] - np.log(y)
            return np.log(y) - np.log(self._modelled(X))

    def _from_target(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        if not len(self.cost_columns):
            return np.exp(X[:, self.work_column] - t)
        return self._modelled(X) * np.exp(t)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().to_arrays(prefix)
        arrays[f"{prefix}cost_coef"] = self.cost_coef_
        arrays[f"{prefix}sub_coef"] = self.sub_coef_
        return arrays

    def load_arrays(self, arrays, prefix: str) -> TrainTimeModel:
        super().load_arrays(arrays, prefix)
        self.cost_coef_ = np.asarray(arrays[f"{prefix}cost_coef"], dtype=np.float64)
        self.sub_coef_ = np.asarray(arrays[f"{prefix}sub_coef"], dtype=np.float64)
        return self
