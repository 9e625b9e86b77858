"""How many trials TPE, random search and grid search need to get near the best accuracy.

Cheap by design: the grid of configurations below is measured ONCE for real (every point
trained in an isolated dltune worker on the chosen workload; results cached as JSON under
$DLTUNE_CACHE/bench/), and the samplers then search that table of real measurements: a trial
is a table look-up, so many seeds cost nothing. A sampler that proposes a point twice pays for
it twice, as a real study would.

    python benchmarks/search_efficiency.py [--framework numpy] [--workload digits] [--data K=V]
        [--model mlp] [--seeds 20] [--budget 120]

Prints, per sampler, the number of trials until the best accuracy seen reaches 99% (and 100%)
of the best accuracy in the whole grid: median, mean, and how many seeds got there within the
budget.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

LEARNING_RATES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
BATCH_SIZES = (16, 32, 64, 128)
EPOCHS = (1, 2, 4, 8)
OPTIMIZERS = ("sgd", "momentum", "adam")


def measure_grid(workload, framework: str, path: Path) -> dict[str, float]:
    """Accuracy of every grid point, measured for real (resumable: cached per point)."""
    from dltune import TrainConfig
    from dltune._bench import measure
    from dltune.config import ThreadConfig
    from dltune.runtime import WorkerPool

    table: dict[str, float] = json.loads(path.read_text()) if path.exists() else {}
    points = list(itertools.product(range(len(LEARNING_RATES)), range(len(BATCH_SIZES)),
                                    range(len(EPOCHS)), OPTIMIZERS))
    todo = [p for p in points if _key(p) not in table]
    t0 = time.perf_counter()
    with WorkerPool(max_workers=1) as pool:
        for i, (lr, bs, ep, opt) in enumerate(todo):
            config = TrainConfig(framework=framework, optimizer=opt, learning_rate=LEARNING_RATES[lr],
                                 batch_size=BATCH_SIZES[bs], epochs=EPOCHS[ep], seed=0,
                                 threads=ThreadConfig(intra_op=1, inter_op=1, blas=1))
            record = measure(workload, config, pool=pool)
            table[_key((lr, bs, ep, opt))] = record.metrics["test_accuracy"] if record.ok else 0.0
            if i % 20 == 19:
                path.write_text(json.dumps(table))
                print(f"  measured {i + 1}/{len(todo)} grid points", file=sys.stderr)
    path.write_text(json.dumps(table))
    if todo:
        print(f"measured {len(todo)} points in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return table


def _key(point) -> str:
    return "|".join(str(v) for v in point)


def trials_to_reach(sampler_name: str, table: dict[str, float], seed: int, budget: int,
                    thresholds: list[float]) -> list[int | None]:
    """Run one search over the table; the trial count at which each threshold was first met."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if sampler_name == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=5)
    elif sampler_name == "random":
        sampler = optuna.samplers.RandomSampler(seed=seed)
    else:
        sampler = optuna.samplers.GridSampler(
            {"lr": list(range(len(LEARNING_RATES))), "batch": list(range(len(BATCH_SIZES))),
             "epochs": list(range(len(EPOCHS))), "optimizer": list(OPTIMIZERS)}, seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    reached: list[int | None] = [None] * len(thresholds)
    best = 0.0
    for n in range(1, budget + 1):
        trial = study.ask()
        point = (trial.suggest_int("lr", 0, len(LEARNING_RATES) - 1),
                 trial.suggest_int("batch", 0, len(BATCH_SIZES) - 1),
                 trial.suggest_int("epochs", 0, len(EPOCHS) - 1),
                 trial.suggest_categorical("optimizer", list(OPTIMIZERS)))
        value = table[_key(point)]
        study.tell(trial, value)
        best = max(best, value)
        for i, threshold in enumerate(thresholds):
            if reached[i] is None and best >= threshold:
                reached[i] = n
        if all(r is not None for r in reached):
            break
    return reached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="numpy")
    parser.add_argument("--workload", default="digits", help="data set name (default: digits)")
    parser.add_argument("--data", action="append", metavar="KEY=VALUE",
                        help="data set parameter, e.g. --data n_train=2000 (repeatable)")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=120, help="trials per search at most")
    args = parser.parse_args(argv)

    from dltune import Workload
    from dltune._paths import cache_dir
    from dltune.cli._common import parse_key_values

    workload = Workload.from_name(args.workload, args.model, **parse_key_values(args.data, "data"))
    folder = cache_dir() / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    key = f"{workload.dataset.fingerprint()}_{args.model}_{args.framework}"
    table = measure_grid(workload, args.framework, folder / f"search_grid_{key}.json")
    values = sorted(table.values(), reverse=True)
    top = values[0]
    thresholds = [0.99 * top, top]
    share = sum(v >= thresholds[0] for v in values) / len(values)
    print(f"workload {workload.name} {dict(workload.dataset.params)}, framework {args.framework}: "
          f"{len(table)} grid points "
          f"measured; best accuracy {top:.4f}; {100 * share:.1f}% of points reach 99% of it "
          f"(>= {thresholds[0]:.4f})")
    print(f"{'sampler':8s} {'target':>6s} {'median':>7s} {'mean':>7s} {'reached':>9s}")
    results = {}
    for sampler in ("tpe", "random", "grid"):
        runs = [trials_to_reach(sampler, table, seed, min(args.budget, len(table)), thresholds)
                for seed in range(args.seeds)]
        for i, label in enumerate(("99%", "100%")):
            hits = [r[i] for r in runs if r[i] is not None]
            med = statistics.median(hits) if hits else float("nan")
            mean = statistics.fmean(hits) if hits else float("nan")
            results[(sampler, label)] = (med, mean, len(hits))
            print(f"{sampler:8s} {label:>6s} {med:7.1f} {mean:7.1f} {len(hits):4d}/{args.seeds:<4d}")
    for label in ("99%", "100%"):
        tpe, rnd = results[("tpe", label)][1], results[("random", label)][1]
        print(f"random / TPE mean trials to {label}: {rnd / tpe:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
