"""How much one run's accuracy moves with the seed alone, by how accurate the configuration is.

    python benchmarks/seed_noise_by_accuracy.py [--records FILE]

Reads the shipped knowledge base (or ``--records``, a JSONL file of measurement records),
groups each workload's runs into configurations as ``dltune.recommend`` does (everything but the
seed, threads, device, timeout and preset name), takes every configuration measured with two
seeds as a repeat pair, and prints per band of the pair's mean accuracy p: the pairs, the
median and mean absolute difference in points, and the median of |difference| / sqrt(p (1 - p)),
the quantity whose spread ``dltune.measure._noise.SeedNoise`` assumes is the same at every
accuracy. Then the seed-noise scale the fit gives each workload (``noise_scale``; none where
fewer than 3 pairs tell). Reads records only: a few seconds.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

BANDS = (0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.995, 1.0001)


def main() -> None:
    from dltune.kb._store import load_shipped_records
    from dltune.measure import load_records
    from dltune.surrogate import PerformanceModel, usable_records
    from dltune.surrogate._seed_noise import measured_key, workload_key

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", help="a JSONL file of records (default: the shipped knowledge base)")
    args = parser.parse_args()
    data = usable_records(load_records(args.records) if args.records else load_shipped_records())
    seeds: dict[tuple[str, str], dict[str, float]] = {}
    for d in data:
        w = d["workload"]
        key = (workload_key(w.get("fingerprint"), w.get("model")), measured_key(d["config"]))
        seeds.setdefault(key, {}).setdefault(str(d["config"].get("seed")), d["metrics"]["test_accuracy"])
    pairs = np.array([list(v.values())[:2] for v in seeds.values() if len(v) >= 2], dtype=float)
    if not len(pairs):
        print("no configuration was measured with two seeds")
        return
    mean, diff = pairs.mean(axis=1), np.abs(pairs[:, 0] - pairs[:, 1])
    print(f"{len(pairs)} repeat pairs of {len(data)} runs")
    print(f"{'mean accuracy':>16}  {'pairs':>5}  {'median |d|, pts':>15}  {'mean |d|, pts':>13}  "
          f"{'median |d| / sqrt(p (1 - p))':>28}")
    for low, high in zip(BANDS[:-1], BANDS[1:], strict=True):
        inside = (mean >= low) & (mean < high)
        if not inside.any():
            continue
        room = np.sqrt(np.maximum(mean[inside] * (1 - mean[inside]), 1e-4))
        print(f"{100 * low:6.1f}-{min(100.0, 100 * high):5.1f} %  {inside.sum():5d}  "
              f"{100 * np.median(diff[inside]):15.2f}  {100 * np.mean(diff[inside]):13.2f}  "
              f"{np.median(diff[inside] / room):28.3f}")
    model = PerformanceModel()
    model._fit_measured(data)
    scales = sorted(m["sigma"] for m in model.measured_.values() if m["sigma"] is not None)
    missing = sum(m["sigma"] is None for m in model.measured_.values())
    print(f"seed-noise scale per workload ({len(scales)} of {len(model.measured_)}; {missing} with "
          f"fewer than 3 pairs that tell): median {np.median(scales):.3f}, "
          f"range {scales[0]:.3f}-{scales[-1]:.3f}; at the median, one run's noise is "
          f"{100 * np.median(scales) * math.sqrt(0.975 * 0.025):.2f} points at 97.5 % and "
          f"{100 * np.median(scales) * 0.5:.2f} at 50 %")


if __name__ == "__main__":
    main()
