"""``dltune env status`` and ``dltune env install legacy``."""

from __future__ import annotations

import argparse

EXAMPLES = {
    "env": """examples:
  dltune env status
  dltune env install legacy""",
    "status": """examples:
  dltune env status
  dltune env status --deep --json""",
    "install": """examples:
  dltune env install legacy
  dltune env install legacy --python python3.11""",
}


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLES["env"]
    sub = parser.add_subparsers(dest="env_command", metavar="ACTION")
    sub.required = True
    status = sub.add_parser("status", help="list every backend and whether it can run here",
                            description="list every backend and whether it can run here",
                            epilog=EXAMPLES["status"])
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--deep", action="store_true", help="import-probe the legacy runtime")
    status.set_defaults(func=run_status)
    install = sub.add_parser("install", help="create a runtime (only 'legacy': MXNet and Theano)",
                             description="create a runtime (only 'legacy': MXNet and Theano)",
                             epilog=EXAMPLES["install"])
    install.add_argument("name", help="runtime to install: legacy")
    install.add_argument("--path", help="where to create the virtual environment "
                         "(default: $DLTUNE_LEGACY_ENV, else <cache>/legacy)")
    install.add_argument("--python", help="interpreter for it, Python 3.11 or older "
                         "(default: this Python)")
    install.set_defaults(func=run_install)


def run_status(args: argparse.Namespace) -> int:
    from dltune.envs import status_command

    print(status_command(args.json, deep=args.deep))
    return 0


def run_install(args: argparse.Namespace) -> int:
    from dltune.envs import install_command

    print(install_command(args.name, args.path, args.python))
    return 0
