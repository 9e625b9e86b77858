"""``dltune worker``: join an existing study and run its trials (any number, on any machines)."""

from __future__ import annotations

import argparse

from dltune.cli._common import print_json


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", required=True, help="study name (as 'dltune tune' printed it)")
    parser.add_argument("--storage",
                        help="database URL (default: $DLTUNE_STORAGE, which keeps a password "
                             "out of the process list, else sqlite:///dltune.db)")
    parser.add_argument("--n-trials", type=int,
                        help="stop when the study holds N COMPLETE trials in total "
                             "(default: the target 'dltune tune' set)")
    parser.add_argument("--timeout", type=float, metavar="S", help="start no trial after S seconds")
    parser.add_argument("--seed-offset", type=int, default=0,
                        help="varies the sampler seed between workers of a seeded study")
    parser.add_argument("--any-hardware", action="store_true",
                        help="join even when this machine is not the study's hardware target")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.tuning import run_worker
    from dltune.tuning._storage import quiet_optuna

    quiet_optuna()

    summary = run_worker(args.study, args.storage, args.n_trials, timeout=args.timeout,
                         seed_offset=args.seed_offset, any_hardware=args.any_hardware,
                         progress=not (args.quiet or args.json))
    if args.json:
        print_json(summary)
    elif not args.quiet:
        c = summary["counts"]
        print(f"{summary['study']}: ran {summary['ran']} trial(s) here; study has "
              f"{c.get('COMPLETE', 0)}/{summary['target']} complete, {c.get('FAIL', 0)} failed "
              f"({summary['storage']})")
    return 0
