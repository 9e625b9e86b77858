"""Which ``balanced`` exchange rate and point share pick as well as the best, at its speed?

    python benchmarks/balanced_policy.py [--rates 0.25,0.5,1,2,4] [--shares 0,0.25,0.5,0.75,1]
        [--objectives balanced,time] [--scores FILE] [--json]

Leave-one-workload-out over the shipped knowledge base, as ``dltune kb validate`` holds out
(``dltune.kb._validate.held_out_workloads``): each workload's runs scored by surrogates fitted
on the others, through ``score_candidates``, among the candidates ``recommend`` would choose
from (``dltune.kb._validate.recommendable``).
The fits are the slow part (one per workload, minutes in all); ``--scores FILE`` keeps them
(a pickle) so that another grid reuses them. Then, for every ``RecommendPolicy`` of the grid
(``balanced_points_per_halving`` x ``point_share``, the other knobs at their defaults; both only
rank, they change no interval), the pick of each objective is scored on the workload's own runs
as ``benchmarks/unseen_workloads.py`` scores picks on fresh ones:

- regret: the best run's accuracy minus the pick's, in points (mean and max over workloads);
- time ratio: the pick's training time over the fastest run within one point of the best
  (median over workloads);
- how many workloads the pick was within a point of the best at no more than that time.

The measurements are the knowledge base's; nothing is trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

WITHIN = 0.01  # within one point of the best, as benchmarks/unseen_workloads.py


def held_out_scores(progress: bool = True) -> list[dict[str, Any]]:
    """Per held-out workload: its runs' accuracy and time, which of them ``recommend`` would
    choose among, and the candidates as scored by surrogates fitted on the other workloads."""
    from dltune._log import Progress
    from dltune.kb._store import load_shipped_records
    from dltune.kb._validate import _measured, held_out_workloads, recommendable
    from dltune.recommend._pipeline import score_candidates
    from dltune.recommend._policy import DEFAULT_POLICY
    from dltune.surrogate import PerformanceModel, record_row, usable_records
    from dltune.surrogate._features import workload_facts
    from dltune.surrogate._records import display_name

    groups, held_out = held_out_workloads(usable_records(load_shipped_records()))
    bar = Progress(len(held_out), "fit", unit="workload") if progress else None
    out = []
    for label, held in held_out:
        train = [d for other, ds in groups.items() if other != label for d in ds]
        model = PerformanceModel(calibrate=True).fit(train)
        rows = [record_row(d) for d in held]
        meta, hardware = rows[0]["meta"], rows[0]["hardware"]
        scored = score_candidates(meta, hardware, rows, model, DEFAULT_POLICY, measured=_measured(model, held))
        out.append({"workload": display_name(held[0]["workload"]),
                    "family": workload_facts(meta, held[0]["workload"].get("model")).get("model_family"),
                    "accuracy": np.array([d["metrics"]["test_accuracy"] for d in held], dtype=float),
                    "time": np.array([d["metrics"]["train_time_s"] for d in held], dtype=float),
                    "among": recommendable(model, held, DEFAULT_POLICY), "scored": scored})
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return out


def evaluate(workloads: list[dict[str, Any]], objective: str, policy: Any) -> dict[str, Any]:
    """The picks of ``objective`` under ``policy``, scored on each workload's measured runs."""
    regrets, ratios, good = [], [], 0
    for w in workloads:
        acc, t, among = w["accuracy"], w["time"], w["among"]
        chosen = dataclasses.replace(w["scored"], policy=policy).pick(objective, among)
        best = acc[among].max()
        fastest = t[among][acc[among] >= best - WITHIN - 1e-9].min()
        regret, ratio = 100 * (best - acc[chosen]), t[chosen] / fastest
        regrets.append(regret)
        ratios.append(ratio)
        good += regret <= 100 * WITHIN + 1e-9 and ratio <= 1.0
    return {"regret_points": statistics.fmean(regrets), "regret_points_max": max(regrets),
            "time_ratio": statistics.median(ratios), "within_point_no_slower": good, "workloads": len(workloads)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.25,0.5,1,2,4", help="balanced_points_per_halving values")
    parser.add_argument("--shares", default="0,0.25,0.5,0.75,1", help="point_share values")
    parser.add_argument("--objectives", default="balanced,time")
    parser.add_argument("--scores", metavar="FILE", default=None,
                        help="a pickle of the held-out scores: read if it exists, else written")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        rates = [float(x) for x in args.rates.split(",")]
        shares = [float(x) for x in args.shares.split(",")]
    except ValueError as e:
        parser.error(f"--rates and --shares must be comma-separated numbers: {e}")
    objectives = [o for o in args.objectives.split(",") if o]

    from dltune.recommend._policy import DEFAULT_POLICY, RecommendPolicy

    started = time.perf_counter()
    if args.scores and Path(args.scores).exists():
        workloads = pickle.loads(Path(args.scores).read_bytes())
    else:
        workloads = held_out_scores()
        if args.scores:
            Path(args.scores).write_bytes(pickle.dumps(workloads))
    fitted = time.perf_counter() - started
    results = []
    for objective in objectives:
        for rate in rates:
            for share in shares:
                policy = RecommendPolicy(balanced_points_per_halving=rate, point_share=share)
                if objective == "time" and rate != rates[0]:
                    continue  # the time objective has no exchange rate
                row = {"objective": objective, "rate": rate, "share": share,
                       "default": rate == DEFAULT_POLICY.balanced_points_per_halving
                       and share == DEFAULT_POLICY.point_share,
                       "all": evaluate(workloads, objective, policy),
                       "families": {f: evaluate([w for w in workloads if w["family"] == f], objective, policy)
                                    for f in sorted({w["family"] for w in workloads})}}
                results.append(row)
    if args.json:
        print(json.dumps({"fit_seconds": fitted, "workloads": len(workloads), "results": results}, indent=2))
        return
    print(f"{len(workloads)} held-out workloads ({fitted:.0f} s of fits); per policy: regret mean / max points, "
          f"median time over the fastest within a point, workloads within a point at no more time", file=sys.stderr)
    for r in results:
        a = r["all"]
        fams = "  ".join(f"{f} {s['regret_points']:.1f}/{s['time_ratio']:.2f}x/{s['within_point_no_slower']}"
                         for f, s in r["families"].items())
        rate = "" if r["objective"] == "time" else f" rate {r['rate']:g}"
        print(f"{r['objective']:8s}{rate} share {r['share']:g}{' (default)' if r['default'] else ''}: "
              f"{a['regret_points']:.2f} / {a['regret_points_max']:.1f}, {a['time_ratio']:.2f}x, "
              f"{a['within_point_no_slower']}/{a['workloads']}   [{fams}]")


if __name__ == "__main__":
    main()
