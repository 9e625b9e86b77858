"""Training time at more threads than were measured: the lent 16-core Xeon's figures, again.

On 2026-12-04 a machine with 16 Intel Xeon cores (and an H200, unused here) ran
`dltune kb calibrate --frameworks torch` (15 runs at 1 and 2 threads) and then the digits LeNet
configuration `recommend` had picked (Adam, lr 0.002294, batch 256, 6 epochs) at 1, 2, 4, 8 and
16 threads. Both are kept in benchmarks/data/xeon-h200-2026-12-04/ (the calibration's records,
its provenance, `dltune hardware --json` there, and the thread scan's log with its command).
This script predicts the scan from the shipped surrogates (uncalibrated) and from them plus
the calibration's records (calibrated): the cost model's extrapolation beyond 2 threads, and
the hedged prediction ``recommend`` uses (PerformanceModel.hedge_threads), against the
measured times.

    python benchmarks/threads_hedge.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import dltune
from dltune.config import ThreadConfig, TrainConfig
from dltune.recommend._policy import DEFAULT_POLICY
from dltune.recommend._recommend import _config_features, _resolve_workload
from dltune.surrogate import fitted_model

DATA = Path(__file__).parent / "data" / "xeon-h200-2026-12-04"


def main() -> None:
    hardware = json.loads((DATA / "hardware.json").read_text())
    measured = {int(m.group(1)): float(m.group(2)) for m in
                re.finditer(r"^threads (\d+) \[([\d.]+)\]", (DATA / "threads.log").read_text(), re.M)}
    plain = fitted_model(storage=None)
    calibrated = fitted_model(records=[str(DATA / "records.jsonl")], storage=None)
    workload = dltune.Workload.from_name("digits", "lenet")
    _, _, meta, _ = _resolve_workload(workload, None, calibrated)
    print(f"{hardware['cpu_model']}, {hardware['usable_cores']} cores; digits LeNet, Adam, lr 0.002294, "
          "batch 256, 6 epochs")
    print("threads | measured s | uncalibrated [interval] | calibrated, extrapolated | "
          "calibrated, hedged [interval] | measured / hedged | flagged")
    for threads, seconds in sorted(measured.items()):
        config = TrainConfig(framework="torch", optimizer="adam", learning_rate=0.002294,
                             batch_size=256, epochs=6, threads=ThreadConfig.uniform(threads))
        row = {"meta": meta, "hardware": hardware, "config": _config_features(config), "fresh": True}
        cells = []
        for model, hedge in ((plain, True), (calibrated, False), (calibrated, True)):
            pred = model.predict([row])
            if hedge:
                pred, _ = model.hedge_threads(pred, [row], hardware)
            pred, _ = model.widen(pred, meta, hardware, DEFAULT_POLICY)
            cells.append(tuple(float(pred[k][0]) for k in ("train_time_s", "train_time_s_low",
                                                            "train_time_s_high")))
        (u, ul, uh), (e, _, _), (h, hl, hh) = cells
        flagged = calibrated.threads_reason(threads, hardware) is not None
        print(f"{threads} | {seconds:.3f} | {u:.3f} [{ul:.3g}, {uh:.3g}] | {e:.3f} | "
              f"{h:.3f} [{hl:.3g}, {hh:.3g}] | {seconds / h:.2f} | {'yes' if flagged else 'no'}")


if __name__ == "__main__":
    main()
