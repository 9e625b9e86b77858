"""Measure a knowledge-base slice at the thread counts a many-core machine adds (resumable).

The shipped knowledge base measured 1 and 2 threads. On a machine with more usable cores this
runs the ``many-cores`` suite: the first ``--configs-per-pair`` configurations of the reference
suite's first 16 workloads (the very configurations the knowledge base measured, seeded by
workload name) at every thread count of the machine's grid above 2 (``thread_grid``: 4, 8, ...,
all cores). Run it again after an interruption: measured runs are skipped. ``--plan`` prints
the runs and measures nothing.

    python scripts/kb_many_cores.py --plan
    python scripts/kb_many_cores.py --time-budget 2h

The records go to ``<cache>/kb/many-cores/`` with their provenance (machine, versions, command);
append them to the reference build folder's ``records.jsonl`` and ``dltune kb export`` to ship them.
"""

from __future__ import annotations

import argparse
import sys

from dltune.backends._registry import default_framework_names
from dltune.cli._common import duration
from dltune.config import usable_cores
from dltune.kb import build_kb
from dltune.kb._build import plan_build

SUITE = "many-cores"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", help="comma-separated backends (default: the maintained defaults)")
    parser.add_argument("--configs-per-pair", type=int, default=4)
    parser.add_argument("--time-budget", type=duration, metavar="DURATION")
    parser.add_argument("--out", help="build folder (default: <cache>/kb/many-cores)")
    parser.add_argument("--quiet-wait", type=float, default=300.0, metavar="S")
    parser.add_argument("--plan", action="store_true")
    args = parser.parse_args()
    frameworks = args.frameworks.split(",") if args.frameworks else default_framework_names()
    design = dict(configs_per_pair=args.configs_per_pair, repeats=0, fresh=0, all_cores=True)
    plan = plan_build(SUITE, args.out, frameworks, args.time_budget, quiet_wait_s=args.quiet_wait, **design)
    if args.plan or not plan.runs:
        print(f"{len(plan.runs)} runs on {usable_cores()} usable cores into {plan.folder}"
              + ("" if plan.runs else " (nothing to measure beyond 2 threads here)"))
        for run in plan.runs:
            print(f"{run.config.framework:<11} threads {run.config.threads.intra_op:>3}  {run.workload.name}  {run.key}")
        return 0
    result = build_kb(SUITE, args.out, frameworks, args.time_budget, progress=True,
                      command=" ".join(sys.argv), quiet_wait_s=args.quiet_wait, **design)
    print(f"{result.measured} runs measured ({result.failed} failed), "
          f"{result.done_before + result.measured}/{result.planned} done, stopped: {result.stopped_by}; "
          f"records in {result.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
