"""One study across frameworks (``tune --one-study``) against one study per framework: trials
to reach 99% of the best accuracy either framework reaches.

A grid of configurations is measured ONCE per framework for real (each point trained in an
isolated dltune worker; cached as JSON under $DLTUNE_CACHE/bench/); the searches then look the
table up, so a trial costs nothing and many seeds are cheap. Both arms use tune's sampler
(TPE, 5 random start-up trials) and the same total number of trials:

- one study: the framework is a categorical parameter beside the hyper-parameters, as
  ``tune --one-study`` searches it;
- per framework: one study each, taking turns (trial k goes to framework k mod n), as
  ``tune --frameworks a,b`` with the trials split evenly.

    python benchmarks/one_study_search.py [--frameworks torch,tensorflow] [--model mlp]
        [--seeds 100] [--budget 60]

The frameworks should differ in what they learn (numpy and torch train alike, so their tables
match and the two arms cannot differ). Prints, per arm, the total trials until the best
accuracy seen reaches 99% (and 100%) of the best in both grids: median, mean and how many seeds
got there within the budget (a seed that never got there counts as budget + 1, so the mean is a
lower bound where seeds missed), the one study's share of trials per framework, then the ratio
of the means (per-framework / one study) with a 95% bootstrap interval over the seeds and a
two-sided Mann-Whitney p-value: an interval that holds 1 means the arms were not told apart.
Run it alone behind the lock (``flock -x /tmp/dltune-measure.lock``) the first time: that run
measures the grids.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LEARNING_RATES = (0.003, 0.01, 0.03, 0.1, 0.3)
BATCH_SIZES = (32, 128)
EPOCHS = (1, 4)
OPTIMIZERS = ("sgd", "momentum", "adam")
DIMENSIONS = {"lr": len(LEARNING_RATES), "batch": len(BATCH_SIZES), "epochs": len(EPOCHS)}


def _key(point) -> str:
    return "|".join(str(v) for v in point)


def measure_grid(workload, framework: str, path: Path) -> dict[str, float]:
    """Accuracy of every grid point, measured for real (resumable: cached per point)."""
    from dltune import TrainConfig
    from dltune._bench import measure
    from dltune.config import ThreadConfig
    from dltune.runtime import WorkerPool

    table: dict[str, float] = json.loads(path.read_text()) if path.exists() else {}
    points = list(itertools.product(*(range(n) for n in DIMENSIONS.values()), OPTIMIZERS))
    todo = [p for p in points if _key(p) not in table]
    t0 = time.perf_counter()
    with WorkerPool(max_workers=1) as pool:
        for lr, bs, ep, opt in todo:
            config = TrainConfig(framework=framework, optimizer=opt, learning_rate=LEARNING_RATES[lr],
                                 batch_size=BATCH_SIZES[bs], epochs=EPOCHS[ep], seed=0,
                                 threads=ThreadConfig(intra_op=1, inter_op=1, blas=1))
            record = measure(workload, config, pool=pool)
            table[_key((lr, bs, ep, opt))] = record.metrics["test_accuracy"] if record.ok else 0.0
    path.write_text(json.dumps(table))
    if todo:
        print(f"measured {len(todo)} {framework} points in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    return table


def _sampler(seed: int):
    import optuna

    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=5)  # as tune builds it


def _point(trial) -> str:
    dims = [trial.suggest_int(name, 0, n - 1) for name, n in DIMENSIONS.items()]
    return _key((*dims, trial.suggest_categorical("optimizer", list(OPTIMIZERS))))


def _reached(values: list[float], thresholds: list[float]) -> list[int | None]:
    """The trial count (1-based) at which the best value so far first met each threshold."""
    out: list[int | None] = []
    for threshold in thresholds:
        out.append(next((n for n in range(1, len(values) + 1) if max(values[:n]) >= threshold), None))
    return out


def one_study(tables: dict[str, dict[str, float]], seed: int, budget: int,
              chosen: list[str] | None = None) -> list[float]:
    """The accuracies of ``budget`` trials; ``chosen`` gets each trial's framework."""
    import optuna

    study = optuna.create_study(direction="maximize", sampler=_sampler(seed))
    values = []
    for _ in range(budget):
        trial = study.ask()
        framework = trial.suggest_categorical("framework", list(tables))
        value = tables[framework][_point(trial)]
        study.tell(trial, value)
        values.append(value)
        if chosen is not None:
            chosen.append(framework)
    return values


