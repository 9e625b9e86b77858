"""IMDB movie reviews as token ids, from Keras's ``imdb.npz`` (its ``imdb.load_data`` files).

The file holds ``x_train`` / ``x_test`` object arrays of word-index lists (1 = the most
frequent word) and ``y_train`` / ``y_test`` labels (0 negative, 1 positive). Ids follow Keras's
convention: 0 pads, 1 starts a review, 2 is a word outside the vocabulary, a word of index i is
i + 3; a review is cut to its last ``max_length`` ids and padded in front, as Keras's
``pad_sequences`` does by default.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from dltune.data._files import DataFormatError, RestrictedUnpickler, ensure_files

__all__ = ["OOV", "PAD", "START", "load_imdb", "read_npz", "to_token_ids"]

PAD, START, OOV = 0, 1, 2
_INDEX_FROM = 3
_PARTS = ("x_train", "y_train", "x_test", "y_test")


def _read_npy(raw: bytes, holds: str) -> np.ndarray:
    fh = io.BytesIO(raw)
    version = np.lib.format.read_magic(fh)
    shape, fortran, dtype = (np.lib.format.read_array_header_1_0(fh) if version[0] == 1
                             else np.lib.format.read_array_header_2_0(fh))
    if dtype.hasobject:  # ragged lists are pickled: read them without running any code
        return np.asarray(RestrictedUnpickler(fh, holds).load())
    fh.seek(0)
    return np.lib.format.read_array(fh, allow_pickle=False)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file, its object arrays unpickled with numpy's globals only."""
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if member.endswith(".npy"):
                    arrays[member[:-4]] = _read_npy(archive.read(member), "numpy array file")
    except Exception as exc:  # noqa: BLE001 - whatever a corrupt or crafted file raises
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataFormatError(f"{path} is not an .npz file of numpy arrays ({why}).") from None
    return arrays


def to_token_ids(reviews: np.ndarray, vocab_size: int, max_length: int) -> np.ndarray:
    """(N, max_length) int64 token ids of word-index lists, Keras's way (see the module)."""
    ids = np.full((len(reviews), max_length), PAD, dtype=np.int64)
    for i, review in enumerate(reviews):
        row = np.concatenate(([START], np.asarray(review, dtype=np.int64) + _INDEX_FROM))
        row[row >= vocab_size] = OOV
        row = row[-max_length:]
        ids[i, max_length - len(row):] = row
    return ids


def load_imdb(folder: Path, download: bool, verify: bool, vocab_size: int,
              max_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train and test token ids (N, max_length) and labels from ``folder/imdb.npz``."""
    path = ensure_files("imdb", folder, download, verify)["imdb.npz"]
    arrays = read_npz(path)
    missing = [p for p in _PARTS if p not in arrays]
    if missing:
        raise DataFormatError(f"{path} holds no {', '.join(missing)}: it is not Keras's imdb.npz.")
    out = []
    for part in ("train", "test"):
        reviews, labels = arrays[f"x_{part}"], np.asarray(arrays[f"y_{part}"])
        if labels.shape != (len(reviews),) or not np.issubdtype(labels.dtype, np.integer):
            raise DataFormatError(f"{path}: x_{part} holds {len(reviews)} reviews but y_{part} is "
                                  f"{labels.dtype} of shape {labels.shape}.")
        try:
            ids = to_token_ids(reviews, vocab_size, max_length)
        except (TypeError, ValueError) as exc:
            raise DataFormatError(f"{path}: x_{part} is not lists of word indices ({exc}).") from None
        if ids.min(initial=0) < 0:
            raise DataFormatError(f"{path}: x_{part} holds negative word indices.")
        out += [ids, labels.astype(np.int64)]
    return out[0], out[1], out[2], out[3]
