"""``dltune study``: the comparative framework study on one workload, resumable."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_workload_args

    add_workload_args(parser)
    parser.add_argument("--frameworks", default="all",
                        help="comma-separated backends, or 'all' (the study's frameworks that are "
                             "available here)")
    parser.add_argument("--budget-minutes", type=float, default=20.0,
                        help="time budget the phases are sized to (default: %(default)s)")
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="cap every run's epochs (default: chosen from the budget)")
    parser.add_argument("--storage", default=None,
                        help="Optuna storage URL (default: $DLTUNE_STORAGE, else sqlite:///dltune.db)")
    parser.add_argument("--out", default=None,
                        help="folder for records.jsonl, summary.json and report.html")
    parser.add_argument("--no-tune", action="store_true", help="skip the tuning phase")
    parser.add_argument("--tune-trials", type=int, default=None,
                        help="tuning trials per framework (default: from the budget, 2 to 20)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.cli._common import parse_key_values
    from dltune.study import run_study
    from dltune.tuning import tune

    result = run_study(
        args.workload,
        model=args.model or "lenet",
        frameworks=args.frameworks,
        budget_minutes=args.budget_minutes,
        storage=args.storage,
        out=args.out,
        epoch_cap=args.max_epochs,
        tune=None if args.no_tune else tune,
        tune_trials=args.tune_trials,
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
