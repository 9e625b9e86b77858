"""The ``dltune`` command line: one module per command, each with ``add_parser`` and ``run``."""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main"]

# name -> (module, one-line help); each module imports its heavy dependencies inside run().
COMMANDS = {
    "hardware": ("dltune.cli._hardware", "describe this machine (or a CPU subset of it)"),
    "bench": ("dltune.cli._bench", "train configurations in isolated workers and measure them"),
    "env": ("dltune.cli._env", "show or install the runtimes the backends need"),
}


def build_parser() -> argparse.ArgumentParser:
    from dltune import __version__

    parser = argparse.ArgumentParser(
        prog="dltune",
        description="Which deep-learning framework and configuration for this workload, measured.",
    )
    parser.add_argument("--version", action="version", version=f"dltune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        importlib.import_module(module).add_parser(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    from dltune._errors import DltuneError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DltuneError as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"dltune {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dltune: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
