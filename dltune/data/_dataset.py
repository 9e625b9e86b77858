"""The :class:`Dataset`: train and test arrays in dltune's canonical form, plus meta-features."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune._validation import check_float
from dltune.data._kind import check_modality, describe_data, describe_modalities, modality_readings
from dltune.data._split import stratified_subset

__all__ = ["HOLDOUT_FRACTION", "Dataset", "array_modalities", "from_arrays", "holdout_split", "normalise",
           "stratified_subset"]

# Landmarks are fitted on at most this many samples so they cost a second or two at most.
_LANDMARK_TRAIN = 1000
_LANDMARK_TEST = 500


@dataclass(eq=False)
class Dataset:
    """Classification data of one ``modality`` (:data:`dltune.data.MODALITIES`) in the canonical
    layout: ``x`` arrays are float32 images (N, C, H, W), tabular rows (N, F), token ids (N, T)
    or sequences (N, F, T); labels int64 in [0, classes).

    Build one with :func:`dltune.data.load_dataset` or :func:`from_arrays`; the arrays are
    already normalised (zero mean, unit variance per channel or feature, statistics from the
    train split), but for token ids, which index a vocabulary of ``vocab_size``.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    params: dict[str, Any] = field(default_factory=dict)
    num_classes: int = 0
    modality: str = "image"
    vocab_size: int = 0
    _fingerprint: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_modality(self.modality)
        if not self.num_classes:
            self.num_classes = int(max(self.y_train.max(), self.y_test.max())) + 1
        if self.modality == "tokens" and not self.vocab_size:
            self.vocab_size = int(max(self.x_train.max(), self.x_test.max())) + 1

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One sample's canonical shape: (C, H, W), (F,), (T,) or (F, T)."""
        return tuple(int(v) for v in self.x_train.shape[1:])

    @property
    def features(self) -> int:
        """Values per position: an image's channels, a row's or a sequence step's features, 1 for token ids."""
        return 1 if self.modality == "tokens" else self.input_shape[0]

    @property
    def sequence_length(self) -> int:
        """Positions of a token or feature sequence; 0 for images and tabular rows."""
        return self.input_shape[-1] if self.modality in ("tokens", "sequence") else 0

    def _grid(self) -> tuple[int, int, int]:
        """The shape as (channels, height, width), what image meta-features are named by: a
        row or a token sequence is one channel of 1 x length, a sequence F channels of 1 x T."""
        shape = self.input_shape
        if self.modality == "image":
            return shape[0], shape[1], shape[2]
        return (shape[0], 1, shape[1]) if self.modality == "sequence" else (1, 1, shape[0])

    def fingerprint(self) -> str:
        """A SHA-256 prefix of the name, parameters and array contents."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            # Images hash without their modality, so the knowledge base's image workloads keep
            # their fingerprints; the others add it (the same (N, T) array may be rows or ids).
            named = [self.name, self.params] + ([self.modality] if self.modality != "image" else [])
            digest.update(json.dumps(named, sort_keys=True, default=str).encode())
            for array in (self.x_train, self.y_train, self.x_test, self.y_test):
                digest.update(str(array.shape).encode())
                digest.update(np.ascontiguousarray(array).tobytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def meta_features(self) -> dict[str, Any]:
        """Sizes, shape, class balance and cheap landmarks (cached on disk per fingerprint)."""
        counts = np.bincount(self.y_train, minlength=self.num_classes)
        freq = counts / counts.sum()
        nonzero = freq[freq > 0]
        entropy = float(-(nonzero * np.log(nonzero)).sum() / np.log(self.num_classes))
        c, h, w = self._grid()
        features: dict[str, Any] = {
            "n_train": int(len(self.y_train)),
            "n_test": int(len(self.y_test)),
            "modality": self.modality,
            "channels": c,
            "height": h,
            "width": w,
            "input_size": c * h * w,
            "features": self.features,
            "sequence_length": self.sequence_length,
            "vocab_size": int(self.vocab_size),
            "num_classes": int(self.num_classes),
            "class_balance": float(counts.min() / counts.max()) if counts.max() else 0.0,
            "class_entropy": entropy,
        }
        features.update(self.landmarks())
        return features

    def landmarks(self) -> dict[str, float]:
        """Accuracy of logistic regression and 1-nearest-neighbour on a subsample.

        They say how hard the data is; computed once per data set and cached in the dltune
        cache folder.
        """
        from dltune._paths import cache_dir

        path = cache_dir() / "landmarks" / f"{self.fingerprint()}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
        result = _compute_landmarks(self.x_train, self.y_train, self.x_test, self.y_test)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{time.monotonic_ns()}.tmp")
            tmp.write_text(json.dumps(result))
            tmp.replace(path)
        except OSError:
            pass
        return result

    def summary(self) -> str:
        shape = "x".join(map(str, self.input_shape)) if self.modality == "image" else \
            describe_data(self.modality, self.input_shape)
        vocab = f" of {self.vocab_size:,d}" if self.modality == "tokens" else ""
        return (
            f"{self.name}: {len(self.y_train)} train / {len(self.y_test)} test, "
            f"{shape}{vocab}, {self.num_classes} classes"
        )


def _compute_landmarks(x_train, y_train, x_test, y_test) -> dict[str, float]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    rng = np.random.default_rng(0)
    tr = rng.permutation(len(y_train))[:_LANDMARK_TRAIN]
    te = rng.permutation(len(y_test))[:_LANDMARK_TEST]
    xtr, ytr = x_train[tr].reshape(len(tr), -1), y_train[tr]
    xte, yte = x_test[te].reshape(len(te), -1), y_test[te]
    t0 = time.perf_counter()
    logreg = LogisticRegression(max_iter=200, tol=1e-3).fit(xtr, ytr)
    knn = KNeighborsClassifier(n_neighbors=1).fit(xtr, ytr)
    return {
        "landmark_logreg": float(logreg.score(xte, yte)),
        "landmark_1nn": float(knn.score(xte, yte)),
        "landmark_seconds": time.perf_counter() - t0,
    }


# The axes each channel or feature is standardised over; token ids are not standardised.
_NORMALISED_OVER = {"image": (0, 2, 3), "tabular": (0,), "sequence": (0, 2)}


def normalise(x_train: np.ndarray, x_test: np.ndarray, modality: str = "image") -> tuple[np.ndarray, np.ndarray]:
    """Standardise each channel (or feature) with the train split's mean and standard deviation.

    The caller's arrays are left as they are; each is copied once and standardised in place, in
    its own memory order, so the sums, and so the values, are those of the step-by-step form (a
    new array per step) to the last bit. ``benchmarks/array_workload_speed.py``: 0.09-0.10 s
    against 0.81-1.09 s on fresh memory for 60,000 + 10,000 samples of 28 x 28.
    """
    x_train = np.array(x_train, dtype=np.float32)
    x_test = np.array(x_test, dtype=np.float32)
    if modality not in _NORMALISED_OVER:
        return np.ascontiguousarray(x_train), np.ascontiguousarray(x_test)
    axes = _NORMALISED_OVER[modality]
    mean = x_train.mean(axis=axes, keepdims=True)
    std = x_train.std(axis=axes, keepdims=True)
    std[std == 0] = 1.0
    for part in (x_train, x_test):
        part -= mean
        part /= std
    return np.ascontiguousarray(x_train), np.ascontiguousarray(x_test)


def array_modalities(x: Any, name: str = "x_train") -> tuple[str, ...]:
    """The modalities the samples of array ``x`` can be read as, its default reading first
    (:func:`dltune.data._kind.modality_readings`); a ParameterError naming ``name`` for none."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_:
        raise ParameterError(f"The '{name}' parameter must hold numbers. Got dtype {x.dtype} instead.")
    readings = modality_readings(x.shape[1:], np.issubdtype(x.dtype, np.integer)) if x.ndim >= 2 else ()
    if not readings:
        raise ParameterError(
            f"The '{name}' parameter must be images (N, C, H, W), (N, H, W, C) or (N, H, W), "
            f"tabular rows or token ids (N, F), or sequences (N, T, F). Got shape {x.shape} instead."
        )
    return readings


