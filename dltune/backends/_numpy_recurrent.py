"""The numpy reference's LSTM and GRU: forward pass and backpropagation through time.

The gate layout, equations and initialisation are defined in :mod:`dltune.models._recurrent`;
this is them in plain numpy, in the dtype of the input. The input projection of every step is
one matrix product before the loop; only the recurrent product runs step by step.

Worker-side module: imports only the standard library and numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dltune.models._recurrent import GRU, LSTM, RecurrentLayer

__all__ = ["recurrent_backward", "recurrent_forward"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))  # the logistic function, without overflow


def recurrent_forward(layer: RecurrentLayer, x: np.ndarray, params: list[np.ndarray]) -> tuple[np.ndarray, Any]:
    """The layer on ``x`` (N, features, steps): (N, units) or (N, units, steps), and the cache
    :func:`recurrent_backward` needs."""
    steps = x.transpose(2, 0, 1)  # (T, N, F)
    u = layer.units
    projected = steps @ params[0] + params[2]  # (T, N, gates * units)
    h = np.zeros((x.shape[0], u), dtype=x.dtype)
    c = np.zeros_like(h)
    hs, saved = [], []
    for a in projected:
        if isinstance(layer, LSTM):
            z = a + h @ params[1]
            i, f, o = _sigmoid(z[:, :u]), _sigmoid(z[:, u : 2 * u]), _sigmoid(z[:, 3 * u :])
            g = np.tanh(z[:, 2 * u : 3 * u])
            c_prev, c = c, f * c + i * g
            tanh_c = np.tanh(c)
            saved.append((h, c_prev, i, f, g, o, tanh_c))
            h = o * tanh_c
        else:
            recurrent = h @ params[1] + params[3]
            r = _sigmoid(a[:, :u] + recurrent[:, :u])
            z = _sigmoid(a[:, u : 2 * u] + recurrent[:, u : 2 * u])
            n = np.tanh(a[:, 2 * u :] + r * recurrent[:, 2 * u :])
            saved.append((h, r, z, n, recurrent[:, 2 * u :]))
            h = (1 - z) * n + z * h
        hs.append(h)
    out = np.stack(hs, axis=2) if layer.return_sequences else h
    return out, (steps, saved)


def recurrent_backward(layer: RecurrentLayer, cache: Any, params: list[np.ndarray],
                       dout: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The gradient of the layer's input and of its parameters, from its output's ``dout``."""
    steps, saved = cache
    if layer.return_sequences:
        dhs = dout.transpose(2, 0, 1)
    else:
        dhs = np.zeros((len(saved), *dout.shape), dtype=dout.dtype)
        dhs[-1] = dout
    recurrent_weight = params[1]
    d_projected = np.empty((len(saved), dout.shape[0], recurrent_weight.shape[1]), dtype=dout.dtype)
    d_recurrent = np.zeros_like(recurrent_weight)
    d_recurrent_bias = np.zeros(recurrent_weight.shape[1], dtype=dout.dtype)
    dh_next = np.zeros_like(dhs[0])
    dc_next = np.zeros_like(dhs[0])
    for t in reversed(range(len(saved))):
        dh = dhs[t] + dh_next
        if isinstance(layer, LSTM):
            h_prev, c_prev, i, f, g, o, tanh_c = saved[t]
            dc = dc_next + dh * o * (1 - tanh_c * tanh_c)
            dz = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                                 dc * i * (1 - g * g), dh * tanh_c * o * (1 - o)], axis=1)
            dc_next = dc * f
            d_projected[t] = dz
            d_recurrent += h_prev.T @ dz
            dh_next = dz @ recurrent_weight.T
        else:
            h_prev, r, z, n, recurrent_n = saved[t]
            dn = dh * (1 - z) * (1 - n * n)
            dr = dn * recurrent_n * r * (1 - r)
            dz = dh * (h_prev - n) * z * (1 - z)
            d_projected[t] = np.concatenate([dr, dz, dn], axis=1)
            d_rec = np.concatenate([dr, dz, dn * r], axis=1)
            d_recurrent += h_prev.T @ d_rec
            d_recurrent_bias += d_rec.sum(axis=0)
            dh_next = dh * z + d_rec @ recurrent_weight.T
    flat = d_projected.reshape(-1, d_projected.shape[2])
    d_kernel = steps.reshape(-1, steps.shape[2]).T @ flat
    dx = (d_projected @ params[0].T).transpose(1, 2, 0)
    grads = [d_kernel, d_recurrent, flat.sum(axis=0)]
    if isinstance(layer, GRU):
        grads.append(d_recurrent_bias)
    return dx, grads
