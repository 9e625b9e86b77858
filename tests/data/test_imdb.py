"""IMDB's word-index arrays (Keras's ``imdb.npz``): token ids Keras's way, SHA-256 checked,
and a file that would run code refused; all on tiny files the tests write."""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import pytest

from dltune.data import _files, load_dataset
from dltune.data._imdb import OOV, START


def _reviews(*lists: list[int]) -> np.ndarray:
    out = np.empty(len(lists), dtype=object)
    out[:] = [list(item) for item in lists]
    return out


def _write_imdb(folder, n: int = 12) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    reviews = [rng.integers(1, 40, size=int(rng.integers(3, 9))).tolist() for _ in range(2 * n)]
    labels = np.arange(2 * n) % 2
    np.savez(folder / "imdb.npz", x_train=_reviews(*reviews[:n]), y_train=labels[:n],
             x_test=_reviews(*reviews[n:]), y_test=labels[n:])


def test_reviews_become_padded_capped_token_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    folder = tmp_path / "imdb"
    folder.mkdir()
    train = _reviews([5, 1, 2], [7, 8, 9, 30, 31, 4], *[[3]] * 10)
    np.savez(folder / "imdb.npz", x_train=train, y_train=np.arange(12) % 2,
             x_test=_reviews(*[[2, 2]] * 10), y_test=np.arange(10) % 2)
    data = load_dataset("imdb", vocab_size=20, max_length=5, verify=False)
    assert (data.modality, data.input_shape, data.vocab_size, data.num_classes) == ("tokens", (5,), 20, 2)
    # A start id, then each index + 3 (20 and over out of the vocabulary), padded or cut in front.
    assert data.x_train[0].tolist() == [0, START, 8, 4, 5]
    assert data.x_train[1].tolist() == [11, 12, OOV, OOV, 7]
    assert data.x_test[0].tolist() == [0, 0, START, 5, 5]
    assert data.y_train.tolist() == (np.arange(12) % 2).tolist()


def test_the_published_checksum_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    with pytest.raises(_files.DataFilesMissingError, match=r"needs the file\(s\) imdb.npz"):
        load_dataset("imdb")
    _write_imdb(tmp_path / "imdb")
    with pytest.raises(_files.ChecksumError, match="not the published 69664113"):
        load_dataset("imdb")
    assert len(load_dataset("imdb", verify=False, n_train=10).y_train) == 10


class _RunsCode:
    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_file_that_would_run_code_is_refused_unverified(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_DATA", str(tmp_path))
    marker = tmp_path / "ran"
    folder = tmp_path / "imdb"
    folder.mkdir()
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": (1,)})
    payload = pickle.dumps(_RunsCode(marker))
    pickle.loads(payload)  # a plain unpickler runs it: the file really is harmful
    assert marker.exists()
    marker.unlink()
    evil = header.getvalue() + payload
    with zipfile.ZipFile(folder / "imdb.npz", "w") as archive:
        for part in ("x_train", "y_train", "x_test", "y_test"):
            archive.writestr(f"{part}.npy", evil)
    with pytest.raises(_files.DataFormatError, match=r"imdb.npz is not an .npz file of numpy arrays "
                                                     r"\(it names io.open, which no numpy array file holds\)"):
        load_dataset("imdb", verify=False)
    assert not marker.exists()