# Token ids are held as float32, which holds every integer up to 2**24 exactly.
_MAX_TOKEN_ID = 2**24


def _as_inputs(name: str, x: Any, modality: str) -> np.ndarray:
    """``x`` as float32 samples of ``modality`` in the canonical layout (see :class:`Dataset`)."""
    x = np.asarray(x)
    readings = array_modalities(x, name)
    if modality not in readings:
        raise ParameterError(
            f"The '{name}' parameter must be {modality} samples, {describe_modalities([modality])}. "
            f"Got shape {x.shape}, which reads as {describe_modalities(readings)}."
        )
    if modality == "image":
        if x.ndim == 2:
            side = int(round(np.sqrt(x.shape[1])))
            x = x.reshape(len(x), 1, side, side)
        elif x.ndim == 3:
            x = x[:, None, :, :]
        elif x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
            x = x.transpose(0, 3, 1, 2)  # channels-last when the last axis is small and the second is not
    elif modality == "sequence":
        x = x.transpose(0, 2, 1)
    elif modality == "tokens" and len(x) and (x.min() < 0 or x.max() >= _MAX_TOKEN_ID):
        bad = int(x.min()) if x.min() < 0 else int(x.max())
        raise ParameterError(
            f"The '{name}' parameter must hold token ids in [0, {_MAX_TOKEN_ID - 1}]. Got {bad} instead."
        )
    x = x.astype(np.float32)
    bad = int(x.size - np.count_nonzero(np.isfinite(x)))
    if bad:  # every backend would train on them and report a loss of NaN
        raise ParameterError(
            f"The '{name}' parameter must hold finite numbers. Got {bad} NaN or infinite "
            f"value{'s' if bad > 1 else ''} of {x.size}."
        )
    return x


