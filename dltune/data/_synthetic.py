"""Generated image classification data with controllable size, shape and difficulty."""

from __future__ import annotations

import numpy as np

from dltune._validation import check_float, check_int

__all__ = ["make_synthetic"]


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
