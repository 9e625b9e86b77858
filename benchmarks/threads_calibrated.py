"""Training time at every thread count after `dltune kb calibrate` on a machine with more than
2 cores: measured, against the surrogates with the calibration's all-cores runs (a factor per
thread count, interpolated between 2 and all cores) and without them (the hedge between no gain
and the cost model's extrapolation, as before those runs existed).

    python benchmarks/threads_calibrated.py [--frameworks torch] [--out DIR] [--repeats 2]

It measures the calibration into DIR/calibration (resumable; on more than 2 usable cores it
includes each configuration with all of them), then the digits LeNet configuration of the
16-core Xeon's scan (benchmarks/data/xeon-h200-2026-12-04: Adam, lr 0.002294, batch 256,
6 epochs) at 1, 2, 4, ... threads and all usable cores, and prints the table. DIR keeps the
records and the scan (DIR/threads_scan.json), to bring back from a lent machine. On 2 cores
there are no all-cores runs and both columns agree.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import dltune
from dltune.config import ThreadConfig, TrainConfig, usable_cores
from dltune.kb import calibrate_machine
from dltune.kb._store import read_jsonl
from dltune.recommend._policy import DEFAULT_POLICY
from dltune.recommend._recommend import _config_features, _resolve_workload
from dltune.surrogate import fitted_model


def _thread_counts(cores: int) -> list[int]:
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    return [*counts, cores]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch", help="comma-separated (default: torch)")
    parser.add_argument("--out", default="threads-calibrated", help="folder for the records and the scan")
    parser.add_argument("--repeats", type=int, default=2, help="runs per thread count (median)")
    parser.add_argument("--quiet-wait", type=float, default=60.0, help="as dltune kb calibrate's")
    args = parser.parse_args()
    frameworks = [f for f in args.frameworks.split(",") if f]
    out = Path(args.out)
    cores = usable_cores()
    hardware = dltune.Hardware.detect().to_dict()
    print(f"{hardware['cpu_model']}, {cores} usable cores; calibrating {', '.join(frameworks)} "
          f"into {out / 'calibration'}", flush=True)
    calibrate_machine(frameworks, out=out / "calibration", progress=True, quiet_wait_s=args.quiet_wait,
                      command="benchmarks/threads_calibrated.py")
    records = [e for e in read_jsonl(out / "calibration" / "records.jsonl") if e.get("status") == "ok"]
    wide = [e for e in records if (e.get("kb") or {}).get("kind") == "all-cores"]
    # The shipped knowledge base and these records only (not the cache's calibrations).
    with_all = fitted_model(records=records, storage=None, calibration=False)
    without = fitted_model(records=[e for e in records if e not in wide], storage=None, calibration=False)
    workload = dltune.Workload.from_name("digits", "lenet")
    _, _, meta, _ = _resolve_workload(workload, None, with_all)
    print(f"{len(records)} calibration runs, {len(wide)} of them with all {cores} cores")
    print("framework | threads | measured s | with all-cores runs [interval] | measured / predicted | "
          "without them, hedged [interval] | measured / predicted | flagged without")
    scan = []
    for framework in frameworks:
        for threads in _thread_counts(cores):
            config = TrainConfig(framework=framework, optimizer="adam", learning_rate=0.002294,
                                 batch_size=256, epochs=6, threads=ThreadConfig.uniform(threads))
            times = [dltune.benchmark(workload, config, storage=None)[0].metrics["train_time_s"]
                     for _ in range(args.repeats)]
            seconds = statistics.median(times)
            row = {"meta": meta, "hardware": hardware, "config": _config_features(config), "fresh": False}
            cells = []
            for model in (with_all, without):
                pred, _ = model.hedge_threads(model.predict([row]), [row], hardware)
                pred, _ = model.widen(pred, meta, hardware, DEFAULT_POLICY)
                cells.append(tuple(float(pred[k][0]) for k in ("train_time_s", "train_time_s_low",
                                                                "train_time_s_high")))
            (a, al, ah), (b, bl, bh) = cells
            flagged = without.threads_reason(threads, hardware) is not None
            print(f"{framework} | {threads} | {seconds:.3f} | {a:.3f} [{al:.3g}, {ah:.3g}]"
                  f"{'' if al <= seconds <= ah else ' (outside)'} | {seconds / a:.2f} | "
                  f"{b:.3f} [{bl:.3g}, {bh:.3g}]{'' if bl <= seconds <= bh else ' (outside)'} | "
                  f"{seconds / b:.2f} | {'yes' if flagged else 'no'}", flush=True)
            scan.append({"framework": framework, "threads": threads, "times_s": times,
                         "with_all_cores": [a, al, ah], "without": [b, bl, bh]})
    (out / "threads_scan.json").write_text(json.dumps({"hardware": hardware, "scan": scan}, indent=1))
    print(f"records and scan in {out}")


if __name__ == "__main__":
    main()
