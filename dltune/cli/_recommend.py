"""``dltune recommend``: the framework and configuration to use, predicted from the knowledge base."""

from __future__ import annotations

import argparse


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default="digits", help="data set name (default: digits)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.recommend import recommend

    print(recommend(args.workload))
    return 0
