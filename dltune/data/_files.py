"""Readers for the standard distributed files of MNIST, Fashion-MNIST and CIFAR-10 (IMDB's are
in :mod:`dltune.data._imdb`).

Files are read from ``data_dir()/<name>/`` (``$DLTUNE_DATA``), verified against their published
SHA-256 sums, and downloaded only when asked to (``download=True``).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from dltune._errors import DltuneError

__all__ = ["DataFilesMissingError", "ChecksumError", "DataFormatError", "FILE_SETS", "RestrictedUnpickler",
           "read_idx", "load_idx_set", "load_cifar10"]


class DataFilesMissingError(DltuneError, FileNotFoundError):
    """A data set's files are not where dltune reads them; the message says what to put where."""


class ChecksumError(DltuneError, ValueError):
    """A data file's SHA-256 sum is not the published one."""


class DataFormatError(DltuneError, ValueError):
    """A data file's contents are not in its published format; the message names the file."""


_IDX_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")

#: name -> (download base URL, {file: sha256})
FILE_SETS: dict[str, tuple[str, dict[str, str]]] = {
    "mnist": (
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        dict(zip(_IDX_FILES, (
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        ), strict=True)),
    ),
    "fashion_mnist": (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        dict(zip(_IDX_FILES, (
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        ), strict=True)),
    ),
    "cifar10": (
        "https://www.cs.toronto.edu/~kriz/",
        {"cifar-10-python.tar.gz": "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"},
    ),
    "imdb": (  # Keras's IMDB word-index arrays
        "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
        {"imdb.npz": "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"},
    ),
}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path) -> None:
    import urllib.request

    tmp = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, tmp.open("wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataFilesMissingError(f"Could not download {url}: {exc}") from None
    tmp.replace(target)


def ensure_files(name: str, folder: Path, download: bool, verify: bool) -> dict[str, Path]:
    """The paths of ``name``'s files in ``folder``, downloaded if asked and verified."""
    base, sums = FILE_SETS[name]
    missing = [f for f in sums if not (folder / f).is_file()]
    if missing and download:
        folder.mkdir(parents=True, exist_ok=True)
        for file in missing:
            _download(base + file, folder / file)
        missing = []
    if missing:
        raise DataFilesMissingError(
            f"Data set '{name}' needs the file(s) {', '.join(missing)} in {folder} "
            f"(from {base}). Put them there (or set DLTUNE_DATA to the folder that holds '{name}/'), "
            f"or pass download=True (on the command line: --data download=true) where there is network."
        )
    paths = {f: folder / f for f in sums}
    if verify:
        for file, expected in sums.items():
            actual = sha256_file(paths[file])
            if actual != expected:
                raise ChecksumError(
                    f"{paths[file]} has SHA-256 {actual}, not the published {expected}: the file is "
                    f"corrupt or not the official one. Replace it, or pass verify=False to use it anyway."
                )
    return paths


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzip-compressed or not) as a numpy array."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DltuneError(f"{path} is not an IDX file (bad magic number).")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in dtypes:
        raise DltuneError(f"{path} has an unknown IDX data type 0x{raw[2]:02x}.")
    ndim = raw[3]
    dims = np.frombuffer(raw, ">u4", count=ndim, offset=4).astype(int)
    dtype = np.dtype(dtypes[raw[2]])
    expected = 4 + 4 * ndim + int(np.prod(dims)) * dtype.itemsize
    if len(raw) != expected:
        raise DltuneError(f"{path} is truncated or padded: {len(raw)} bytes, expected {expected}.")
    return np.frombuffer(raw, dtype, offset=4 + 4 * ndim).reshape(tuple(dims)).astype(dtype.newbyteorder("="))


def load_idx_set(name: str, folder: Path, download: bool, verify: bool):
    paths = ensure_files(name, folder, download, verify)
    x_train, y_train, x_test, y_test = (read_idx(paths[f]) for f in _IDX_FILES)
    for x, y, split in ((x_train, y_train, "train"), (x_test, y_test, "test")):
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DltuneError(f"{name} {split} files disagree: images {x.shape}, labels {y.shape}.")
    return x_train[:, None], y_train.astype(np.int64), x_test[:, None], y_test.astype(np.int64)


def _latin1(text: str, encoding: str) -> bytes:
    """``_codecs.encode`` as pickle protocols 0-2 call it to write bytes, and no other codec."""
    if encoding != "latin1" or not isinstance(text, str):
        raise pickle.UnpicklingError(f"_codecs.encode with {encoding!r}")
    return text.encode("latin1")


@functools.cache
def _numpy_globals() -> dict[tuple[str, str], Any]:
    """The only callables a CIFAR-10 batch or a Keras ``.npz`` object array may name: numpy's array, dtype and scalar
    constructors (under numpy 1's and numpy 2's module names) and pickle's own bytes helpers."""
    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy < 2 (the legacy runtime)
        from numpy.core import multiarray, numeric
    allowed: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1,
        ("builtins", "bytes"): bytes,
        ("__builtin__", "bytes"): bytes,
    }
    for package in ("numpy.core", "numpy._core"):
        allowed[(f"{package}.multiarray", "_reconstruct")] = multiarray._reconstruct
        allowed[(f"{package}.multiarray", "scalar")] = multiarray.scalar
        allowed[(f"{package}.numeric", "_frombuffer")] = numeric._frombuffer
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """Reads what the official pickled files hold (dicts, bytes, lists, ints and numpy arrays)
    and refuses any other global, so a crafted file cannot run code, verified or not; ``holds``
    names the kind of file in the refusal."""

    def __init__(self, file: Any, holds: str, **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        self.holds = holds

    def find_class(self, module: str, name: str) -> Any:
        allowed = _numpy_globals()
        if (module, name) not in allowed:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which no {self.holds} holds")
        return allowed[(module, name)]


def _cifar_batch(raw: bytes, source: str) -> tuple[np.ndarray, np.ndarray]:
    """One batch's images (N, 3, 32, 32) and labels; a ``DataFormatError`` naming ``source``
    for anything else."""
    try:
        batch = RestrictedUnpickler(io.BytesIO(raw), "CIFAR-10 batch", encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
        if labels.shape != (len(data),) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
            raise ValueError(f"{len(data)} images but labels of shape {labels.shape} "
                             f"in [{labels.min(initial=0)}, {labels.max(initial=0)}]")
    except Exception as exc:  # noqa: BLE001 - whatever a corrupt or crafted file raises
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataFormatError(
            f"{source} is not a CIFAR-10 python batch ({why}): the file is corrupt or not the "
            "official one. Replace it with the official cifar-10-python.tar.gz."
        ) from None
    return data, labels


def load_cifar10(folder: Path, download: bool, verify: bool):
    """CIFAR-10's python version: the tarball's five train batches and its test batch."""
    paths = ensure_files("cifar10", folder, download, verify)
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with tarfile.open(paths["cifar-10-python.tar.gz"], "r:gz") as tar:
        for member in tar.getmembers():
            stem = Path(member.name).name
            if stem.startswith("data_batch_") or stem == "test_batch":
                fh = tar.extractfile(member)
                if fh is not None:
                    parts[stem] = _cifar_batch(fh.read(), f"{paths['cifar-10-python.tar.gz']}:{member.name}")
    train = [parts[k] for k in sorted(parts) if k.startswith("data_batch_")]
    if not train or "test_batch" not in parts:
        raise DltuneError(f"{paths['cifar-10-python.tar.gz']} holds no data_batch_* / test_batch files.")
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    x_test, y_test = parts["test_batch"]
    return x_train, y_train, x_test, y_test
