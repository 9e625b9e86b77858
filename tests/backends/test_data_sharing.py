"""Data handed to a backend without copies: aligned .npy reading, and TensorFlow's tensors
over the worker's arrays (a copy of the data set costs as much memory as the data set)."""

from __future__ import annotations

import numpy as np
import pytest

from dltune.backends._common import ALIGNMENT, aligned_empty, is_aligned, load_npy


@pytest.mark.parametrize("shape, dtype", [((7, 3, 5, 4), np.float32), ((13,), np.int64), ((0, 2), np.float32)])
def test_aligned_empty_is_aligned_and_contiguous(shape, dtype):
    for _ in range(5):  # numpy's own allocations are 16-byte aligned: some of these would miss
        a = aligned_empty(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
        assert a.ctypes.data % ALIGNMENT == 0 or a.size == 0  # an empty array has no buffer to share


def test_load_npy_reads_the_file_into_an_aligned_array(tmp_path):
    rng = np.random.default_rng(0)
    for i, value in enumerate([rng.normal(size=(11, 3, 4, 5)).astype(np.float32),
                               rng.integers(0, 9, 17), np.zeros((0, 3), np.float32),
                               rng.normal(size=(4, 5)).astype(">f8")]):
        np.save(tmp_path / f"{i}.npy", value)
        loaded = load_npy(str(tmp_path / f"{i}.npy"))
        assert loaded.dtype == value.dtype and loaded.shape == value.shape
        np.testing.assert_array_equal(loaded, value)
        assert is_aligned(loaded) or loaded.size == 0


def test_load_npy_falls_back_to_numpy_for_fortran_order_and_reports_truncation(tmp_path):
    f = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    np.save(tmp_path / "f.npy", f)
    loaded = load_npy(str(tmp_path / "f.npy"))
    np.testing.assert_array_equal(loaded, f)
    assert loaded.flags.c_contiguous
    np.save(tmp_path / "t.npy", np.arange(100.0))
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-8])
    with pytest.raises(ValueError, match="holds 792 of the 800 bytes"):
        load_npy(str(tmp_path / "t.npy"))


def test_is_aligned_refuses_views_that_are_not_shareable():
    a = aligned_empty((8, 4), np.float32)
    assert is_aligned(a)
    assert not is_aligned(a.T)  # not C-contiguous
    assert not is_aligned(a.reshape(-1)[1:])  # 4 bytes past the boundary
    a.flags.writeable = False
    assert not is_aligned(a)


# In TensorFlow's interpreter: after load_data, does a write to the worker's array show in
# the trainer's tensor (shared), and are the tensors the samples in the layout the model takes?
TF_SHARING = r"""
import json, sys
import numpy as np
from dltune.backends import load_trainer_class
from dltune.backends._common import aligned_empty
from dltune.models import build_model

cls = load_trainer_class("tensorflow")
cls.setup({"intra_op": 1, "inter_op": 1})
out = {}
for name, shape in (("mlp", (3, 6, 5)), ("lenet", (1, 12, 12)), ("lenet", (3, 12, 12))):
    rng = np.random.default_rng(0)
    x = aligned_empty((20, *shape), np.float32)
    x[...] = rng.normal(size=x.shape)
    xt = rng.normal(size=(6, *shape)).astype(np.float32)  # numpy's own: maybe not aligned
    y = rng.integers(0, 3, 20)
    trainer = cls(build_model(name, shape, 3), {"seed": 0, "optimizer": "sgd", "learning_rate": 0.1,
                                                 "batch_size": 5, "epochs": 1})
    trainer.build(trainer.spec.init_params(0))
    trainer.load_data(x, y, xt, y[:6])
    held = trainer.x_train.numpy().copy()
    expected = x if held.shape == x.shape else x.transpose(0, 2, 3, 1)
    same_values = bool(np.array_equal(held, expected)) and bool(
        np.array_equal(trainer.x_test.numpy(), xt if held.shape == x.shape else xt.transpose(0, 2, 3, 1)))
    x[0] += 1.0
    shared = bool(np.array_equal(trainer.x_train.numpy()[0], held[0] + 1.0))
    out[f"{name}{shape}"] = {"layout": list(held.shape[1:]), "same_values": same_values, "shared": shared}
print(json.dumps(out))
"""


def test_tensorflow_shares_the_workers_arrays_where_the_layout_allows(in_backend):
    out = in_backend("tensorflow", TF_SHARING)
    assert all(case["same_values"] for case in out.values()), out
    # An MLP takes NCHW as dltune holds it; one channel is the same buffer in NHWC: both shared.
    assert out["mlp(3, 6, 5)"] == {"layout": [3, 6, 5], "same_values": True, "shared": True}
    assert out["lenet(1, 12, 12)"] == {"layout": [12, 12, 1], "same_values": True, "shared": True}
    # Convolutions on 3 channels need NHWC: one transposed copy, no longer the worker's array.
    assert out["lenet(3, 12, 12)"] == {"layout": [12, 12, 3], "same_values": True, "shared": False}


# Every backend but TensorFlow (above): after load_data, do the trainer's training data share
# the worker's array? (The memory model counts the data set once for them: held_data_mb.)
SHARING = r"""
import json, sys
import numpy as np
from dltune.backends import load_trainer_class
from dltune.backends._common import aligned_empty
from dltune.models import build_model

name = sys.argv[1]
cls = load_trainer_class(name)
cls.setup({"intra_op": 1, "inter_op": 1})
x = aligned_empty((20, 1, 8, 8), np.float32)
x[...] = np.random.default_rng(0).normal(size=x.shape)
y = np.arange(20) % 3
trainer = cls(build_model("mlp", (1, 8, 8), 3), {"seed": 0, "optimizer": "sgd", "learning_rate": 0.1,
                                                 "batch_size": 5, "epochs": 1})
trainer.build(trainer.spec.init_params(0))
trainer.load_data(x, y, x, y)
if name == "mxnet":
    held = trainer.x_train.asnumpy()
    # from_numpy(zero_copy=True) marks the array it shares read-only; mx.nd.array left it alone.
    shared = not x.flags.writeable
else:
    if name == "torch":
        held = trainer.x_train.numpy()
    elif name == "numpy":
        held = trainer.x_train
    else:  # theano, pytensor: shared variables
        held = trainer.x_train.get_value(borrow=True)
    shared = bool(np.shares_memory(held, x))
print(json.dumps({"same_values": bool(np.array_equal(held, x)), "shared": shared}))
"""


@pytest.mark.parametrize("backend", ["torch", "mxnet", "theano", "pytensor", "numpy"])
def test_other_backends_share_the_workers_arrays(in_backend, backend):
    assert in_backend(backend, SHARING) == {"same_values": True, "shared": True}
