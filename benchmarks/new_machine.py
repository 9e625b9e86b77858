"""Training times on this machine predicted without its own records, before and after the quick
calibration (`dltune kb calibrate`), against what they measure.

The surrogates are fitted on the shipped knowledge base and calibrations less every record of
this machine (its ``machine_key``): "before" is what a new machine of this kind would be told;
"after" adds this machine's quick-calibration probes, measured into a temporary folder.
Each configuration is measured with ``dltune.benchmark`` (a new worker process, as a user's
run), the configurations alternated, ``--repeats`` times (median). Prints per configuration and
the typical error factor (geometric mean of max(p/m, m/p)) and the share of measured times
inside the interval, before and after.

    flock /tmp/dltune-measure.lock python benchmarks/new_machine.py [--repeats 3] [--keep DIR]

``--keep DIR`` writes the probes and the measured times there (with ``--measure-only``, all it
does: the fits need no quiet machine); ``--from DIR`` predicts them without measuring.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

import dltune
from dltune.config import ThreadConfig, TrainConfig
from dltune.kb import calibrate_machine
from dltune.measure._record import read_jsonl
from dltune.measure._shipped import calibration_records, load_shipped_records
from dltune.recommend._policy import DEFAULT_POLICY
from dltune.recommend._recommend import _resolve_workload
from dltune.surrogate import PerformanceModel
from dltune.surrogate._machines import machine_key
from dltune.surrogate._train_time import KINDS

# (dataset, model, dataset parameters, framework-neutral configuration): none is a probe of
# the quick calibration (other workloads, epochs, rates and batch sizes).
CASES = [
    ("digits", "mlp", {}, dict(batch_size=32, epochs=3, threads=1)),
    ("digits", "lenet", {}, dict(batch_size=64, epochs=2, threads=2)),
    ("synthetic", "lenet", {"n_train": 2500, "height": 16, "width": 16, "classes": 5}, dict(batch_size=32, epochs=1, threads=2)),
    ("synthetic", "mlp", {"n_train": 6000, "height": 12, "width": 12, "channels": 3, "classes": 8},
     dict(batch_size=256, epochs=3, threads=1)),
    ("synthetic", "cifar_quick", {"n_train": 800, "height": 32, "width": 32, "channels": 3, "classes": 10},
     dict(batch_size=64, epochs=1, threads=2)),
]


def _config(framework: str, batch_size: int, epochs: int, threads: int) -> TrainConfig:
    n = ThreadConfig(intra_op=1, inter_op=1, blas=1, cores=1) if threads == 1 else ThreadConfig.uniform(threads)
    return TrainConfig(framework=framework, optimizer="adam" if batch_size >= 128 else "momentum",
                       learning_rate=0.001 if batch_size >= 128 else 0.02, momentum=0.9,
                       batch_size=batch_size, epochs=epochs, seed=0, threads=n, timeout_s=600.0)


def _available(name: str) -> bool:
    from dltune._bench import interpreter_for
    from dltune._errors import DltuneError

    try:
        interpreter_for(name)
    except DltuneError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frameworks", default="torch,tensorflow,mxnet")
    parser.add_argument("--keep", type=Path, help="write the probes and measured times here")
    parser.add_argument("--from", dest="source", type=Path, help="reuse the probes and times kept here")
    parser.add_argument("--measure-only", action="store_true", help="measure and keep, fit nothing")
    args = parser.parse_args()
    frameworks = [f for f in args.frameworks.split(",") if _available(f)]
    hw = dltune.Hardware.detect().to_dict()
    here = machine_key(hw)
    kb = [r.to_dict() for r in load_shipped_records()] + calibration_records(cache=False)
    without = [r for r in kb if machine_key(r.get("hardware") or {}) != here]
    print(f"machine {here!r}, {hw['usable_cores']} cores; fitting on {len(without)} records "
          f"({len(kb) - len(without)} of this machine left out); frameworks {frameworks}", flush=True)

    if args.source:
        probes = json.loads((args.source / "probes.json").read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            result = calibrate_machine(frameworks, Path(tmp) / "quick", quiet_wait_s=0.0)
            took = time.monotonic() - start
            probes = [e for e in read_jsonl(Path(tmp) / "quick" / "records.jsonl") if e.get("status") == "ok"]
        print(f"quick calibration: {result.measured} runs in {took:.0f} s", flush=True)
    cases = [(workload.name, fw, workload, _config(fw, **cfg))
             for workload, cfg in ((dltune.Workload.from_name(d, m, **p), cfg) for d, m, p, cfg in CASES)
             for fw in frameworks]
    measured: dict[int, list[float]] = {i: [] for i in range(len(cases))}
    if args.source:
        measured = {int(k): v for k, v in json.loads((args.source / "measured.json").read_text()).items()}
    for _ in range(0 if args.source else args.repeats):  # alternated: every configuration once a repeat
        for i, (_, _, workload, config) in enumerate(cases):
            [record] = dltune.benchmark(workload, config, storage=None)
            measured[i].append(record.metrics["train_time_s"])
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / "probes.json").write_text(json.dumps(probes))
        (args.keep / "measured.json").write_text(json.dumps(measured))
    if args.measure_only:
        return
    before = PerformanceModel().fit(without)
    after = PerformanceModel().fit(without + probes)
    metas = {}
    for _, _, workload, _ in cases:
        if workload.name not in metas:
            metas[workload.name] = _resolve_workload(workload, None, before)[2]

    summary, preds = {}, {}
    for label, model in (("before", before), ("after", after)):
        errors, inside, widths = [], [], []
        for i, (name, _, _, config) in enumerate(cases):
            meta = metas[name]
            row = {"meta": meta, "hardware": hw, "config": config.to_dict(), "fresh": True}
            pred, _ = model.widen(model.predict([row]), meta, hw, DEFAULT_POLICY)
            p, lo, hi = (float(pred[k][0]) for k in ("train_time_s", "train_time_s_low", "train_time_s_high"))
            m = float(np.median(measured[i]))
            errors.append(max(p / m, m / p))
            inside.append(lo <= m <= hi)
            widths.append(hi / lo)
            preds[label, i] = f"{p:.3f} [{lo:.3f}, {hi:.3f}]"
        by_framework = {fw: math.exp(np.mean([np.log(e) for e, case in zip(errors, cases, strict=True)
                                              if case[1] == fw])) for fw in frameworks}
        summary[label] = (math.exp(np.mean(np.log(errors))), max(errors), float(np.mean(inside)),
                          math.exp(np.median(np.log(widths))), by_framework)
    print("workload | framework | batch | threads | epochs | measured s | before [interval] | after [interval]")
    for i, (name, fw, _, config) in enumerate(cases):
        print(f"{name} | {fw} | {config.batch_size} | {config.threads.intra_op} | {config.epochs} | "
              f"{np.median(measured[i]):.3f} | {preds['before', i]} | {preds['after', i]}")
    # This machine's fitted multipliers of the reference machine's seconds per kind of work
    # (overheads: run, step, step_x_layers; throughputs: the rest), per framework.
    speed = after.machine_speed_.get(here, {})
    for fw in frameworks:
        shown = " ".join(f"{k}={math.exp(speed[f'{fw}:{k}']):.2f}" for k in KINDS if f"{fw}:{k}" in speed)
        print(f"after, {fw} x reference: {shown or 'none'}")
    for label, (typical, worst, coverage, width, by_framework) in summary.items():
        shown = ", ".join(f"{fw} {v:.2f}x" for fw, v in by_framework.items())
        print(f"{label}: typical error {typical:.2f}x ({shown}; worst {worst:.2f}x), "
              f"coverage {100 * coverage:.0f}% of {len(cases)}, interval width {width:.1f}x (median high / low)")


if __name__ == "__main__":
    main()
