"""The ``dltune`` command line: one module per command, each with ``add_parser`` and ``run``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

__all__ = ["main"]

# name -> (module, one-line help); each module imports its heavy dependencies inside run().
COMMANDS = {
    "hardware": ("dltune.cli._hardware", "describe this machine (or a CPU subset of it)"),
    "bench": ("dltune.cli._bench", "train configurations in isolated workers and measure them"),
    "env": ("dltune.cli._env", "show or install the runtimes the backends need"),
    "tune": ("dltune.cli._tune", "search hyper-parameters and thread settings per framework (Optuna)"),
    "worker": ("dltune.cli._worker", "run trials of an existing study (shared storage, any machine)"),
    "dashboard": ("dltune.cli._dashboard", "serve optuna-dashboard on dltune's storage (loopback)"),
    "kb": ("dltune.cli._kb", "build, export and validate the knowledge base of measurements"),
    "recommend": ("dltune.cli._recommend", "recommend a framework and configuration, instantly"),
    "study": ("dltune.cli._study", "run the comparative framework study on a workload, resumable"),
    "report": ("dltune.cli._report", "render the study's tables, figures and findings (HTML / MD)"),
}


def _chosen(argv: list[str]) -> str | None:
    """The command named on the command line (the first word that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line in dltune's form (exit status 2):
    ``dltune CMD: error: MESSAGE (see 'dltune CMD --help')``, as a refused value is; the
    usage block would bury the line that says what was wrong. Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` chose, e.g. ``dltune kb build``'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None))
            if chosen is not None:
                return _command_parser(chosen, args)
    return parser


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the chosen command's module is imported (all of them without argv)."""
    from dltune import __version__

    parser = OneLineParser(
        prog="dltune",
        description="Which deep-learning framework and configuration for this workload, measured.",
    )
    parser.add_argument("--version", action="version", version=f"dltune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = _chosen(argv) if argv is not None else None
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if chosen is None or name == chosen:
            importlib.import_module(module).add_parser(command)
    return parser


@contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """dltune's own warnings as one line each, ``dltune COMMAND: warning: ...``, as its errors
    are; another library's keep Python's form (file and line), which says whose they are.
    Python's own way is restored on exit, so that ``main`` called in-process leaves none behind."""
    import warnings
    from pathlib import Path

    package = str(Path(__file__).resolve().parents[1])
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if str(Path(filename).resolve()).startswith(package):
            print(f"dltune {command}: warning: {message}", file=file or sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def main(argv: list[str] | None = None) -> int:
    from dltune._errors import DltuneError

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's parser, not the top-level one parse_args would use
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        with _one_line_warnings(args.command):
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
