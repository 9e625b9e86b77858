"""Generated classification data (images, tabular rows, sequences, token ids) with
controllable size, shape and difficulty.

Every generator builds one prototype per class, then gives each sample its class's prototype
rescaled, mixed with another class's and noised; ``difficulty`` in [0, 1] raises the noise, the
mixing (and, where there is an axis to move along, the shifts) at once: 0 is nearly
separable, 1 is hard for a linear model.
"""

from __future__ import annotations

import numpy as np

from dltune._validation import check_float, check_int

__all__ = ["make_synthetic", "make_synthetic_sequence", "make_synthetic_tabular", "make_synthetic_tokens"]


def _smooth_field(rng: np.random.Generator, channels: int, height: int, width: int, blobs: int) -> np.ndarray:
    """A sum of Gaussian blobs per channel: smooth, class-specific structure."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    field = np.zeros((channels, height, width), dtype=np.float32)
    for c in range(channels):
        for _ in range(blobs):
            cy, cx = rng.uniform(0, height), rng.uniform(0, width)
            sigma = rng.uniform(0.08, 0.25) * min(height, width)
            amp = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.0)
            field[c] += amp * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2))
    return field


def make_synthetic(
    n_train: int = 2000,
    n_test: int = 500,
    height: int = 16,
    width: int = 16,
    channels: int = 1,
    classes: int = 10,
    difficulty: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images made of a class prototype, shifted, rescaled, mixed with another class and noised.

    ``difficulty`` in [0, 1] raises the noise, the shifts and the share of a distracting second
    prototype at once; 0 is nearly separable, 1 is hard for a linear model.
    """
    n_train = check_int("n_train", n_train, 10, 10_000_000)
    n_test = check_int("n_test", n_test, 10, 10_000_000)
    height = check_int("height", height, 8, 1024)
    width = check_int("width", width, 8, 1024)
    channels = check_int("channels", channels, 1, 16)
    classes = check_int("classes", classes, 2, 1000)
    difficulty = check_float("difficulty", difficulty, 0.0, 1.0)
    seed = check_int("seed", seed, 0, 2**32 - 1)

    rng = np.random.default_rng([seed, 31337])
    prototypes = np.stack(
        [_smooth_field(rng, channels, height, width, blobs=4) for _ in range(classes)]
    )
    n = n_train + n_test
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    max_shift = int(round(difficulty * 0.15 * min(height, width)))
    noise = 0.15 + 0.9 * difficulty
    mix = 0.6 * difficulty
    x = np.empty((n, channels, height, width), dtype=np.float32)
    others = (labels + rng.integers(1, classes, size=n)) % classes
    amps = rng.uniform(0.7, 1.3, size=n).astype(np.float32)
    shifts = rng.integers(-max_shift, max_shift + 1, size=(n, 2)) if max_shift else np.zeros((n, 2), int)
    for i in range(n):
        img = amps[i] * prototypes[labels[i]] + mix * prototypes[others[i]]
        if max_shift:
            img = np.roll(img, tuple(shifts[i]), axis=(1, 2))
        x[i] = img
    x += rng.normal(0.0, noise, size=x.shape).astype(np.float32)
    y = labels.astype(np.int64)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _labels(rng: np.random.Generator, n: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Balanced shuffled labels and, for each sample, a distracting other class."""
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    return labels, (labels + rng.integers(1, classes, size=n)) % classes


def _sizes(n_train: int, n_test: int, classes: int, difficulty: float, seed: int) -> tuple[int, int, int, float, int]:
    return (check_int("n_train", n_train, 10, 10_000_000), check_int("n_test", n_test, 10, 10_000_000),
            check_int("classes", classes, 2, 1000), check_float("difficulty", difficulty, 0.0, 1.0),
            check_int("seed", seed, 0, 2**32 - 1))


def make_synthetic_tabular(
    n_train: int = 2000,
    n_test: int = 500,
    features: int = 20,
    informative: float = 0.5,
    classes: int = 2,
    difficulty: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(N, features) rows: class centroids on the first ``informative`` share of the features
    (at least one), the rest pure noise; each feature on its own scale and offset, as measured
    columns are. ``difficulty`` raises the noise and the share of a second class's centroid."""
    n_train, n_test, classes, difficulty, seed = _sizes(n_train, n_test, classes, difficulty, seed)
    features = check_int("features", features, 1, 100_000)
    informative = check_float("informative", informative, 0.0, 1.0, low_open=True)
    rng = np.random.default_rng([seed, 31338])
    n_info = max(1, int(round(informative * features)))
    centroids = np.zeros((classes, features), dtype=np.float32)
    centroids[:, :n_info] = rng.normal(0.0, 1.0, size=(classes, n_info))
    n = n_train + n_test
    labels, others = _labels(rng, n, classes)
    amps = rng.uniform(0.7, 1.3, size=(n, 1)).astype(np.float32)
    x = amps * centroids[labels] + 0.6 * difficulty * centroids[others]
    x += rng.normal(0.0, 0.15 + 0.9 * difficulty, size=x.shape).astype(np.float32)
    x = x * rng.lognormal(0.0, 1.0, size=features).astype(np.float32) + rng.normal(0.0, 3.0, size=features)
    y = labels.astype(np.int64)
    x = x.astype(np.float32)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def make_synthetic_sequence(
    n_train: int = 2000,
    n_test: int = 500,
    length: int = 32,
    features: int = 4,
    classes: int = 4,
    difficulty: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(N, length, features) sequences: a class prototype per feature is a sum of two sinusoids
    of class-specific frequency and phase, shifted in time by up to ``0.25 * difficulty`` of the
    length, mixed with another class's and noised."""
    n_train, n_test, classes, difficulty, seed = _sizes(n_train, n_test, classes, difficulty, seed)
    length = check_int("length", length, 2, 100_000)
    features = check_int("features", features, 1, 10_000)
    rng = np.random.default_rng([seed, 31339])
    t = np.arange(length, dtype=np.float32)[None, :, None] / length
    freq = rng.uniform(0.5, 4.0, size=(classes, 2, 1, features))
    phase = rng.uniform(0.0, 2 * np.pi, size=(classes, 2, 1, features))
    prototypes = np.sin(2 * np.pi * freq * t + phase).sum(axis=1).astype(np.float32)
    n = n_train + n_test
    labels, others = _labels(rng, n, classes)
    amps = rng.uniform(0.7, 1.3, size=(n, 1, 1)).astype(np.float32)
    x = amps * prototypes[labels] + 0.6 * difficulty * prototypes[others]
    max_shift = int(round(difficulty * 0.25 * length))
    if max_shift:
        for i, shift in enumerate(rng.integers(-max_shift, max_shift + 1, size=n)):
            x[i] = np.roll(x[i], int(shift), axis=0)
    x += rng.normal(0.0, 0.15 + 0.9 * difficulty, size=x.shape).astype(np.float32)
    y = labels.astype(np.int64)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def make_synthetic_tokens(
    n_train: int = 2000,
    n_test: int = 500,
    length: int = 64,
    vocab_size: int = 1000,
    classes: int = 2,
    difficulty: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(N, length) token ids in [1, vocab_size): a text-like Zipf background in which each class
    prefers its own 20 tokens; ``difficulty`` lowers the share of a sample's tokens drawn from its
    class's preferred ones (from 0.5 to 0.05) and raises the share drawn from another class's."""
    n_train, n_test, classes, difficulty, seed = _sizes(n_train, n_test, classes, difficulty, seed)
    length = check_int("length", length, 2, 100_000)
    vocab_size = check_int("vocab_size", vocab_size, 2 + 20 * classes, 10_000_000)
    rng = np.random.default_rng([seed, 31340])
    background = 1.0 / np.arange(1, vocab_size)
    background /= background.sum()
    preferred = rng.permutation(np.arange(1, vocab_size))[: 20 * classes].reshape(classes, 20)
    n = n_train + n_test
    labels, others = _labels(rng, n, classes)
    x = rng.choice(np.arange(1, vocab_size), size=(n, length), p=background)
    own, mixed = 0.5 - 0.45 * difficulty, 0.3 * difficulty
    draw = rng.random((n, length))
    pick = rng.integers(0, 20, size=(n, length))
    x = np.where(draw < own, preferred[labels][np.arange(n)[:, None], pick], x)
    x = np.where((draw >= own) & (draw < own + mixed), preferred[others][np.arange(n)[:, None], pick], x)
    y = labels.astype(np.int64)
    x = x.astype(np.int64)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]
