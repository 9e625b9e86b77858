"""Peak-memory intervals on workloads the surrogates did not see, on a machine with a memory factor.

    python benchmarks/memory_intervals.py

Leave-one-workload-out on the shipped knowledge base, over the workloads of every machine that
gets a memory factor (each machine but the one most records come from): fit on the other
workloads, predict the held-out workload's runs made in a new worker process (the ones the
memory surrogate learns from) on the machine that ran them, and print the share of their
peak memory inside the predicted 80 % interval and the interval's median width (high / low),
with the machine's memory spread as fitted (``"~"`` in ``machine_memory_``) and without it.
Deterministic: no training runs, the records are the shipped ones (about 10 s a fold).
"""

from __future__ import annotations

import time

import numpy as np


def main() -> None:
    from dltune.kb._store import load_shipped_records
    from dltune.surrogate import PerformanceModel, record_row, usable_records
    from dltune.surrogate._features import ran_in_new_process
    from dltune.surrogate._machines import machine_key, reference_machine
    from dltune.surrogate._records import workload_label

    data = usable_records(load_shipped_records())
    machines = [machine_key(d["hardware"]) for d in data]
    reference = reference_machine(machines)
    started = time.perf_counter()
    for machine in sorted(set(machines) - {reference}):
        labels = sorted({workload_label(d) for d, m in zip(data, machines, strict=True) if m == machine})
        inside: dict[str, list[bool]] = {"as fitted": [], "without the spread": []}
        width: dict[str, list[float]] = {k: [] for k in inside}
        spreads = []
        for held in labels:
            model = PerformanceModel().fit([d for d in data if workload_label(d) != held])
            test = [d for d, m in zip(data, machines, strict=True)
                    if m == machine and workload_label(d) == held and ran_in_new_process(d)]
            rows = [record_row(d) for d in test]
            y = np.array([d["metrics"]["peak_rss_mb"] for d in test])
            fitted = model.predict(rows)
            spreads.append(float(np.exp(model.machine_memory_.get(machine, {}).get("~", 0.0))))
            model.machine_memory_.get(machine, {}).pop("~", None)
            for name, pred in (("as fitted", fitted), ("without the spread", model.predict(rows))):
                low, high = pred["peak_rss_mb_low"], pred["peak_rss_mb_high"]
                inside[name].extend(((y >= low) & (y <= high)).tolist())
                width[name].extend((high / low).tolist())
        print(f"{machine}: {len(labels)} workloads held out one at a time, {len(inside['as fitted'])} "
              f"new-process runs; spread {min(spreads):.2f}-{max(spreads):.2f}x each way")
        for name in inside:
            print(f"  {name:18s}: {100 * np.mean(inside[name]):5.1f} % inside the 80 % interval, "
                  f"median high / low {np.median(width[name]):.2f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
