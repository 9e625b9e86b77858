"""``dltune worker``: join an existing study and run its trials (any number, on any machines)."""

from __future__ import annotations

import argparse
from typing import Any

from dltune.cli._common import print_json

EXAMPLES = """examples:
  dltune worker --study 'dltune:digits-lenet:torch:<target>'
  dltune worker --study 'dltune:digits-lenet:torch:<target>' --phase threads
  DLTUNE_STORAGE=postgresql://user:pw@host/db dltune worker --study NAME --time-budget 2h"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_renamed, add_storage_arg, duration
    from dltune.tuning._worker import PHASES

    parser.epilog = EXAMPLES
    parser.add_argument("--study", required=True, help="study name (as 'dltune tune' printed it)")
    parser.add_argument("--phase", choices=PHASES,
                        help="hyper-parameter trials, the best trials' thread timings (one such "
                        "worker per machine) or all, in turn (default: threads for a "
                        "'<study>:threads' name, else hyper)")
    add_storage_arg(parser, "that holds the study ($DLTUNE_STORAGE keeps a password out of the "
                            "process list)")
    parser.add_argument("--trials", type=int,
                        help="stop when the study holds N COMPLETE trials in total "
                             "(default: the target 'dltune tune' set)")
    parser.add_argument("--time-budget", type=duration, metavar="DURATION",
                        help="start no new trial after this long: 90, 90s, 20m, 1.5h")
    parser.add_argument("--run-timeout", type=float, metavar="S",
                        help="kill a trial's run after S seconds (default: the study's)")
    parser.add_argument("--seed-offset", type=int, default=0,
                        help="varies the sampler seed between workers of a seeded study")
    parser.add_argument("--any-hardware", action="store_true",
                        help="join even when this machine is not the study's hardware target")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    add_renamed(parser, n_trials="--trials", timeout="--time-budget")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.tuning import run_worker


    summary = run_worker(args.study, args.storage, args.trials, phase=args.phase,
                         time_budget_s=args.time_budget,
                         seed_offset=args.seed_offset, any_hardware=args.any_hardware,
                         run_timeout_s=args.run_timeout,
                         progress=not (args.quiet or args.json))
    if args.json:
        print_json(summary)
    elif not args.quiet:
        c = summary["counts"]
        if summary["phase"] != "threads":
            print(f"{summary['study']}: ran {summary['ran']} trial(s) here; study has "
                  f"{c.get('COMPLETE', 0)}/{summary['target']} complete, {c.get('FAIL', 0)} failed")
        if "threads" in summary:
            print(thread_phase_line(summary["study"], summary["threads"]))
        print(f"storage: {summary['storage']}")
    return 0


def thread_phase_line(study: str, threads: dict[str, Any]) -> str:
    """What the thread phase did here: per trial tuned, its fastest setting and speed-up."""
    from dltune.tuning._result import threads_label

    done = [f"#{a['trial']} {threads_label(a['threads'], a['startup_env'], a['speedup'])}"
            for a in threads["answers"]]
    line = f"{study}:threads: " + ("; ".join(done) if done else "no trial tuned here")
    if threads["skipped"]:
        line += " (left to other processes: " + ", ".join(f"#{n}" for n in threads["skipped"]) + ")"
    return line
