"""``dltune tune``: an Optuna search per framework that trains, with a final comparison table."""

from __future__ import annotations

import argparse

from dltune.cli._common import add_workload_args, load_workload, parse_key_values, print_json

# tune reads these itself ("time": training time; "both": accuracy and training time).
_OBJECTIVES = ("accuracy", "time", "both")
# Each constraint: tune's option (its argparse name), tune's constraint key, recommend's flag.
_CONSTRAINTS = (("max_train_time", "max_train_time_s", "--max-train-time"),
                ("max_memory", "max_memory_mb", "--max-memory-mb"),
                ("min_accuracy", "min_accuracy", "--min-accuracy"))


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_workload_args(parser)
    parser.add_argument("--frameworks", default="torch",
                        help="comma-separated backends, or 'all' (default: torch)")
    parser.add_argument("--trials", type=int, default=20,
                        help="COMPLETE trials each study must hold (default: 20)")
    parser.add_argument("--objective", choices=sorted(_OBJECTIVES), default="both",
                        help="accuracy, time, or both as a Pareto front (default: both)")
    parser.add_argument("--max-train-time", type=float, metavar="S",
                        help="constraint: training time at most S seconds")
    parser.add_argument("--max-memory", type=float, metavar="MB",
                        help="constraint: peak memory at most MB megabytes")
    parser.add_argument("--min-accuracy", type=float, metavar="A",
                        help="constraint: test accuracy at least A (0..1)")
    parser.add_argument("--storage", help="database URL (default: $DLTUNE_STORAGE or sqlite:///dltune.db)")
    parser.add_argument("--workers", type=int, default=1,
                        help="local worker processes per study (use PostgreSQL for K > 1)")
    parser.add_argument("--seed", type=int, help="seed of the sampler and of the training runs")
    parser.add_argument("--sampler", default="tpe", help="tpe, random or nsga2 (default: tpe)")
    parser.add_argument("--pruner", help="median or none (default: median for --objective accuracy)")
    parser.add_argument("--space", metavar="FILE", help="search space as YAML or JSON")
    parser.add_argument("--fix", action="append", metavar="DIM=VALUE",
                        help="fix a dimension, e.g. --fix epochs=3 (repeatable)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="start no new trial after S seconds (per framework)")
    parser.add_argument("--cores", type=int, help="tune for the target restricted to N cores")
    parser.add_argument("--device", help="cpu (default) or cuda: train the trials on an NVIDIA "
                        "GPU (torch, tensorflow); a study of its own")
    parser.add_argument("--preset-epochs", type=int, metavar="N",
                        help="cap the default preset's epochs at N (shown in the table)")
    parser.add_argument("--no-preset", action="store_true",
                        help="do not measure the default presets for comparison")
    parser.add_argument("--repeat-best", type=int, default=0, metavar="K",
                        help="after the search, measure the K most accurate trials again with "
                        "another seed: how much was luck, and the workload's own seed noise "
                        "for 'dltune recommend' (default: 0)")
    parser.add_argument("--warm-start", action="store_true",
                        help="first try what 'dltune recommend' proposes")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _available(framework: str) -> bool:
    from dltune._bench import interpreter_for
    from dltune._errors import DltuneError

    try:
        interpreter_for(framework)
    except DltuneError:
        return False
    return True


def run(args: argparse.Namespace) -> int:
    from dltune.backends._registry import BACKENDS
    from dltune.cli._common import parse_list
    from dltune.config import usable_cores
    from dltune.tuning import SearchSpace, tune
    from dltune.tuning._storage import default_storage_url, mask_url, quiet_optuna

    quiet_optuna()

    if args.frameworks.strip() == "all":
        frameworks = [n for n in BACKENDS if n != "numpy" and _available(n)]
    else:
        frameworks = parse_list("frameworks", args.frameworks, list(BACKENDS))
    base = None
    if args.device is not None:
        from dltune.config import TrainConfig

        base = TrainConfig(device=args.device).validate(max_cores=None)
    cores = args.cores or usable_cores()
    space = SearchSpace.from_file(args.space, cores=cores) if args.space else SearchSpace(cores=cores)
    fixed = parse_key_values(args.fix, "fix")
    if fixed:
        space = space.fix(**fixed)
    constraints = {key: getattr(args, attr) for attr, key, _ in _CONSTRAINTS
                   if getattr(args, attr) is not None}
    result = tune(
        load_workload(args),
        frameworks=frameworks,
        hardware=args.cores,
        space=space,
        n_trials=args.trials,
        timeout=args.timeout,
        objectives=args.objective,
        constraints=constraints or None,
        sampler=args.sampler,
        pruner=args.pruner,
        storage=args.storage,
        seed=args.seed,
        workers=args.workers,
        warm_start=args.warm_start,
        compare_preset=not args.no_preset,
        preset_epochs=args.preset_epochs,
        repeat_best=args.repeat_best,
        base=base,
        progress=not (args.quiet or args.json),
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    print(result.table())
    print()
    for res in result.studies.values():
        c = res.counts
        print(f"{res.study_name}: {c.get('COMPLETE', 0)} complete, {c.get('FAIL', 0)} failed, "
              f"{c.get('PRUNED', 0)} pruned")
    url = mask_url(args.storage or default_storage_url())
    print(f"storage: {url}  (browse: dltune dashboard" + (f" --storage '{url}')" if args.storage else ")"))
    if base is None:  # recommend's candidates are CPU configurations
        print(recommend_hint(args, frameworks))
    return 0


def recommend_hint(args: argparse.Namespace, frameworks: list[str]) -> str:
    """The ``dltune recommend`` command that picks among these trials (and the knowledge base's
    configurations) by what one more run would reach, with why to run it."""
    import shlex

    from dltune.tuning._storage import mask_url

    command = ["dltune", "recommend", "--workload", args.workload, "--model", args.model or "lenet"]
    for item in args.data or []:
        command += ["--data", item]
    command += ["--objective", "accuracy", "--frameworks", ",".join(frameworks)]
    for attr, _, flag in _CONSTRAINTS:
        if getattr(args, attr, None) is not None:
            command += [flag, format(getattr(args, attr), "g")]
    if args.storage:
        command += ["--storage", mask_url(args.storage)]
    trials = "these trials and their repeats" if getattr(args, "repeat_best", 0) else "these trials"
    return ("which configuration to use: " + shlex.join(command) + "\n"
            f"  (it ranks {trials}, with the knowledge base's configurations, by the accuracy one "
            "more run reaches at least; the front's most accurate trial is partly the seed's luck: "
            "docs/tuning.md)")
