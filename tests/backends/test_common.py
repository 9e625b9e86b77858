"""What the backends share (backends/_common.py): the batch sizes a warm-up runs and the
window positions Theano-style graphs gather."""

from __future__ import annotations

import numpy as np
import pytest

from dltune.backends._common import batch_order, epoch_batch_sizes, window_positions


@pytest.mark.parametrize("n, batch_size", [(10, 4), (12, 4), (3, 8), (8, 8), (1, 1)])
def test_epoch_batch_sizes_are_the_sizes_batch_order_cuts(n, batch_size):
    sizes = {len(b) for b in batch_order(n, batch_size, seed=0, epoch=0)}
    assert sorted(epoch_batch_sizes(n, batch_size)) == sorted(sizes)


@pytest.mark.parametrize("spatial, size, stride", [((7, 6), 3, 2), ((5, 5), 2, 1), ((9, 4), 3, 3)])
def test_window_positions_gather_the_strided_windows(spatial, size, stride):
    h, w = spatial
    out = ((h - size) // stride + 1, (w - size) // stride + 1)
    x = np.arange(2 * h * w, dtype=np.float32).reshape(2, h, w)
    gathered = x.reshape(2, -1)[:, window_positions(spatial, size, stride, out)]
    slices = np.stack([x[:, i : i + stride * (out[0] - 1) + 1 : stride, j : j + stride * (out[1] - 1) + 1 : stride]
                       for i in range(size) for j in range(size)], axis=1)
    np.testing.assert_array_equal(gathered.reshape(slices.shape), slices)


def test_window_positions_in_one_dimension():
    x = np.arange(10)
    np.testing.assert_array_equal(x[window_positions((10,), 3, 2, (4,))].reshape(3, 4),
                                  np.stack([x[i : i + 7 : 2] for i in range(3)]))