#: The largest class label of user arrays. The class count is the largest label + 1 (labels
#: that do not occur still get an output), so a stray 10**9 would ask for a billion outputs.
MAX_CLASS_LABEL = 65535


def _as_labels(name: str, y: Any, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n:
        raise ParameterError(
            f"The '{name}' parameter must be a 1-D array of {n} labels. Got shape {y.shape} instead."
        )
    if not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(np.mod(y, 1) == 0):
            y = y.astype(np.int64)
        else:
            raise ParameterError(
                f"The '{name}' parameter must hold integer class labels. Got dtype {y.dtype} instead."
            )
    if len(y) and (y.min() < 0 or y.max() > MAX_CLASS_LABEL):
        bad = int(y.min()) if y.min() < 0 else int(y.max())
        raise ParameterError(
            f"The '{name}' parameter must hold class labels in [0, {MAX_CLASS_LABEL}] (the class "
            f"count is the largest label + 1). Got {bad} instead."
        )
    return y.astype(np.int64)


#: The share of the samples :func:`holdout_split` holds out for testing.
HOLDOUT_FRACTION = 0.2


def holdout_split(x: Any, y: Any, *, test_fraction: float = HOLDOUT_FRACTION,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_test, y_test)`` from one labelled set: ``test_fraction`` of the
    samples held out, stratified by class where every class has two samples or more, the same
    split for the same arrays and ``seed``. What a workload given as ``(x, y)`` is split into."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise ParameterError(f"The 'x' parameter must be an array of samples. Got shape {x.shape} instead.")
    y = _as_labels("y", y, len(x))
    test_fraction = check_float("test_fraction", test_fraction, 0.0, 1.0, low_open=True, high_open=True)
    n_test = int(round(test_fraction * len(y)))
    if n_test < 1 or n_test >= len(y):
        raise ParameterError(
            f"The 'x' parameter must hold enough samples to hold out {test_fraction:g} of them for "
            f"testing and train on the rest. Got {len(y)} samples."
        )
    train = np.zeros(len(y), dtype=bool)
    train[stratified_subset(y, len(y) - n_test, seed)] = True
    return x[train], y[train], x[~train], y[~train]


def from_arrays(x_train, y_train, x_test, y_test, *, name: str = "arrays", modality: str | None = None) -> Dataset:
    """A :class:`Dataset` from user arrays, normalised like the registered data sets.

    Images may be (N, C, H, W), (N, H, W, C), square (N, H, W) or flat square (N, side*side),
    at least 8x8; tabular rows (N, F) floats; token ids (N, T) integers; sequences (N, T, F).
    ``modality`` reads the arrays as one of the readings their shape allows
    (:func:`array_modalities`); None takes the first: a square (N, H, W) is a grey image, any
    other (N, T, F) a sequence, an integer (N, T) token ids, a float (N, F) tabular rows.
    """
    modality = array_modalities(x_train)[0] if modality is None else check_modality(modality)
    xtr, xte = _as_inputs("x_train", x_train, modality), _as_inputs("x_test", x_test, modality)
    ytr, yte = _as_labels("y_train", y_train, len(xtr)), _as_labels("y_test", y_test, len(xte))
    if xtr.shape[1:] != xte.shape[1:]:
        raise ParameterError(
            f"The 'x_test' parameter must have the same sample shape as x_train {xtr.shape[1:]}. "
            f"Got {xte.shape[1:]} instead."
        )
    if modality == "image" and min(xtr.shape[2:]) < 8:
        raise ParameterError(f"Images must be at least 8x8. Got {xtr.shape[2]}x{xtr.shape[3]}.")
    if len(xtr) == 0 or len(xte) == 0:
        raise ParameterError("The 'x_train' and 'x_test' parameters must each hold at least one sample.")
    if len(np.unique(ytr)) < 2:
        raise ParameterError(
            f"The 'y_train' parameter must hold at least 2 classes to learn. Got only class {int(ytr[0])}."
        )
    xtr, xte = normalise(xtr, xte, modality)
    classes = int(max(ytr.max(), yte.max())) + 1
    return Dataset(name, xtr, ytr, xte, yte, params={}, num_classes=classes, modality=modality)
