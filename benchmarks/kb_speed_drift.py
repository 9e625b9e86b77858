"""Does this machine still run the knowledge base's runs as fast as when they were measured?

    python benchmarks/kb_speed_drift.py [--workloads 0,3,...] [--configs N]
        [--frameworks torch,...] [--quiet-wait S] [--out DIR]

Measures again, on this machine and with the quiet wait of ``dltune kb build``, the first
``--configs`` space-filling configurations and the default preset of some reference workloads
(the same keys as the shipped knowledge base's runs, so the same configurations) with every
available framework, and prints, per workload and per session that recorded them (the hour the
recorded runs started, and the machine and hardware target), the ratio of the time measured now to
the time recorded then: median, range and median per framework. The shipped calibrations' runs
of the same keys are compared too. A ratio far from 1 on the machine that recorded the runs
means the machine's speed changed between sessions (a virtual machine's host, say), which no
model of the records can account for. ``--workloads`` takes indices into the reference suite
(``dltune kb build --plan`` lists it); the default is digits LeNet and two workloads from each
of the two sessions of the AVX2 VM. Run it on an idle machine; about 3 minutes on 2 cores.
Each run first waits up to ``--quiet-wait`` seconds (default 300, as ``dltune kb build``) for
the rest of the machine to be idle, so on a busy machine every run can wait that long first;
``--quiet-wait 0`` measures at once (and the ratios then include the load).
"""

from __future__ import annotations

import argparse
import collections
import tempfile

import numpy as np

# digits-lenet; the 1,000-sample 24x24x1 MLP and 2,000-sample 8x8x1 LeNet (the VM's session of
# 2026-12-03 20:48); the 12,000-sample 16x16x1 MLP and 400-sample 20x20x3 LeNet (23:39).
DEFAULT_WORKLOADS = (1, 14, 18, 24, 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(map(str, DEFAULT_WORKLOADS)),
                        help="comma-separated indices into the reference suite")
    parser.add_argument("--configs", type=int, default=4)
    parser.add_argument("--frameworks", default=None,
                        help="comma-separated backends (default: every available one)")
    parser.add_argument("--quiet-wait", type=float, default=300.0,
                        help="seconds to wait before each run for the machine to be idle")
    parser.add_argument("--out", default=None, help="build folder (default: a temporary one)")
    args = parser.parse_args()
    from dltune._validation import check_int
    from dltune.kb import build_kb, shipped_calibration_paths, shipped_kb_path
    from dltune.kb._store import read_jsonl
    from dltune.kb._suite import SUITES
    from dltune.surrogate._machines import machine_key

    check_int("configs", args.configs, 1, 24)
    reference = SUITES["reference"]
    try:
        picked = [int(i) for i in args.workloads.split(",")]
    except ValueError:
        parser.error(f"--workloads must be comma-separated integers. Got {args.workloads!r}.")
    bad = [i for i in picked if not 0 <= i < len(reference)]
    if bad:
        parser.error(f"--workloads must be indices from 0 to {len(reference) - 1}. Got {bad}.")
    SUITES["drift"] = [reference[i] for i in picked]
    out = args.out or tempfile.mkdtemp(prefix="dltune-drift-")
    frameworks = args.frameworks.split(",") if args.frameworks else None
    result = build_kb("drift", out=out, frameworks=frameworks, configs_per_pair=args.configs,
                      repeats=0, fresh=0, quiet_wait_s=args.quiet_wait, progress=True,
                      command="python benchmarks/kb_speed_drift.py")
    print(f"measured {result.measured} of {result.planned} planned runs ({result.failed} failed) "
          f"into {out}")
    if result.measured + result.done_before < result.planned:
        print(f"stopped by {result.stopped_by} before every planned run was measured: the ratios "
              "below cover the runs that were")

    measured = list(read_jsonl(f"{out}/records.jsonl"))
    steal = [e["kb"]["steal_pct"] for e in measured if "steal_pct" in e["kb"]]
    if steal:
        print(f"steal time during the runs (the hypervisor serving other guests): median "
              f"{np.median(steal):.2f} %, max {max(steal):.2f} % of the machine's CPU time")
    recorded = {e["kb"]["key"]: ("knowledge base", e) for e in read_jsonl(shipped_kb_path())}
    for path in shipped_calibration_paths():
        for e in read_jsonl(path):
            recorded.setdefault(e["kb"]["key"] + "#calibration", ("calibration", e))
    groups: dict[tuple[str, str, str, str], list[tuple[str, float]]] = collections.defaultdict(list)
    for e in measured:
        if e["status"] != "ok":
            continue
        for key in (e["kb"]["key"], e["kb"]["key"] + "#calibration"):
            if key in recorded:
                source, old = recorded[key]
                session = (e["kb"]["suite_workload"], source, old["started_at"][:13] + "h",
                           f"{machine_key(old['hardware'])} {old['hardware'].get('target', '?')}")
                groups[session].append((e["config"]["framework"],
                                        e["metrics"]["train_time_s"] / old["metrics"]["train_time_s"]))
    print("\nworkload | recorded in | recorded at (UTC) | machine | runs | now / recorded: median "
          "[min, max] | median per framework")
    for (workload, source, hour, machine), ratios in sorted(groups.items()):
        r = np.array([x for _, x in ratios])
        per = ", ".join(f"{fw} {np.median([x for f, x in ratios if f == fw]):.2f}"
                        for fw in sorted({f for f, _ in ratios}))
        print(f"{workload} | {source} | {hour} | {machine} | {len(r)} | {np.median(r):.2f} "
              f"[{r.min():.2f}, {r.max():.2f}] | {per}")


if __name__ == "__main__":
    main()
