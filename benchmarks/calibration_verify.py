"""Predicted against measured training time on this machine, before and after `dltune kb calibrate`.

For each workload: the recommended configuration (fitted with this cache's calibration records),
measured with ``dltune.benchmark`` in a new worker process, and that same configuration's
prediction from the surrogates fitted on the shipped knowledge base alone (uncalibrated: the
build machine's speed, hardware-widened interval when this CPU is not the build machine's).

    python benchmarks/calibration_verify.py [--repeats N]

Run it after `dltune kb calibrate` on an otherwise idle machine.
"""

from __future__ import annotations

import argparse

import dltune
from dltune.recommend import recommend
from dltune.recommend._policy import DEFAULT_POLICY
from dltune.recommend._recommend import _resolve_workload
from dltune.surrogate import fitted_model

WORKLOADS = [
    ("digits", "lenet", {}),
    ("synthetic", "lenet", {"n_train": 2500, "height": 16, "width": 16, "classes": 5}),
    ("synthetic", "mlp", {"n_train": 6000, "height": 12, "width": 12, "channels": 3, "classes": 8}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    plain = fitted_model(storage=None, calibration=False)
    calibrated = fitted_model(storage=None)
    hw = dltune.Hardware.detect().to_dict()
    print(f"machine {hw['cpu_model']!r}; calibrated machines: {calibrated.calibrated_machines()}")
    header = ("workload", "framework", "measured s", "calibrated pred [80%]", "ratio",
              "uncalibrated pred [widened]", "ratio", "measured MB", "calibrated MB", "uncalibrated MB")
    print(" | ".join(header))
    for dataset, model, params in WORKLOADS:
        workload = dltune.Workload.from_name(dataset, model, **params)
        rec = recommend(workload, storage=None)
        point, low, high = rec.predicted["train_time_s"]
        _, _, meta, _ = _resolve_workload(workload, None, plain)
        row = {"meta": meta, "hardware": hw, "config": rec.config.to_dict(), "fresh": True}
        pred, _ = plain.widen(plain.predict([row]), meta, hw, DEFAULT_POLICY)
        p0, l0, h0 = (float(pred[k][0]) for k in ("train_time_s", "train_time_s_low", "train_time_s_high"))
        m0, ml0, mh0 = (float(pred[k][0]) for k in ("peak_rss_mb", "peak_rss_mb_low", "peak_rss_mb_high"))
        mem, mem_low, mem_high = rec.predicted["peak_rss_mb"]
        for _ in range(args.repeats):
            [record] = dltune.benchmark(workload, rec.config, storage=None)
            t, mb = record.metrics["train_time_s"], record.metrics["peak_rss_mb"]
            name = f"{dataset}[{','.join(f'{k}={v}' for k, v in params.items())}]-{model}"
            print(f"{name} | {rec.framework} | {t:.3f} | {point:.3f} [{low:.3f}, {high:.3f}]"
                  f"{_outside(low, t, high)} | {t / point:.2f} | "
                  f"{p0:.3f} [{l0:.3f}, {h0:.3f}]{_outside(l0, t, h0)} | {t / p0:.2f} | "
                  f"{mb:.0f} | {mem:.0f} [{mem_low:.0f}, {mem_high:.0f}]{_outside(mem_low, mb, mem_high)} | "
                  f"{m0:.0f} [{ml0:.0f}, {mh0:.0f}]{_outside(ml0, mb, mh0)}")


def _outside(low: float, value: float, high: float) -> str:
    return "" if low <= value <= high else " OUTSIDE"


if __name__ == "__main__":
    main()
