"""Does ``recommend`` pick well, per model family, on workloads the knowledge base does not hold?

    python benchmarks/unseen_workloads.py [--configs 30] [--seeds 3] [--per-family 2]
        [--families mlp,cnn,resnet,conv1d,rnn] [--frameworks torch,tensorflow] [--max-epochs 30]
        [--runs FILE] [--json] [--quick]

For each model family (``dltune.models.model_family``: ``mlp`` on tabular rows, ``cnn``,
``resnet``, ``conv1d`` and ``rnn`` on images, token ids and sequences) it draws ``--per-family``
workloads (the first of its pool) that the knowledge base does not hold (data-set seed 7, where every
knowledge-base workload is seed 0, and ``iris``, which no suite measured; a workload whose data
and model the knowledge base measured is refused), asks ``dltune.recommend`` (the shipped
knowledge base, no user storage) for its pick with objective ``balanced`` and with ``accuracy``,
and for each of ``--seeds`` seeds trains, once each with that seed: both picks, each candidate
framework's default preset (as ``recommend`` shows it) and ``--configs`` random configurations
drawn anew per seed from the knowledge base's design (a candidate framework, optimizer, learning
rate, batch size, epochs 1..``--max-epochs``, 1 or 2 threads: ``dltune.kb._suite``).

It prints per family, over its workloads and seeds: the regret in points (the best of the random
sample minus the pick: negative where the pick beat them all), the time ratio (the pick's
training time over the fastest random configuration within one point of the best), how often the
pick was within a point at no more than the best's time (the issue's bar) and at no more than that
fastest one's (stricter), and the accuracy-interval coverage (the share
of every measured run whose accuracy lies in the interval predicted for it, scored as
``recommend`` and ``kb validate`` score candidates: ``score_candidates``); and the same regret
and time for each framework's defaults. ``--quick`` is a smoke run: one workload per family on
tiny data, 2 configurations, 1 seed, 2 epochs at most. Run it alone: the times are measured.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

DATA_SEED = 7  # the knowledge base's synthetic data sets are seed 0
RUN_SEED = 30_000  # far from the knowledge base's run seeds (0, 1, ...)
OBJECTIVES = ("balanced", "accuracy")
WITHIN = 0.01  # "as good as the best": within one point

# Per family, workloads no suite measured (dltune.kb.SUITES): other data seeds, sizes, shapes,
# class counts and lengths than the "families" suite's.
POOL: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "mlp": [
        ("iris", "tabular_mlp", {}),
        ("synthetic_tabular", "tabular_mlp", dict(n_train=3000, n_test=500, features=40, classes=6, difficulty=0.6)),
        ("synthetic_tabular", "mlp", dict(n_train=2000, n_test=500, features=16, classes=3, difficulty=0.5)),
    ],
    "cnn": [
        ("synthetic", "lenet", dict(n_train=2000, n_test=500, height=12, width=40, channels=1, classes=20,
                                    difficulty=0.5)),
        ("synthetic", "cifar_quick", dict(n_train=3000, n_test=500, height=40, width=40, channels=3, classes=30,
                                          difficulty=0.6)),
    ],
    "resnet": [
        ("synthetic", "resnet8", dict(n_train=1200, n_test=400, height=28, width=28, channels=3, classes=7,
                                      difficulty=0.5)),
        ("synthetic", "resnet8", dict(n_train=2500, n_test=500, height=20, width=20, channels=1, classes=5,
                                      difficulty=0.6)),
    ],
    "conv1d": [
        ("synthetic_tokens", "text_conv", dict(n_train=1500, n_test=500, length=96, vocab_size=3000, classes=3,
                                               difficulty=0.5)),
        ("synthetic_sequence", "text_conv", dict(n_train=1500, n_test=500, length=40, features=3, classes=4,
                                                 difficulty=0.5)),
    ],
    "rnn": [
        ("synthetic_tokens", "text_lstm", dict(n_train=1500, n_test=500, length=48, vocab_size=1500, classes=3,
                                               difficulty=0.5)),
        ("synthetic_sequence", "text_lstm", dict(n_train=2500, n_test=500, length=24, features=5, classes=5,
                                                 difficulty=0.6)),
    ],
}
QUICK_SIZES = dict(n_train=60, n_test=30)


def _params(dataset: str, params: dict[str, Any], quick: bool) -> dict[str, Any]:
    from dltune.data import DATASETS

    out = dict(params, **(QUICK_SIZES if quick else {}))
    if "seed" in inspect.signature(DATASETS[dataset].loader).parameters:
        out["seed"] = DATA_SEED
    return out


def _random_configs(frameworks: list[str], n: int, max_epochs: int, seed: int, label: str) -> list:
    """``n`` configurations drawn uniformly from the knowledge base's design (a candidate framework each)."""
    import numpy as np

    from dltune.config import usable_cores
    from dltune.kb._suite import _config_from_unit

    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    return [_config_from_unit(frameworks[int(rng.integers(len(frameworks)))], rng.random(5), max_epochs,
                              min(2, usable_cores())) for _ in range(n)]


