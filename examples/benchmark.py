"""Measure PyTorch and TensorFlow on the digits data, with dltune's defaults and Caffe's.

Each configuration trains in its own isolated, monitored worker process; the records hold
training / testing time, accuracy, CPU use and peak memory. About a minute on 2 cores.

    python examples/benchmark.py [--frameworks torch,tensorflow] [--epochs 3] [--out records.json]
"""

from __future__ import annotations

import argparse

import dltune
from dltune.cli._common import format_table
from dltune.measure import save_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,tensorflow")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default=None, help="save the records (JSON or CSV)")
    args = parser.parse_args()

    workload = dltune.Workload.from_name("digits", "lenet")
    configs = []
    for fw in args.frameworks.split(","):
        configs.append(dltune.TrainConfig(framework=fw, epochs=args.epochs))
        # The same framework with Caffe's published MNIST defaults (epochs capped likewise).
        configs.append(dltune.TrainConfig.preset("caffe", framework=fw, epochs=args.epochs))
    records = dltune.benchmark(workload, configs, progress=True)
    rows = [{**r.summary_row(), "preset": r.config.get("preset_name") or "-"} for r in records]
    print(format_table(rows, [("framework", "framework", ""), ("preset", "preset", ""),
                              ("status", "status", ""), ("train_s", "train s", ".2f"),
                              ("test_s", "test s", ".3f"), ("accuracy_pct", "accuracy %", ".1f"),
                              ("cpu_pct", "CPU %", ".0f"), ("peak_mb", "peak MB", ".0f")]))
    if args.out:
        print("records saved to", save_records(records, args.out))


if __name__ == "__main__":
    main()
