from __future__ import annotations

import numpy as np
import pytest

from dltune.surrogate._calibration import fit_kind_multipliers
from dltune.surrogate._train_time import COST_TERMS, KINDS, TERM_KINDS, kind_shares


def test_every_cost_term_is_one_kind_of_work():
    assert len(TERM_KINDS) == len(COST_TERMS)
    assert set(KINDS) == {"run", "step", "step_x_layers", "elementwise", "elementwise/parallel",
                          "conv", "conv/parallel", "dense", "dense/parallel"}
    seconds = np.arange(2 * len(COST_TERMS), dtype=float).reshape(2, -1)
    shares = kind_shares(seconds)
    assert shares.shape == (2, len(KINDS)) and np.allclose(shares.sum(axis=1), seconds.sum(axis=1))


def test_kind_multipliers_recover_a_machine_with_slower_overheads_and_faster_dense_layers():
    rng = np.random.default_rng(0)
    # Probes whose work mixes the kinds differently (as MLP, LeNet and cifar_quick at two
    # batch sizes and two thread counts do).
    shares = rng.uniform(0.0, 1.0, (16, len(KINDS))) ** 3
    truth = np.array([{"step": 3.0, "dense": 0.5, "dense/parallel": 0.5}.get(k, 1.0) for k in KINDS])
    y = shares @ truth
    fitted = fit_kind_multipliers(shares, y, prior=1e-4)
    assert fitted == pytest.approx(truth, rel=0.05)
    # With the default prior a kind no probe exercises stays at the overall ratio.
    shares[:, KINDS.index("conv/parallel")] = 0.0
    fitted = fit_kind_multipliers(shares, shares @ truth)
    overall = float(np.exp(np.median(np.log((shares @ truth) / shares.sum(axis=1)))))
    assert fitted[KINDS.index("conv/parallel")] == pytest.approx(overall, rel=1e-3)
    assert fitted[KINDS.index("step")] > max(np.delete(fitted, KINDS.index("step")))
