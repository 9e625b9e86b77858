"""``dltune tune``: an Optuna search per framework that trains, with a final comparison table."""

from __future__ import annotations

import argparse

from dltune.cli._common import add_workload_args, load_workload, parse_key_values, print_json

EXAMPLES = """examples:
  dltune tune --workload digits --frameworks torch --trials 20
  dltune tune --workload digits --objective accuracy --max-train-time-s 30 --time-budget 1h
  dltune tune --workload digits --trials 40 --workers 4 --storage postgresql://user@host/db"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_frameworks_arg, add_renamed, add_storage_arg, duration
    from dltune.config import CONSTRAINTS, OBJECTIVES, TrainConfig, constraint_flag
    from dltune.config._goals import renamed_constraint_flags

    parser.epilog = EXAMPLES
    add_workload_args(parser)
    add_frameworks_arg(parser)
    parser.add_argument("--trials", type=int, default=20,
                        help="COMPLETE trials each framework's study must hold")
    parser.add_argument("--objective", choices=OBJECTIVES, default="balanced",
                        help="accuracy, time (training time), or balanced: the Pareto front of both")
    for key, (what, unit, _, _) in CONSTRAINTS.items():
        parser.add_argument(constraint_flag(key), type=float, metavar="X",
                            help=f"constraint: {what} X ({unit})")
    add_storage_arg(parser, "the studies are stored in")
    parser.add_argument("--workers", type=int, default=1,
                        help="local worker processes per study (use PostgreSQL for K > 1)")
    parser.add_argument("--jobs", type=int, default=1, metavar="K",
                        help="run K trials at once, each pinned to its own cores "
                        "(--cores each; default: the usable cores // K)")
    parser.add_argument("--seed", type=int, help="seed of the sampler and of the training runs")
    parser.add_argument("--sampler", default="tpe", help="tpe, random or nsga2")
    parser.add_argument("--pruner", help="median or none (default: median for --objective accuracy)")
    parser.add_argument("--space", metavar="FILE", help="search space as YAML or JSON")
    parser.add_argument("--fix", action="append", metavar="DIM=VALUE",
                        help="fix a dimension, e.g. --fix epochs=3 (repeatable)")
    parser.add_argument("--time-budget", type=duration, metavar="DURATION",
                        help="start no new trial after this long (per framework): 90, 90s, 20m, 1.5h")
    parser.add_argument("--run-timeout", type=float, metavar="S",
                        help=f"kill a trial's run after S seconds (default: {TrainConfig().timeout_s:g})")
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
                        "for 'dltune recommend'")
    parser.add_argument("--seeds", type=int, default=1, metavar="K",
                        help="with --repeat-best: measure each of those trials with K other seeds "
                        "and report their mean, spread and interval")
    parser.add_argument("--warm-start", action="store_true",
                        help="first try what 'dltune recommend' proposes")
    parser.add_argument("--search", choices=("factorized", "joint"), default="factorized",
                        help="factorized (default): hyper-parameters at the framework's default "
                        "threads, then threads and start-up knobs timed for the best trials; "
                        "joint: everything in one study")
    parser.add_argument("--thread-configs", type=int, default=2, metavar="K",
                        help="how many of the best trials the thread phase tunes (0: none)")
    parser.add_argument("--one-study", action="store_true",
                        help="one study for all --frameworks, the framework a parameter: one "
                        "Pareto front compares them and trials go where a framework is promising")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_renamed(parser, n_trials="--trials", timeout="--time-budget", **renamed_constraint_flags())
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
    from dltune._storage_url import resolve_storage
    from dltune.cli._common import frameworks_from_args, storage_line
    from dltune.config import CONSTRAINTS, usable_cores
    from dltune.tuning import SearchSpace, tune

    frameworks = frameworks_from_args(args.frameworks, _available)
    base = None
    if args.device is not None or args.run_timeout is not None:
        from dltune.config import TrainConfig

        fields = {"device": args.device, "timeout_s": args.run_timeout}
        base = TrainConfig(**{k: v for k, v in fields.items() if v is not None}).validate(max_cores=None)
    cores = args.cores or max(1, usable_cores() // max(args.jobs, 1))
    space = SearchSpace.from_file(args.space, cores=cores) if args.space else SearchSpace(cores=cores)
    fixed = parse_key_values(args.fix, "fix")
    if fixed:
        space = space.fix(**fixed)
    constraints = {key: getattr(args, key) for key in CONSTRAINTS if getattr(args, key) is not None}
    storage = resolve_storage(args.storage)
    result = tune(
        load_workload(args),
        frameworks=frameworks,
        hardware=args.cores,
        space=space,
        trials=args.trials,
        time_budget_s=args.time_budget,
        objective=args.objective,
        constraints=constraints or None,
        sampler=args.sampler,
        pruner=args.pruner,
        storage=storage,
        seed=args.seed,
        workers=args.workers,
        jobs=args.jobs,
        warm_start=args.warm_start,
        compare_preset=not args.no_preset,
        preset_epochs=args.preset_epochs,
        repeat_best=args.repeat_best,
        seeds=args.seeds,
        base=base,
        progress=not (args.quiet or args.json),
        search=args.search,
        thread_configs=args.thread_configs,
        one_study=args.one_study,
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    if not args.verbose:
        print(result.summary(more="--json or -v"))
    else:
        print(result.table() + "\n")
        for res in result.results.values():
            print(f"{res.study_name}" + "".join(f" (+ {t['study_name']})" for t in res.threads[:1]))
    browse = "dltune dashboard" + ("" if args.storage == "default" else f" --storage '{result.storage}'")
    print(f"{storage_line(storage)}  (browse: {browse})")
    if args.device is None:  # recommend's candidates are CPU configurations
        print(recommend_hint(args, frameworks))
    return 0


def recommend_hint(args: argparse.Namespace, frameworks: list[str]) -> str:
    """The ``dltune recommend`` command that picks among these trials (and the knowledge base's
    configurations) by what one more run would reach, with why to run it."""
    import shlex

    from dltune._storage_url import mask_url
    from dltune.config import CONSTRAINTS, constraint_flag

    model = ["--model-file", args.model_file] if getattr(args, "model_file", None) else ["--model", args.model] if args.model else []
    command = ["dltune", "recommend", "--workload", args.workload, *model]
    for item in args.data or []:
        command += ["--data", item]
    command += ["--objective", "accuracy", "--frameworks", ",".join(frameworks)]
    for key in CONSTRAINTS:
        if getattr(args, key, None) is not None:
            command += [constraint_flag(key), format(getattr(args, key), "g")]
    if args.storage != "default":
        command += ["--storage", mask_url(args.storage)]
    trials = "these trials and their repeats" if getattr(args, "repeat_best", 0) else "these trials"
    return ("which configuration to use: " + shlex.join(command) + "\n"
            f"  (it ranks {trials}, with the knowledge base's configurations, by the accuracy one "
            "more run reaches at least; the front's most accurate trial is partly the seed's luck)")
