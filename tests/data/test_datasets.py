from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import tarfile

import numpy as np
import pytest

from dltune._errors import DltuneError, ParameterError
from dltune.data import (
    Dataset,
    _files,
    available_datasets,
    from_arrays,
    holdout_split,
    load_dataset,
)


def test_registry_names():
    assert set(available_datasets()) >= {"digits", "synthetic", "mnist", "fashion_mnist", "cifar10"}


def test_digits_split_is_fixed_stratified_and_normalised():
    data = load_dataset("digits")
    assert data.input_shape == (1, 8, 8)
    assert data.num_classes == 10
    assert len(data.y_train) + len(data.y_test) == 1797
    assert len(data.y_test) == 360
    assert data.x_train.dtype == np.float32 and data.y_train.dtype == np.int64
    # Stratified: every class in both splits in about the same proportion.
    train_freq = np.bincount(data.y_train) / len(data.y_train)
    test_freq = np.bincount(data.y_test) / len(data.y_test)
    assert np.abs(train_freq - test_freq).max() < 0.01
    # Normalised with train statistics: zero mean, unit variance on train.
    assert abs(float(data.x_train.mean())) < 1e-4
    assert abs(float(data.x_train.std()) - 1.0) < 1e-3
    # The same call gives the same arrays (and the same fingerprint).
    again = load_dataset("digits")
    assert again.fingerprint() == data.fingerprint()


def test_digits_subset_keeps_classes_and_changes_fingerprint():
    small = load_dataset("digits", n_train=200, n_test=100)
    assert len(small.y_train) == 200 and len(small.y_test) == 100
    assert set(np.unique(small.y_train)) == set(range(10))
    assert small.fingerprint() != load_dataset("digits").fingerprint()


def test_synthetic_parameters_shape_and_difficulty():
    data = load_dataset("synthetic", n_train=300, n_test=100, height=12, width=10, channels=3,
                        classes=4, difficulty=0.2, seed=1)
    assert data.input_shape == (3, 12, 10)
    assert data.num_classes == 4
    assert len(data.y_train) == 300
    easy = load_dataset("synthetic", n_train=400, n_test=200, difficulty=0.0, seed=2).meta_features()
    hard = load_dataset("synthetic", n_train=400, n_test=200, difficulty=1.0, seed=2).meta_features()
    assert easy["landmark_logreg"] > hard["landmark_logreg"]
    assert easy["landmark_1nn"] > hard["landmark_1nn"]


def test_meta_features():
    feats = load_dataset("digits").meta_features()
    assert feats["n_train"] == 1437 and feats["num_classes"] == 10 and feats["input_size"] == 64
    assert 0.8 < feats["class_balance"] <= 1.0
    assert feats["landmark_logreg"] > 0.85 and feats["landmark_1nn"] > 0.9


def test_bad_names_and_parameters():
    with pytest.raises(ParameterError, match="'workload' parameter must be one of"):
        load_dataset("imagenet")
    with pytest.raises(ParameterError, match="takes the parameters"):
        load_dataset("digits", colour=True)
    with pytest.raises(ParameterError, match="'n_train' parameter must be an int"):
        load_dataset("digits", n_train=5)
    with pytest.raises(ParameterError, match="'difficulty'"):
        load_dataset("synthetic", difficulty=2.0)


# --- the standard file formats, written small by the test --------------------------------------

def _idx_bytes(array: np.ndarray) -> bytes:
    codes = {np.dtype(np.uint8): 0x08}
    header = struct.pack(">BBBB", 0, 0, codes[array.dtype], array.ndim)
    header += struct.pack(">" + "I" * array.ndim, *array.shape)
    return gzip.compress(header + array.astype(">u1").tobytes())


