"""How fast a workload given as arrays is prepared: normalising, and ``recommend`` on it.

    python benchmarks/array_workload_speed.py [--n-train N] [--repeats R]

Prints, measured side by side in one run on this machine, for random MNIST-shaped arrays
(``N`` x 1 x 28 x 28 float32 for training, a sixth of that for testing):

- ``dltune.data._dataset.normalise`` against the step-by-step form it replaced (a new array for
  the type, the centring and the scaling), with their ratio; both give the same values to the
  last bit (tests/data/test_datasets.py);
- ``dltune.recommend((x_train, y_train, x_test, y_test), storage=None)`` in new processes, each
  with a cache of its own, with dltune's ``normalise`` and with the step-by-step form patched
  in: the first call (importing scikit-learn and computing the landmarks included) and a second
  one (the arrays fingerprinted and normalised again, the model and landmarks cached).

Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _step_by_step(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x_train = x_train.astype(np.float32)
    x_test = x_test.astype(np.float32)
    mean = x_train.mean(axis=(0, 2, 3), keepdims=True)
    std = x_train.std(axis=(0, 2, 3), keepdims=True)
    std[std == 0] = 1.0
    return (np.ascontiguousarray((x_train - mean) / std, dtype=np.float32),
            np.ascontiguousarray((x_test - mean) / std, dtype=np.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--recommend", help=argparse.SUPPRESS)  # one measured process (internal)
    args = parser.parse_args()
    if args.recommend:
        _recommend(args.recommend, args.n_train)
        return
    from dltune.data._dataset import normalise

    rng = np.random.default_rng(0)
    n_test = max(args.n_train // 6, 10)
    x_train = rng.random((args.n_train, 1, 28, 28), dtype=np.float32)
    x_test = rng.random((n_test, 1, 28, 28), dtype=np.float32)
    seconds: dict[str, list[float]] = {"step by step": [], "dltune": []}
    forms = [("step by step", _step_by_step), ("dltune", normalise)]
    for i in range(args.repeats):  # alternated, so that neither always runs on fresh memory first
        for name, fn in forms[::1 if i % 2 == 0 else -1]:
            started = time.perf_counter()
            fn(x_train, x_test)
            seconds[name].append(time.perf_counter() - started)
    print(f"normalise {args.n_train:,} + {n_test:,} samples of 1x28x28, run by run (s):")
    for name, values in seconds.items():
        print(f"  {name:12s} " + " ".join(f"{v:.3f}" for v in values))
    ratios = [a / b for a, b in zip(seconds["step by step"], seconds["dltune"], strict=True)]
    print("  step by step / dltune, run by run: " + " ".join(f"{r:.1f}x" for r in ratios))
    # recommend in fresh processes (each first call pays for its new memory, as a user's does),
    # with dltune's normalise and with the step-by-step form patched in, alternated.
    calls: dict[str, list[str]] = {"dltune": [], "step by step": []}
    for _ in range(args.repeats):
        for name in calls:
            out = subprocess.run([sys.executable, __file__, "--recommend", name, "--n-train", str(args.n_train)],
                                 check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            calls[name].append(out)
    for name, lines in calls.items():
        print(f"recommend on the arrays in a new process, normalise {name} (first call / second call, s): "
              + "; ".join(lines))


def _recommend(normalise_as: str, n_train: int) -> None:
    from dltune.data import _dataset

    if normalise_as == "step by step":
        _dataset.normalise = _step_by_step
    rng = np.random.default_rng(0)
    n_test = max(n_train // 6, 10)
    arrays = (rng.random((n_train, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, n_train),
              rng.random((n_test, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, n_test))
    # A cache of this process's own: the landmarks are computed, not found.
    with tempfile.TemporaryDirectory(prefix="dltune-bench-") as cache:
        os.environ["DLTUNE_CACHE"] = cache
        import dltune

        times = []
        for _ in range(2):
            started = time.perf_counter()
            dltune.recommend(arrays, storage=None)
            times.append(time.perf_counter() - started)
    print(f"{times[0]:.2f} / {times[1]:.2f}")


if __name__ == "__main__":
    main()