def _intervals(perf: Any, meta: dict[str, Any], hardware: dict[str, Any], configs: list) -> list[tuple[float, float]]:
    """Each configuration's accuracy interval, as ``recommend`` scores its candidates."""
    from dltune.recommend._pipeline import score_candidates
    from dltune.recommend._recommend import _config_features

    rows = [{"meta": meta, "hardware": dict(hardware, usable_cores=c.threads.cores or hardware["usable_cores"]),
             "config": _config_features(c)} for c in configs]
    pred = score_candidates(meta, hardware, rows, perf).predicted
    return list(zip(pred["accuracy_low"].tolist(), pred["accuracy_high"].tolist(), strict=True))


def _measure(workload: Any, configs: list, pool: Any, runs_file: str | None) -> list[tuple[float, float] | None]:
    """(accuracy, training time) of one run of each configuration; None where it failed. With
    ``runs_file``, runs it holds (same workload, same configuration and seed) are reused and new
    ones appended: a rerun after a change to ``recommend`` measures only the new picks."""
    import dltune

    keys = [json.dumps({"workload": workload.name, "data": dict(workload.dataset.params), "config": c.to_dict()},
                       sort_keys=True, default=str) for c in configs]
    known: dict[str, Any] = {}
    if runs_file and Path(runs_file).exists():
        for line in Path(runs_file).read_text().splitlines():
            entry = json.loads(line)
            known[entry["key"]] = entry["run"]
    todo = [(c, k) for c, k in zip(configs, keys, strict=True) if k not in known]
    if todo:
        runs = dltune.benchmark(workload, [c for c, _ in todo], storage=None, pool=pool)
        new = {k: (m.metrics["test_accuracy"], m.metrics["train_time_s"]) if m.ok else None
               for (_, k), m in zip(todo, runs, strict=True)}
        if runs_file:
            with open(runs_file, "a") as f:
                f.writelines(json.dumps({"key": k, "run": r}) + "\n" for k, r in new.items())
        known.update(new)
    return [None if known[k] is None else tuple(known[k]) for k in keys]


def _one_workload(family: str, dataset: str, model: str, params: dict[str, Any], args: argparse.Namespace,
                  perf: Any, hardware: dict[str, Any], pool: Any) -> dict[str, Any]:
    import dltune
    from dltune import Workload
    from dltune.recommend._recommend import _resolve_workload

    workload = Workload.from_name(dataset, model, **params)
    _, spec, meta, fingerprint = _resolve_workload(workload, None, perf)
    if any(w.get("fingerprint") == fingerprint and w.get("model") == spec.name for w in perf.workloads_):
        raise SystemExit(f"{workload.name}: the knowledge base holds this workload; draw another.")
    frameworks = args.frameworks.split(",") if args.frameworks else None
    recs = {o: dltune.recommend(workload, objective=o, frameworks=frameworks, storage=None) for o in OBJECTIVES}
    candidates = recs["balanced"].frameworks
    fixed = {f"{o} pick": r.config for o, r in recs.items()}
    fixed.update({f"{c.config.framework} defaults": c.config for c in recs["balanced"].defaults})
    if args.quick:
        fixed = {k: c.replace(epochs=min(c.epochs, args.max_epochs)) for k, c in fixed.items()}
    seeds = []
    for s in range(args.seeds):
        sample = _random_configs(candidates, args.configs, args.max_epochs, s, workload.name)
        configs = [c.replace(seed=RUN_SEED + s) for c in [*fixed.values(), *sample]]
        measured = _measure(workload, configs, pool, args.runs)
        intervals = _intervals(perf, meta, hardware, configs)
        covered = [low <= m[0] <= high for m, (low, high) in zip(measured, intervals, strict=True) if m]
        drawn = [m for m in measured[len(fixed):] if m]
        if not drawn:
            continue
        best, best_time = max(drawn, key=lambda m: (m[0], -m[1]))
        fastest = min(t for a, t in drawn if a >= best - WITHIN)
        seeds.append({"seed": RUN_SEED + s, "best_random": best, "best_random_s": best_time,
                      "fastest_within_point_s": fastest,
                      "coverage": [sum(covered), len(covered)], "random_failed": len(sample) - len(drawn),
                      "fixed": {name: None if m is None else
                                {"accuracy": m[0], "train_time_s": m[1], "regret_points": 100 * (best - m[0]),
                                 "time_ratio": m[1] / fastest, "time_vs_best": m[1] / best_time}
                                for name, m in zip(fixed, measured[:len(fixed)], strict=True)}})
    row = {"family": family, "workload": workload.name, "model_family": meta.get("model_family"),
           "out_of_distribution": recs["balanced"].out_of_distribution, "ood_reasons": recs["balanced"].ood_reasons,
           "picks": {o: r.config.to_dict() for o, r in recs.items()}, "seeds": seeds}
    print(f"{family} {workload.name}: " + "; ".join(
        f"{name} {_fmt(statistics.fmean(x['fixed'][name]['regret_points'] for x in seeds if x['fixed'][name]))} pts"
        for name in fixed if any(x["fixed"][name] for x in seeds)), file=sys.stderr, flush=True)
    return row


