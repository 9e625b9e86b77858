"""``dltune kb``: build, calibrate, export and validate the knowledge base."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._log import logger
from dltune.config import OBJECTIVES

EXAMPLES = {
    "kb": """examples:
  dltune kb calibrate
  dltune kb build --suite reference --time-budget 8h
  dltune kb validate --objective balanced""",
    "build": """examples:
  dltune kb build --plan
  dltune kb build --suite reference --frameworks torch,tensorflow --time-budget 8h""",
    "calibrate": """examples:
  dltune kb calibrate --plan
  dltune kb calibrate
  dltune kb calibrate --full --time-budget 30m""",
    "export": """examples:
  dltune kb export --from ~/.cache/dltune/kb/reference
  dltune kb export --from ~/.cache/dltune/kb/families
  dltune kb export --calibration""",
    "validate": """examples:
  dltune kb validate
  dltune kb validate --objective time --own-runs 5 --json""",
}


def _action(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES[name])


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_renamed, duration

    parser.epilog = EXAMPLES["kb"]
    sub = parser.add_subparsers(dest="kb_command", metavar="ACTION")
    sub.required = True

    build = _action(sub, "build", "measure a designed suite (resumable, budgeted)")
    build.add_argument("--suite", default="reference", help="suite name")
    build.add_argument("--out", help="build folder (default: <cache>/kb/<suite>)")
    build.add_argument("--frameworks", help="comma-separated backends (default: all available)")
    build.add_argument("--time-budget", type=duration, metavar="DURATION",
                       help="start no run after this long: 90, 90s, 20m, 8h (default: no limit)")
    add_renamed(build, budget_hours="--time-budget")
    build.add_argument("--models", help="comma-separated: measure only the suite's workloads of these models")
    build.add_argument("--configs-per-pair", type=int, default=24,
                       help="space-filling configurations per workload x framework (default: 24)")
    build.add_argument("--repeats", type=int, default=3,
                       help="configurations re-measured with another seed per pair (default: 3)")
    build.add_argument("--fresh", type=int, default=3,
                       help="configurations re-measured in a new worker process per pair, for "
                            "the peak memory a training process needs (default: 3)")
    _add_quiet_wait(build)
    build.add_argument("--plan", action="store_true", help="print the planned runs and exit")
    build.add_argument("--json", action="store_true", help="print the result as JSON")
    build.set_defaults(func=run_build)

    calibrate = _action(sub, "calibrate",
                        "measure this machine's throughput per layer kind and framework (about 2 minutes on 2 cores)")
    calibrate.add_argument("--frameworks", help="comma-separated backends (default: all available)")
    calibrate.add_argument("--out", help="folder (default: <cache>/kb/calibration-<machine>, "
                                         "which recommend reads)")
    calibrate.add_argument("--time-budget", type=duration, metavar="DURATION",
                           help="start no run after this long: 90, 90s, 20m, 1h (default: no limit)")
    add_renamed(calibrate, budget_hours="--time-budget")
    calibrate.add_argument("--full", action="store_true",
                           help="measure whole knowledge-base runs instead (about 60; minutes)")
    _add_quiet_wait(calibrate)
    calibrate.add_argument("--plan", action="store_true", help="print the planned runs and exit")
    calibrate.add_argument("--json", action="store_true", help="print the result as JSON")
    calibrate.set_defaults(func=run_calibrate)

    export = _action(sub, "export", "compress a build folder into the package's shipped KB")
    export.add_argument("--from", dest="source", help="build folder (default: <cache>/kb/reference); "
                        "the shipped file is named after its suite")
    export.add_argument("--out", help="target folder (default: the installed dltune/kb/, or its "
                        "calibrations/ with --calibration)")
    export.add_argument("--calibration", action="store_true",
                        help="ship a `dltune kb calibrate` folder (default: this machine's) instead")
    export.add_argument("--surrogates-only", action="store_true",
                        help="only fit the shipped surrogates again on what the package ships "
                             "(done after every export into the package)")
    export.set_defaults(func=run_export)

    validate = _action(sub, "validate", "leave-one-workload-out scores of the surrogates")
    validate.add_argument("--records", action="append", metavar="FILE",
                          help="records to validate on (default: the shipped KB); repeatable")
    scored = validate.add_mutually_exclusive_group()
    scored.add_argument("--calibrations", action="append", metavar="FILE",
                        help="calibration records to score too (on the shipped KB, beside the "
                             "cache's and the shipped calibrations, scored by default); repeatable")
    scored.add_argument("--no-calibrations", action="store_true",
                        help="score the knowledge base only")
    validate.add_argument("--objective", choices=OBJECTIVES, default="accuracy",
                          help="the objective the regret's pick is made for")
    validate.add_argument("--own-runs", type=int, default=0, metavar="K",
                          help="as after a short tune: fit on K runs of each held-out workload "
                               "(configurations drawn at random) and score on its others")
    validate.add_argument("--seed", type=int, default=0,
                          help="which configurations --own-runs draws")
    validate.add_argument("--json", action="store_true", help="print JSON")
    validate.set_defaults(func=run_validate)


def _add_quiet_wait(parser: argparse.ArgumentParser) -> None:
    # 30 %: dltune.kb._build.QUIET_CPU_PCT, not imported here: every command builds this parser,
    # and that import costs 0.16 s of start-up (a test keeps the two equal).
    parser.add_argument("--quiet-wait", type=float, default=300.0, metavar="S",
                        help="before each run, wait up to S seconds while other work uses more "
                             "than 30%% of a core (default: 300; 0: do not wait)")


def _frameworks(args: argparse.Namespace) -> list[str] | None:
    from dltune.backends._registry import BACKENDS
    from dltune.cli._common import parse_list

    # '' is refused (parse_list), not taken for the default of every available backend.
    return parse_list("frameworks", args.frameworks, list(BACKENDS)) if args.frameworks is not None else None


def _print_plan(args: argparse.Namespace, plan) -> int:
    from dltune.cli._common import format_table, print_json

    rows = [{"round": p.round, "kind": p.kind, "framework": p.config.framework,
             "workload": p.workload.name, "optimizer": p.config.optimizer,
             "lr": p.config.learning_rate, "batch": p.config.batch_size,
             "epochs": p.config.epochs, "threads": p.config.threads.intra_op or "-",
             "key": p.key} for p in plan]
    if args.json:
        print_json(rows)
    else:
        print(format_table(rows, [(k, k, ".4g" if k == "lr" else "") for k in rows[0]]))
    return 0


def _warn_if_loaded(**advice: str) -> None:
    import os

    from dltune.config import usable_cores
    from dltune.kb import load_warning

    warning = load_warning(os.getloadavg()[0], usable_cores(), **advice)
    if warning:
        logger.warning(warning)


def _print_result(args: argparse.Namespace, result) -> None:
    from dltune.cli._common import print_json

    if args.json:
        print_json(result.to_dict())
    else:
        print(f"{result.measured} runs measured ({result.failed} failed), "
              f"{result.done_before + result.measured}/{result.planned} of the suite done, "
              f"stopped: {result.stopped_by}; records in {result.folder}")
        if result.machines > 1:
            print(f"the folder holds runs of {result.machines} machines (its provenance lists "
                  "them, and each session's); the surrogates learn each other machine's speed "
                  "per framework and model against the one most runs come from")


def run_build(args: argparse.Namespace) -> int:
    from dltune.kb import build_kb
    from dltune.kb._build import plan_build

    frameworks = _frameworks(args)
    # The build's own checks, before the warning of a busy machine; all --plan does besides.
    # Checked against the suite's models by plan_build, after the suite itself.
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models is not None else None
    planned = plan_build(args.suite, args.out, frameworks, args.time_budget, args.configs_per_pair,
                         args.repeats, args.fresh, args.quiet_wait, models=models)
    if args.plan:
        return _print_plan(args, planned.runs)
    _warn_if_loaded()
    result = build_kb(args.suite, args.out, frameworks, args.time_budget, args.configs_per_pair,
                      args.repeats, fresh=args.fresh, progress=not (args.json or args.quiet),
                      command="dltune " + " ".join(sys.argv[1:]), quiet_wait_s=args.quiet_wait, models=models)
    _print_result(args, result)
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    from dltune.config import usable_cores
    from dltune.kb import calibrate_machine
    from dltune.kb._calibrate import calibration_plan

    frameworks = _frameworks(args)
    # The calibration's own checks, before the warning of a busy machine; all --plan does besides.
    plan = calibration_plan(frameworks, args.out, args.time_budget, args.quiet_wait, full=args.full)
    if args.plan:
        return _print_plan(args, plan)
    _warn_if_loaded(advice="calibrate (every prediction for this machine will be scaled by it)")
    result = calibrate_machine(frameworks, args.out, args.time_budget,
                               progress=not (args.json or args.quiet),
                               command="dltune " + " ".join(sys.argv[1:]), quiet_wait_s=args.quiet_wait,
                               full=args.full)
    _print_result(args, result)
    if not args.json and not args.full:
        print("recommend now includes these runs: it scales the knowledge base's throughput of "
              "each layer kind and its overheads, per framework, by what they measured here")
    elif not args.json:
        print("recommend now includes these runs: the training-time surrogate learns this "
              "machine's speed from them")
        cores = usable_cores()
        if cores > 2:
            print(f"they ran 1, 2 and {cores} threads: times at {cores} threads are scaled by "
                  f"what {cores} threads gained here, and times between 2 and {cores} threads "
                  "interpolated")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from dltune.kb import (
        calibration_dir,
        default_build_dir,
        export_calibration,
        export_kb,
        shipped_kb_path,
    )

    if args.surrogates_only:
        if args.source or args.out or args.calibration:
            raise ParameterError("'--surrogates-only' takes no '--from', '--out' or '--calibration': "
                                 "it fits on what the package ships.")
        _export_surrogates()
        return 0
    if args.calibration:
        source = Path(args.source) if args.source else calibration_dir()
        if not (source / "records.jsonl").exists():
            raise ParameterError(
                f"The '--from' folder {str(source)!r} holds no calibration records: run "
                f"`dltune kb calibrate` first, or name a calibration folder."
            )
        summary = export_calibration(source, args.out)
    else:
        summary = export_kb(args.source or default_build_dir("reference"), args.out)
    suite = f" of the {summary['suite']} suite" if "suite" in summary else ""
    print(f"shipped {summary['records']} records ({summary['ok']} ok){suite} to {summary['path']}")
    package = shipped_kb_path().parent.resolve()
    if Path(summary["path"]).parent.resolve() in (package, package / "calibrations"):
        # What the package ships changed: so does the fit a fresh install's recommend loads.
        _export_surrogates()
    return 0


def _export_surrogates() -> None:
    from dltune.surrogate import export_shipped_model

    print("fitting the surrogates on the shipped knowledge base and calibrations ...", flush=True)
    summary = export_shipped_model()
    print(f"shipped the surrogates fitted on {summary['records']} records to {summary['path']} "
          f"({summary['bytes'] / 1e6:.1f} MB)")


def run_validate(args: argparse.Namespace) -> int:
    from dltune.cli._common import print_json
    from dltune.kb import validate_kb

    calibrations: Any = list(args.calibrations or [])
    if args.no_calibrations:
        calibrations = False
    elif args.records is None:  # the calibrations made against the shipped knowledge base go with it
        from dltune.kb._calibrate import calibration_records

        calibrations = [*calibration_records(), *calibrations]
    calibrations = calibrations or False
    report = validate_kb(records=args.records, objective=args.objective, calibrations=calibrations,
                         own_runs=args.own_runs, seed=args.seed,
                         progress=not args.quiet)  # on stderr: --json's stdout stays the JSON alone
    if args.json:
        print_json(report.to_dict())
    else:
        print(report.table())
    return 0