def _write_idx_set(folder, n_train=40, n_test=20, side=28):
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, side, side), dtype=np.uint8),
        "train-labels-idx1-ubyte.gz": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, side, side), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": (np.arange(n_test) % 10).astype(np.uint8),
    }
    for name, array in arrays.items():
        (folder / name).write_bytes(_idx_bytes(array))
    return arrays


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_idx_loader_reads_the_real_format(tmp_path, monkeypatch, name):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    arrays = _write_idx_set(tmp_path / name)
    # The tiny files are not the official ones: verification refuses them by default...
    with pytest.raises(_files.ChecksumError, match="not the published"):
        load_dataset(name)
    # ...and reads them when told not to verify.
    data = load_dataset(name, verify=False)
    assert data.input_shape == (1, 28, 28)
    assert len(data.y_train) == 40 and len(data.y_test) == 20
    np.testing.assert_array_equal(data.y_train, arrays["train-labels-idx1-ubyte.gz"])
    raw = arrays["train-images-idx3-ubyte.gz"].astype(np.float32) / 255
    # Normalisation is an affine map of the raw pixels, the same for every pixel.
    corr = np.corrcoef(raw.ravel(), data.x_train.ravel())[0, 1]
    assert corr > 0.9999


def test_checksums_are_verified_against_the_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    _write_idx_set(tmp_path / "mnist")
    payload = (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").read_bytes()
    good = hashlib.sha256(payload).hexdigest()
    base, sums = _files.FILE_SETS["mnist"]
    patched = {**sums}
    for file in patched:
        patched[file] = hashlib.sha256((tmp_path / "mnist" / file).read_bytes()).hexdigest()
    monkeypatch.setitem(_files.FILE_SETS, "mnist", (base, patched))
    assert patched["train-images-idx3-ubyte.gz"] == good
    data = load_dataset("mnist", n_train=20)
    assert len(data.y_train) == 20


def test_missing_files_say_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    with pytest.raises(_files.DataFilesMissingError) as err:
        load_dataset("fashion_mnist")
    message = str(err.value)
    assert "train-images-idx3-ubyte.gz" in message and str(tmp_path / "fashion_mnist") in message


def test_truncated_idx_is_rejected(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(_idx_bytes(np.zeros((3, 4, 4), np.uint8)))
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:-5]))
    with pytest.raises(Exception, match="truncated"):
        _files.read_idx(path)


class _Python2Pickler(pickle._Pickler):
    """Writes bytes and str as Python 2 wrote its str (BINSTRING), as the official batches hold
    them (read back as bytes with ``encoding="bytes"``)."""

    dispatch = dict(pickle._Pickler.dispatch)

    def _save_str8(self, obj: bytes | str) -> None:
        raw = obj.encode("latin1") if isinstance(obj, str) else obj
        self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[bytes] = dispatch[str] = _save_str8


def _python2_numpy1(batch: dict) -> bytes:
    """A batch as the official files hold it: Python 2's protocol 2, numpy 1's module names."""
    buffer = io.BytesIO()
    _Python2Pickler(buffer, protocol=2).dump(batch)
    return buffer.getvalue().replace(b"numpy._core.", b"numpy.core.")


def _write_cifar(folder, batches: dict[str, bytes]) -> None:
    folder.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for stem, raw in batches.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{stem}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    (folder / "cifar-10-python.tar.gz").write_bytes(buffer.getvalue())


@pytest.mark.parametrize("dump", [_python2_numpy1, lambda b: pickle.dumps(b, protocol=2), pickle.dumps,
                                  lambda b: pickle.dumps(b, protocol=5)],
                         ids=["python2-numpy1", "protocol-2", "default", "protocol-5"])
def test_cifar10_tarball(tmp_path, monkeypatch, dump):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    rng = np.random.default_rng(1)
    batches = {}
    for stem, n in [("data_batch_1", 30), ("data_batch_2", 30), ("test_batch", 20)]:
        batch = {b"batch_label": b"training batch 1 of 5",
                 b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 b"labels": [int(i) for i in np.arange(n) % 10] if stem != "test_batch"
                 else list(np.arange(n) % 10),  # numpy ints too
                 b"filenames": [b"image_%d.png" % i for i in range(n)]}
        batches[stem] = dump(batch)
    _write_cifar(tmp_path / "cifar10", batches)
    data = load_dataset("cifar10", verify=False)
    assert data.input_shape == (3, 32, 32)
    assert len(data.y_train) == 60 and len(data.y_test) == 20
    assert data.y_test.tolist() == [i % 10 for i in range(20)]