def _fmt(value: float | None, spec: str = "+.2f") -> str:
    return "n/a" if value is None else format(value, spec)


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family and per measured configuration kind (pick, defaults): regret, time ratio, within."""
    out: dict[str, dict[str, Any]] = {}
    for family in dict.fromkeys(r["family"] for r in rows):
        seeds = [s for r in rows if r["family"] == family for s in r["seeds"]]
        done, runs = sum(s["coverage"][0] for s in seeds), sum(s["coverage"][1] for s in seeds)
        scores: dict[str, Any] = {}
        for name in dict.fromkeys(n for s in seeds for n in s["fixed"]):
            got = [s["fixed"][name] for s in seeds if s["fixed"].get(name)]
            if got:
                scores[name] = {
                    "regret_points": statistics.fmean(g["regret_points"] for g in got),
                    "regret_points_max": max(g["regret_points"] for g in got),
                    "time_ratio": statistics.median(g["time_ratio"] for g in got),
                    "within_point_no_slower": sum(g["regret_points"] <= 100 * WITHIN and g["time_ratio"] <= 1.0
                                                  for g in got),
                    "within_point_no_slower_than_best": sum(
                        g["regret_points"] <= 100 * WITHIN and g["time_vs_best"] <= 1.0 for g in got),
                    "runs": len(got), "failed": sum(1 for s in seeds if name in s["fixed"]) - len(got),
                }
        out[family] = {"workloads": sum(r["family"] == family for r in rows), "seeds": len(seeds),
                       "coverage_pct": 100 * done / runs if runs else None, "scores": scores}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=30, help="random configurations per seed (default 30)")
    parser.add_argument("--seeds", type=int, default=3, help="repeats, each with its own seed and sample (default 3)")
    parser.add_argument("--per-family", type=int, default=2, help="workloads drawn per family (default 2)")
    parser.add_argument("--families", default=",".join(POOL), help=f"comma-separated (default {','.join(POOL)})")
    parser.add_argument("--frameworks", default=None,
                        help="candidate frameworks, comma-separated (default: recommend's)")
    parser.add_argument("--max-epochs", type=int, default=30, help="the random sample's longest training (default 30)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 workload per family, tiny data, 2 configurations, 1 seed, 2 epochs")
    parser.add_argument("--runs", metavar="FILE", default=None,
                        help="a JSON-lines file of measured runs: those it holds are reused, new ones appended")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.configs, args.seeds, args.per_family, args.max_epochs = 2, 1, 1, min(args.max_epochs, 2)
    for flag in ("configs", "seeds", "per_family", "max_epochs"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1. Got {getattr(args, flag)} instead.")
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in POOL]
    if unknown:
        parser.error(f"--families must be among {', '.join(POOL)}. Got {unknown[0]!r} instead.")

    from dltune.recommend._recommend import _resolve_hardware
    from dltune.runtime import WorkerPool
    from dltune.surrogate import fitted_model

    perf = fitted_model(storage=None)
    hardware = _resolve_hardware(None)[0].to_dict()
    started = time.perf_counter()
    rows = []
    with WorkerPool(max_workers=4) as pool:
        for family in families:
            for dataset, model, params in POOL[family][: args.per_family]:
                rows.append(_one_workload(family, dataset, model, _params(dataset, params, args.quick), args,
                                          perf, hardware, pool))
    summary = {"configs": args.configs, "seeds": args.seeds, "max_epochs": args.max_epochs, "quick": args.quick,
               "minutes": (time.perf_counter() - started) / 60, "families": summarise(rows), "rows": rows}
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"recommend on workloads the knowledge base does not hold: per family, against the best of "
          f"{args.configs} random configurations (epochs up to {args.max_epochs}), {args.seeds} seed(s) "
          f"each ({summary['minutes']:.1f} min{', QUICK smoke run' if args.quick else ''})")
    for family, f in summary["families"].items():
        print(f"  {family}: {f['workloads']} workload(s), {f['seeds']} workload-seed(s); accuracy intervals "
              f"covered {_fmt(f['coverage_pct'], '.0f')}% of the measured runs")
        for name, s in f["scores"].items():
            print(f"    {name:20s} regret {_fmt(s['regret_points'])} points (max {_fmt(s['regret_points_max'])}), "
                  f"time {s['time_ratio']:.2f}x the fastest within a point of the best; within a point at no "
                  f"more time than the best {s['within_point_no_slower_than_best']}/{s['runs']}, than that "
                  f"fastest {s['within_point_no_slower']}/{s['runs']}" + (f", {s['failed']} failed" if s["failed"] else ""))


if __name__ == "__main__":
    main()
