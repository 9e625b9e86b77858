"""``dltune hardware``."""

from __future__ import annotations

import argparse

EXAMPLES = """examples:
  dltune hardware
  dltune hardware --cores 2 --json"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLES
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--cores", type=int, help="describe the target restricted to N cores "
                        "(default: every usable core)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.hardware import hardware_command

    print(hardware_command(args.json, args.cores))
    return 0
