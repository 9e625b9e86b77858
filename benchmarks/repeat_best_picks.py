"""Does ``tune --repeat-best 3`` make ``recommend``'s pick better? Measured, not simulated.

    python benchmarks/repeat_best_picks.py [--replicates 8] [--first-replicate 0] [--trials 12] [--truth-seeds 4]
        [--framework torch] [--model lenet] [--data KEY=VALUE ...] [--json]

On a workload the knowledge base has not measured (by default a synthetic 1,200-sample 16x16x1
LeNet, 6 classes, difficulty 0.75, about 90 % accurate, where one run's seed moves the accuracy
by points; ``--model`` and ``--data`` change it; its nearest measured workloads are printed),
each replicate:

1. runs ``dltune.tune`` with ``repeat_best=3`` (``--trials`` trials, the sampler and the runs
   seeded by the replicate) into a fresh SQLite study;
2. asks ``dltune.recommend(objective="accuracy")`` twice, with the study's records and with
   them less the three repeats (what a tune without ``--repeat-best`` would have left);
3. also takes the most accurate trial as measured once (what a user reading the front picks);
4. trains every configuration so picked ``--truth-seeds`` more times, with seeds no run above
   used, and scores each pick by the mean of those runs: its expected accuracy, free of the
   luck that picked it.

It prints each replicate's picks and their expected accuracy, then the mean difference with
and without the repeats (and against the most accurate trial), with its standard error over
the replicates. Real training runs in isolated workers: about 2.3 minutes per replicate on a
2-core machine. Run it alone; it measures accuracy, not time, but a loaded machine only makes
it slower.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = dict(n_train=1200, n_test=400, height=16, width=16, channels=1, classes=6,
                difficulty=0.75, seed=0)
TRUTH_SEED = 10_000  # far from the tune's seeds (replicate r: r * 1000 + trial, + 1 repeated)


def _repeat_ids(db: Path) -> set[str]:
    """The ids of the records ``--repeat-best`` stored on the study."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT value_json FROM study_user_attributes "
                            "WHERE key LIKE 'repeat_measurement:%'").fetchall()
    ids = set()
    for (text,) in rows:
        value = json.loads(text)
        value = json.loads(value) if isinstance(value, str) else value
        ids.add(str(value.get("id")))
    return ids


