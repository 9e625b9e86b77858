"""Is ``recommend``'s pick better than each framework's own defaults on a workload it has never seen?

    python benchmarks/recommend_vs_defaults.py [--objective accuracy] [--seeds 3]
        [--frameworks torch,tensorflow] [--workloads 0,1,...] [--data-seed 7] [--json]

``dltune kb validate`` compares the pick with the frameworks' default presets on the knowledge
base's own runs (docs/explanation/how-recommend-decides.md#validation). This
measures the same with fresh training runs, on synthetic workloads the knowledge base has not
measured (data set seed 7 by default, ``--data-seed`` another draw of the same 12 kinds: other
samples and class prototypes than any knowledge-base workload's, which are seed 0; their nearest
measured workloads are printed). For each workload it asks ``dltune.recommend`` (the shipped
knowledge base and its surrogates, no user storage, ``--frameworks`` the candidates), then
trains the pick and each candidate framework's own default preset (``Recommendation.defaults``:
the preset as ``recommend`` shows it, epochs capped to the knowledge base's) ``--seeds`` times
each with seeds no knowledge-base run used, in isolated workers, and scores each by the mean of
its runs: accuracy, and training time on this machine.

It prints per workload each configuration's mean accuracy and time, then over the workloads
the pick's accuracy minus each framework's defaults' (mean, standard error, better / worse)
and their time over the pick's (median). Run it alone: the times are measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# Unmeasured synthetic workloads (seed 7), spread over models, sizes, channels and difficulty.
WORKLOADS = [
    ("mlp", dict(n_train=1500, n_test=500, height=12, width=12, channels=1, classes=6, difficulty=0.7)),
    ("lenet", dict(n_train=1200, n_test=400, height=16, width=16, channels=1, classes=6, difficulty=0.75)),
    ("lenet", dict(n_train=2000, n_test=500, height=20, width=20, channels=1, classes=8, difficulty=0.6)),
    ("cifar_quick", dict(n_train=1000, n_test=400, height=16, width=16, channels=1, classes=5, difficulty=0.7)),
    ("mlp", dict(n_train=2000, n_test=500, height=12, width=12, channels=3, classes=8, difficulty=0.8)),
    ("lenet", dict(n_train=1000, n_test=400, height=16, width=16, channels=3, classes=5, difficulty=0.6)),
    ("cifar_quick", dict(n_train=800, n_test=400, height=16, width=16, channels=3, classes=4, difficulty=0.6)),
    ("mlp", dict(n_train=3000, n_test=500, height=16, width=16, channels=1, classes=10, difficulty=0.6)),
    ("lenet", dict(n_train=3000, n_test=500, height=12, width=12, channels=1, classes=4, difficulty=0.5)),
    ("cifar_quick", dict(n_train=1500, n_test=500, height=20, width=20, channels=3, classes=6, difficulty=0.7)),
    ("mlp", dict(n_train=800, n_test=400, height=8, width=8, channels=1, classes=3, difficulty=0.5)),
    ("lenet", dict(n_train=1500, n_test=500, height=24, width=24, channels=3, classes=10, difficulty=0.7)),
]
DATA_SEED = 7
RUN_SEED = 20_000  # far from the knowledge base's seeds (0, 1, ...)


def _label(model: str, params: dict) -> str:
    return (f"synthetic[n={params['n_train']},{params['height']}x{params['width']}x{params['channels']},"
            f"k={params['classes']},d={params['difficulty']}]-{model}")


def _short(config) -> dict:
    return {"framework": config.framework, "optimizer": config.optimizer,
            "learning_rate": config.learning_rate, "batch_size": config.batch_size,
            "epochs": config.epochs, "preset": config.preset_name,
            "threads": config.threads.intra_op}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objective", default="accuracy", choices=("accuracy", "balanced", "time"))
    parser.add_argument("--seeds", type=int, default=3, help="runs of each configuration (default 3)")
    parser.add_argument("--frameworks", default="torch,tensorflow",
                        help="candidate frameworks, comma-separated (default: torch,tensorflow)")
    parser.add_argument("--workloads", default=None,
                        help=f"comma-separated indices into the {len(WORKLOADS)} workloads (default: all)")
    parser.add_argument("--data-seed", type=int, default=DATA_SEED,
                        help=f"the synthetic data sets' seed (default {DATA_SEED}; not 0, the knowledge base's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.data_seed == 0:
        parser.error("--data-seed must not be 0: the knowledge base measured the synthetic data sets of seed 0.")
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1. Got {args.seeds} instead.")
    chosen = list(range(len(WORKLOADS)))
    if args.workloads:
        try:
            chosen = [int(i) for i in args.workloads.split(",")]
        except ValueError:
            parser.error(f"--workloads must be comma-separated integers. Got {args.workloads!r} instead.")
        bad = [i for i in chosen if not 0 <= i < len(WORKLOADS)]
        if bad:
            parser.error(f"--workloads must be in 0..{len(WORKLOADS) - 1}. Got {bad} instead.")
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]

    import dltune
    from dltune import Workload

    rows = []
    started = time.perf_counter()
    for i in chosen:
        model, params = WORKLOADS[i]
        workload = Workload.from_name("synthetic", model=model, seed=args.data_seed, **params)
        rec = dltune.recommend(workload, objective=args.objective, frameworks=frameworks, storage=None)
        configs = {"pick": rec.config, **{f"{c.config.framework} defaults": c.config for c in rec.defaults}}
        predicted = {"pick": rec.predicted["accuracy"],
                     **{f"{c.config.framework} defaults": c.accuracy for c in rec.defaults}}
        measured = {}
        for name, config in configs.items():
            runs = dltune.benchmark(workload, [config.replace(seed=RUN_SEED + s) for s in range(args.seeds)],
                                    storage=None)
            ok = [m for m in runs if m.ok]
            measured[name] = {
                "accuracy": statistics.fmean(m.metrics["test_accuracy"] for m in ok) if ok else None,
                "train_time_s": statistics.fmean(m.metrics["train_time_s"] for m in ok) if ok else None,
                "runs": len(ok), "failed": len(runs) - len(ok),
                "predicted_accuracy": list(predicted[name]), "config": _short(config),
            }
        row = {"workload": _label(model, params), "out_of_distribution": rec.out_of_distribution,
               "nearest_workloads": [[n, round(d, 2)] for n, d in rec.nearest_workloads],
               "measured": measured}
        rows.append(row)
        # Progress on stderr, with --json too.
        print(f"{row['workload']}: " + "; ".join(
            f"{name} {100 * m['accuracy']:.2f} % in {m['train_time_s']:.2f} s" if m["accuracy"] is not None
            else f"{name} failed" for name, m in measured.items())
            + f" (nearest measured: {rec.nearest_workloads[0][0]}, {rec.nearest_workloads[0][1]:.2f})",
            file=sys.stderr, flush=True)

    summary: dict = {"objective": args.objective, "frameworks": frameworks, "seeds": args.seeds,
                     "data_seed": args.data_seed,
                     "workloads": len(rows), "minutes": (time.perf_counter() - started) / 60, "against": {}}
    for fw in frameworks:
        name = f"{fw} defaults"
        both = [r["measured"] for r in rows if name in r["measured"]
                and r["measured"][name]["accuracy"] is not None and r["measured"]["pick"]["accuracy"] is not None]
        if not both:
            continue
        diffs = [100 * (m["pick"]["accuracy"] - m[name]["accuracy"]) for m in both]
        summary["against"][name] = {
            "workloads": len(both),
            "pick_minus_defaults_points": statistics.fmean(diffs),
            "standard_error": statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None,
            "better": sum(d > 0 for d in diffs), "worse": sum(d < 0 for d in diffs),
            "defaults_time_over_pick_median": statistics.median(
                m[name]["train_time_s"] / m["pick"]["train_time_s"] for m in both),
        }
    summary["rows"] = rows
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"recommend (objective {args.objective}, frameworks {', '.join(frameworks)}) against each "
          f"framework's own defaults on {len(rows)} unmeasured workloads, {args.seeds} runs each "
          f"({summary['minutes']:.1f} min)")
    for row in rows:
        print(f"  {row['workload']}{' (out of distribution)' if row['out_of_distribution'] else ''}")
        for name, m in row["measured"].items():
            c = m["config"]
            what = (f"{c['framework']} {c['optimizer']} lr={c['learning_rate']:g} batch={c['batch_size']} "
                    f"epochs={c['epochs']}")
            got = (f"{100 * m['accuracy']:6.2f} % in {m['train_time_s']:7.3f} s"
                   if m["accuracy"] is not None else "failed")
            print(f"    {name:22s} {got}  (predicted {100 * m['predicted_accuracy'][0]:.1f} %)  {what}")
    for name, s in summary["against"].items():
        se = f", standard error {s['standard_error']:.2f}" if s["standard_error"] is not None else ""
        print(f"  the pick minus {name}: {s['pick_minus_defaults_points']:+.2f} points{se}; better on "
              f"{s['better']}, worse on {s['worse']} of {s['workloads']}; the defaults took "
              f"{s['defaults_time_over_pick_median']:.2f}x the pick's time in the median")


if __name__ == "__main__":
    main()
