"""``dltune study``: the comparative framework study on one workload, resumable."""

from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  dltune study --workload digits --time-budget 20m
  dltune study --workload digits --frameworks torch,tensorflow --no-tune --out study-digits"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_renamed, add_storage_arg, add_workload_args, duration

    parser.epilog = EXAMPLES
    add_workload_args(parser)
    parser.add_argument("--frameworks", default="all", metavar="LIST",
                        help="comma-separated backends, or 'all': the study's frameworks that are "
                             "available here")
    parser.add_argument("--time-budget", type=duration, default=1200.0, metavar="DURATION",
                        help="time the phases are sized to: 90, 90s, 20m, 1.5h (default: 20m)")
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="cap every run's epochs (default: chosen from the budget)")
    add_storage_arg(parser, "the study's runs are stored in and resumed from")
    parser.add_argument("--out", default=None,
                        help="folder for records.jsonl, summary.json and report.html")
    parser.add_argument("--no-tune", action="store_true", help="skip the tuning phase")
    parser.add_argument("--trials", type=int, default=None,
                        help="tuning trials per framework (default: from the budget, 2 to 20)")
    parser.add_argument("--seeds", type=int, default=1, metavar="K",
                        help="measure every run with K seeds: mean, spread and 95%% interval of "
                        "accuracy and training time (the phases are sized to a K-th of the budget)")
    add_renamed(parser, budget_minutes="--time-budget", tune_trials="--trials")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.cli._common import parse_key_values
    from dltune.study import run_study
    from dltune.tuning import tune

    result = run_study(
        args.workload,
        model=args.model,
        frameworks=args.frameworks,
        time_budget_s=args.time_budget,
        storage=args.storage,
        out=args.out,
        epoch_cap=args.max_epochs,
        tune=None if args.no_tune else tune,
        trials=args.trials,
        seeds=args.seeds,
        progress=not args.quiet,
        dataset_params=parse_key_values(args.data, "data"),
    )
    if args.out is not None:  # the study, then its report
        from dltune.report import write_report

        out = Path(args.out)
        write_report(records=str(out / "records.jsonl"), out=str(out / "report.html"), format="html")
    print(result.summary_text())
    if args.out is not None:
        print(f"report in {out / 'report.html'}")
    return 0