def per_framework(tables: dict[str, dict[str, float]], seed: int, budget: int,
                  chosen: list[str] | None = None) -> list[float]:
    import optuna

    studies = {fw: optuna.create_study(direction="maximize", sampler=_sampler(seed + 1000 * i))
               for i, fw in enumerate(tables)}
    names = list(tables)
    values = []
    for n in range(budget):
        fw = names[n % len(names)]
        trial = studies[fw].ask()
        value = tables[fw][_point(trial)]
        studies[fw].tell(trial, value)
        values.append(value)
    return values


def _ratio_interval(a: list[int], b: list[int], draws: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of mean(a) / mean(b), the seeds of each arm resampled apart."""
    rng = random.Random(0)
    ratios = sorted(statistics.fmean(rng.choices(a, k=len(a))) / statistics.fmean(rng.choices(b, k=len(b)))
                    for _ in range(draws))
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def main(argv: list[str] | None = None) -> int:
    import optuna

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,tensorflow")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--budget", type=int, default=60, help="total trials per search")
    args = parser.parse_args(argv)

    from dltune import Workload
    from dltune._paths import cache_dir

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    workload = Workload.from_name("digits", args.model)
    folder = cache_dir() / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    tables = {fw: measure_grid(workload, fw, folder / f"one_study_grid_{workload.dataset.fingerprint()}"
                                                      f"_{args.model}_{fw}.json")
              for fw in args.frameworks.split(",")}
    top = max(max(t.values()) for t in tables.values())
    thresholds = [0.99 * top, top]
    for fw, table in tables.items():
        share = sum(v >= thresholds[0] for v in table.values()) / len(table)
        print(f"{fw}: {len(table)} points, best {max(table.values()):.4f}, "
              f"{100 * share:.1f}% reach 99% of the best of all ({thresholds[0]:.4f})")
    from scipy.stats import mannwhitneyu

    print(f"{'arm':14s} {'target':>6s} {'median':>7s} {'mean':>7s} {'reached':>9s}")
    counts: dict[tuple[str, str], list[int]] = {}
    for arm, search in (("one study", one_study), ("per framework", per_framework)):
        chosen: list[str] = []
        runs = [_reached(search(tables, seed, args.budget, chosen), thresholds) for seed in range(args.seeds)]
        for i, label in enumerate(("99%", "100%")):
            counts[(arm, label)] = n = [args.budget + 1 if r[i] is None else r[i] for r in runs]
            reached = sum(r[i] is not None for r in runs)
            print(f"{arm:14s} {label:>6s} {statistics.median(n):7.1f} {statistics.fmean(n):7.1f} "
                  f"{reached:4d}/{args.seeds:<4d}")
        if arm == "one study":
            print("one study's trials per framework: " + ", ".join(
                f"{fw} {100 * chosen.count(fw) / len(chosen):.0f}%" for fw in tables))
    for label in ("99%", "100%"):
        per, one = counts[("per framework", label)], counts[("one study", label)]
        low, high = _ratio_interval(per, one)
        p = mannwhitneyu(per, one, alternative="two-sided").pvalue
        print(f"per-framework / one-study mean trials to {label}: "
              f"{statistics.fmean(per) / statistics.fmean(one):.2f}x [95% {low:.2f}, {high:.2f}], "
              f"Mann-Whitney p {p:.3f} over {args.seeds} seeds per arm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