class _RunsCode:
    """What a crafted batch may pickle: a call of ``os.system`` when it is loaded."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch '{self.marker}'",)


def test_a_cifar10_batch_that_would_run_code_is_refused_unverified(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    marker = tmp_path / "ran"
    evil = pickle.dumps({b"data": _RunsCode(marker), b"labels": [0]})
    pickle.loads(evil)  # a plain unpickler runs it: the file really is harmful
    assert marker.exists()
    marker.unlink()
    _write_cifar(tmp_path / "cifar10", {"data_batch_1": evil, "test_batch": evil})
    with pytest.raises(_files.DataFormatError) as info:
        load_dataset("cifar10", verify=False)
    assert not marker.exists()
    assert str(info.value).startswith(
        f"{tmp_path / 'cifar10' / 'cifar-10-python.tar.gz'}:cifar-10-batches-py/data_batch_1 is not a "
        "CIFAR-10 python batch (it names posix.system, which no CIFAR-10 batch holds)")
    assert isinstance(info.value, DltuneError)


def test_a_cifar10_batch_of_another_shape_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    good = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1]}
    _write_cifar(tmp_path / "cifar10", {"data_batch_1": pickle.dumps(good),
                                        "test_batch": pickle.dumps({**good, b"labels": [0, 10]})})
    with pytest.raises(_files.DataFormatError, match=r"test_batch is not a CIFAR-10 python batch \(2 images "
                                                     r"but labels of shape \(2,\) in \[0, 10\]\)"):
        load_dataset("cifar10", verify=False)


@pytest.mark.parametrize("layout", ["nhw", "nchw", "nhwc", "flat"])
def test_from_arrays_layouts(layout):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(50, 1, 10, 10)).astype(np.float32)
    make = {
        "nhw": lambda x: x[:, 0],
        "nchw": lambda x: x,
        "nhwc": lambda x: x.transpose(0, 2, 3, 1).repeat(3, axis=3),
        "flat": lambda x: x.reshape(len(x), -1),
    }[layout]
    y = np.arange(50) % 5
    # A float (N, F) array is tabular rows unless read as flat square images.
    modality = "image" if layout == "flat" else None
    data = from_arrays(make(base[:40]), y[:40], make(base[40:]), y[40:], modality=modality)
    assert isinstance(data, Dataset) and data.modality == "image"
    assert data.input_shape[1:] == (10, 10)
    assert data.num_classes == 5


def test_from_arrays_errors():
    x = np.zeros((20, 10, 10))
    y = np.arange(20) % 2
    with pytest.raises(ParameterError, match="'y_train' parameter must be a 1-D array of 20 labels"):
        from_arrays(x, y[:5], x, y)
    with pytest.raises(ParameterError, match="at least 8x8"):
        from_arrays(np.zeros((20, 4, 4)), y, np.zeros((20, 4, 4)), y)
    with pytest.raises(ParameterError, match="same sample shape"):
        from_arrays(x, y, np.zeros((20, 12, 12)), y)
    with pytest.raises(ParameterError, match="integer class labels"):
        from_arrays(x, y + 0.5, x, y)
    # Caught here, not by scikit-learn's landmarks or a backend's loss of NaN.
    bad = x.copy()
    bad[3, 2, 2], bad[7, 0, 1] = np.nan, np.inf
    with pytest.raises(ParameterError, match=r"The 'x_test' parameter must hold finite numbers\. "
                                             r"Got 2 NaN or infinite values of 2000\."):
        from_arrays(x, y, bad, y)
    with pytest.raises(ParameterError, match=r"The 'y_train' parameter must hold at least 2 classes "
                                             r"to learn\. Got only class 1\."):
        from_arrays(x, np.ones(20, dtype=int), x, y)


def test_a_workload_takes_class_labels_up_to_65535_only():
    """The class count is the largest label + 1: a stray 10**9 is refused, naming its array."""
    from dltune._workload import Workload
    from dltune.data._dataset import MAX_CLASS_LABEL

    x = np.random.default_rng(0).random((20, 8, 8))
    y = np.arange(20) % 2
    for y_train, y_test, message in [
        (np.where(y == 1, 10**9, 0), y, r"The 'y_train' parameter must hold class labels in \[0, 65535\] "
                                        r"\(the class count is the largest label \+ 1\)\. Got 1000000000 instead\."),
        (y, np.where(y == 1, MAX_CLASS_LABEL + 1, 0), r"The 'y_test' parameter .* Got 65536 instead\."),
        (y - 1, y, r"The 'y_train' parameter must hold class labels in \[0, 65535\] .* Got -1 instead\."),
        (y + 0.5, y, r"The 'y_train' parameter must hold integer class labels"),
    ]:
        with pytest.raises(ParameterError, match=message):
            Workload.from_arrays(x, y_train, x, y_test, model="mlp")
    widest = Workload.from_arrays(x, y * MAX_CLASS_LABEL, x, y, model="mlp")
    assert widest.dataset.num_classes == widest.model.num_classes == 65536
    # The same rule for the data layer's own entry points.
    with pytest.raises(ParameterError, match=r"The 'y' parameter .* Got 1000000000 instead\."):
        holdout_split(x, np.where(y == 1, 10**9, 0))


def test_a_pair_of_arrays_is_split_into_a_stratified_holdout():
    """``(x, y)``: a fifth held out for testing, class proportions kept, the same every time;
    a Workload from it trains on the rest."""
    from dltune._workload import as_workload

    rng = np.random.default_rng(3)
    x = rng.random((100, 8, 8))
    y = np.repeat([0, 1, 2, 3], [40, 30, 20, 10])
    x_train, y_train, x_test, y_test = holdout_split(x, y)
    assert (len(x_train), len(x_test)) == (80, 20)
    assert np.bincount(y_test).tolist() == [8, 6, 4, 2]  # stratified
    # Every sample lands on exactly one side.
    rows = {r.tobytes() for r in x_train} | {r.tobytes() for r in x_test}
    assert len(rows) == 100
    again = holdout_split(x, y)
    assert all(np.array_equal(a, b) for a, b in zip((x_train, y_train, x_test, y_test), again, strict=True))
    assert not np.array_equal(holdout_split(x, y, seed=1)[2], x_test)  # another seed, another split
    # Labels need not start at 0: 1..4 are stratified alike.
    assert np.bincount(holdout_split(x, y + 1)[3]).tolist() == [0, 8, 6, 4, 2]
    workload = as_workload((x, y), model="mlp")
    assert (len(workload.dataset.x_train), len(workload.dataset.x_test)) == (80, 20)
    assert workload.dataset.num_classes == 4
    with pytest.raises(ParameterError, match="'y' parameter must be a 1-D array of 100 labels"):
        holdout_split(x, y[:50])
    with pytest.raises(ParameterError, match="enough samples to hold out 0.2"):
        holdout_split(x[:2], y[:2])
    with pytest.raises(ParameterError, match="'test_fraction' parameter"):
        holdout_split(x, y, test_fraction=1.5)
    with pytest.raises(ParameterError, match=r"or a pair \(x, y\)\. Got a tuple of 3 instead"):
        as_workload((x, y, x))


@pytest.mark.parametrize("layout", ["C float32", "Fortran float64", "uint8", "reversed rows", "constant"])
def test_normalise_leaves_the_inputs_and_gives_the_step_by_step_values(layout):
    from dltune.data._dataset import normalise

    rng = np.random.default_rng(0)
    x = {"C float32": rng.random((300, 3, 8, 8), dtype=np.float32),
         "Fortran float64": np.asfortranarray(rng.random((300, 3, 8, 8))),
         "uint8": (rng.random((300, 3, 8, 8)) * 255).astype(np.uint8),
         "reversed rows": rng.random((300, 3, 8, 8))[:, :, ::-1, :],
         "constant": np.full((300, 3, 8, 8), 7.0)}[layout]
    x_test = x[:40][::-1]
    before, before_test = x.copy(), x_test.copy()
    train, test = normalise(x, x_test)
    assert np.array_equal(x, before) and np.array_equal(x_test, before_test)  # not written to
    # The values of the form it replaced, to the last bit (data sets' fingerprints depend on them).
    mean = x.astype(np.float32).mean(axis=(0, 2, 3), keepdims=True)
    std = x.astype(np.float32).std(axis=(0, 2, 3), keepdims=True)
    std[std == 0] = 1.0
    for got, raw in ((train, x), (test, x_test)):
        assert got.dtype == np.float32 and got.flags["C_CONTIGUOUS"]
        assert np.array_equal(got, (raw.astype(np.float32) - mean) / std)