def _key(config) -> str:
    from dltune.surrogate._seed_noise import measured_key

    return measured_key(config.to_dict())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=8)
    parser.add_argument("--first-replicate", type=int, default=0,
                        help="number of the first replicate (its seeds), to add replicates to a run")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--truth-seeds", type=int, default=4)
    parser.add_argument("--framework", default="torch")
    parser.add_argument("--model", default="lenet", help="model preset (default: lenet)")
    parser.add_argument("--data", action="append", metavar="KEY=VALUE", default=[],
                        help="change a synthetic data set parameter, e.g. --data difficulty=0.5")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import dltune
    from dltune import TrainConfig, Workload
    from dltune.cli._common import parse_key_values
    from dltune.surrogate._cache import load_storage_measurements
    from dltune.surrogate._seed_noise import measured_key

    params = {**WORKLOAD, **parse_key_values(args.data, "data")}
    workload = Workload.from_name("synthetic", model=args.model, **params)
    label = ("synthetic[" + ",".join(f"{k}={v}" for k, v in params.items() if k != "seed")
             + f"]-{args.model}")
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.first_replicate, args.first_replicate + args.replicates):
            db = Path(tmp) / f"r{r}.db"
            dltune.tune(workload, frameworks=args.framework, trials=args.trials, repeat_best=3,
                        storage=f"sqlite:///{db}", seed=r * 1000)
            records = load_storage_measurements(f"sqlite:///{db}")
            repeats = _repeat_ids(db)
            once = [d for d in records if str(d.get("id")) not in repeats]
            ask = dict(objective="accuracy", frameworks=[args.framework], storage=None)
            with_repeats = dltune.recommend(workload, records=records, **ask)
            without = dltune.recommend(workload, records=once, **ask)
            trials = [d for d in once if (d.get("config") or {}).get("preset_name") is None]
            best = max(trials, key=lambda d: d["metrics"]["test_accuracy"])
            picks = {"with_repeats": with_repeats.config, "without_repeats": without.config,
                     "best_trial": TrainConfig.from_dict(best["config"])}
            truth: dict[str, float] = {}
            for config in picks.values():
                key = _key(config)
                if key in truth:
                    continue
                runs = dltune.benchmark(workload, [config.replace(seed=TRUTH_SEED + s)
                                                   for s in range(args.truth_seeds)],
                                          storage=None)
                accs = [m.metrics["test_accuracy"] for m in runs if m.ok]
                truth[key] = statistics.fmean(accs) if accs else float("nan")
            row = {"replicate": r, "repeats_stored": len(repeats),
                   **{f"{name}_expected": truth[_key(c)] for name, c in picks.items()},
                   **{f"{name}_config": {k: v for k, v in c.to_dict().items()
                                         if k in ("optimizer", "learning_rate", "batch_size", "epochs")}
                      for name, c in picks.items()},
                   "with_repeats_measured_runs": with_repeats.measured_runs,
                   "without_repeats_measured_runs": without.measured_runs,
                   "best_trial_once": best["metrics"]["test_accuracy"],
                   # The most accurate trial's repeat, if --repeat-best ran it (it should).
                   "best_trial_again": next((d["metrics"]["test_accuracy"] for d in records
                                             if str(d.get("id")) in repeats
                                             and measured_key(d["config"]) == measured_key(best["config"])), None),
                   # What each pick was ranked by: its predicted accuracy and the low end.
                   **{f"{name}_predicted": list(rec.predicted["accuracy"])
                      for name, rec in (("with_repeats", with_repeats), ("without_repeats", without))},
                   "same_pick": _key(picks["with_repeats"]) == _key(picks["without_repeats"]),
                   "out_of_distribution": with_repeats.out_of_distribution,
                   "nearest_workloads": [name for name, _ in with_repeats.nearest_workloads]}
            rows.append(row)
            # Progress on stderr, with --json too.
            again = ("not repeated" if row["best_trial_again"] is None
                     else f"{100 * row['best_trial_again']:.2f} % again")
            print(f"replicate {r}: expected accuracy with repeats {100 * row['with_repeats_expected']:.2f} %"
                  f" ({row['with_repeats_measured_runs']} runs), without {100 * row['without_repeats_expected']:.2f} %"
                  f" ({row['without_repeats_measured_runs']} runs), most accurate trial"
                  f" {100 * row['best_trial_expected']:.2f} % (measured {100 * row['best_trial_once']:.2f} % once,"
                  f" {again})"
                  f"{'; the same pick' if row['same_pick'] else ''}", file=sys.stderr, flush=True)

    def diff(a: str, b: str) -> dict[str, float]:
        d = [100 * (x[f"{a}_expected"] - x[f"{b}_expected"]) for x in rows]
        se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
        return {"mean_points": statistics.fmean(d), "standard_error": se,
                "better": sum(v > 0 for v in d), "worse": sum(v < 0 for v in d), "equal": sum(v == 0 for v in d)}

    summary = {"workload": label, "framework": args.framework, "replicates": len(rows),
               "trials": args.trials, "truth_seeds": args.truth_seeds,
               "minutes": (time.perf_counter() - started) / 60,
               "with_minus_without": diff("with_repeats", "without_repeats"),
               "with_minus_best_trial": diff("with_repeats", "best_trial"),
               "without_minus_best_trial": diff("without_repeats", "best_trial"),
               "mean_expected_pct": {n: 100 * statistics.fmean(x[f"{n}_expected"] for x in rows)
                                     for n in ("with_repeats", "without_repeats", "best_trial")},
               "rows": rows}
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{summary['replicates']} replicates of a {args.trials}-trial {args.framework} tune with "
          f"--repeat-best 3 on {label}; each pick's expected accuracy is the mean of "
          f"{args.truth_seeds} more runs ({summary['minutes']:.1f} min)")
    print(f"  nearest measured workloads: {', '.join(rows[0]['nearest_workloads'])}"
          f"{' (out of distribution)' if rows[0]['out_of_distribution'] else ''}")
    for name, value in summary["mean_expected_pct"].items():
        print(f"  {name:16s} {value:.2f} % expected on average")
    for name in ("with_minus_without", "with_minus_best_trial", "without_minus_best_trial"):
        d = summary[name]
        print(f"  {name:25s} {d['mean_points']:+.2f} points (standard error {d['standard_error']:.2f}); "
              f"better on {d['better']}, worse on {d['worse']}, equal on {d['equal']}")


if __name__ == "__main__":
    main()
