"""The ``dltune`` command line: one module per command, each with ``add_parser`` and ``run``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = ["main"]

# name -> (module, one-line help), in the order a new user meets them; each module imports its
# heavy dependencies inside run().
COMMANDS = {
    "recommend": ("dltune.cli._recommend", "recommend a framework and configuration, instantly"),
    "bench": ("dltune.cli._bench", "train configurations in isolated workers and measure them"),
    "tune": ("dltune.cli._tune", "search hyper-parameters and thread settings per framework"),
    "report": ("dltune.cli._report", "render tables, figures and findings (HTML / Markdown)"),
    "study": ("dltune.cli._study", "run the comparative framework study on a workload"),
    "dashboard": ("dltune.cli._dashboard", "serve optuna-dashboard on dltune's storage"),
    "worker": ("dltune.cli._worker", "run trials of an existing study (any machine)"),
    "kb": ("dltune.cli._kb", "build, calibrate, export and validate the knowledge base"),
    "env": ("dltune.cli._env", "show or install the runtimes the backends need"),
    "hardware": ("dltune.cli._hardware", "describe this machine (or a CPU subset of it)"),
}

EXAMPLES = """examples:
  dltune recommend --workload digits
  dltune bench --workload digits --frameworks torch --epochs 1
  dltune tune --workload digits --trials 10 --time-budget 20m"""


def _chosen(argv: list[str]) -> str | None:
    """The command named on the command line (the first word that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line in dltune's form (exit status 2):
    ``dltune CMD: error: MESSAGE (see 'dltune CMD --help')``, as a refused value is; the
    usage block would bury the line that says what was wrong. Subparsers inherit the class,
    and with it the help formatter that shows defaults and keeps examples as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from dltune.cli._common import HelpFormatter

        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

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
    """The parser; only the chosen command's module is imported (none for ``dltune`` and
    ``dltune --help``, which list the commands; all of them without argv)."""
    from dltune import __version__

    parser = OneLineParser(
        prog="dltune",
        description="Which deep-learning framework and configuration for this workload, measured.",
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action="version", version=f"dltune {__version__}")
    _add_verbosity(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen(argv) if argv is not None else None
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if argv is None or name == chosen:
            importlib.import_module(module).add_parser(command)
            for leaf in _leaves(command):
                _add_verbosity(leaf)
    return parser


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    """``-v`` / ``-q``, before the command or after it (unset unless given: ``main`` reads 0)."""
    parser.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="more messages: debug lines, Optuna's own log")
    parser.add_argument("-q", "--quiet", action="count", default=argparse.SUPPRESS,
                        help="warnings and errors only: no progress")


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that run a command: ``parser`` or, for ``kb`` and ``env``, its actions'."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [leaf for child in action.choices.values() for leaf in _leaves(child)]
    return [parser]


@contextmanager
def _one_line_warnings(prog: str) -> Iterator[None]:
    """dltune's own warnings as one line each, ``dltune COMMAND: warning: ...``, as its errors
    are; another library's keep Python's form (file and line), which says whose they are.
    Python's own way is restored on exit, so that ``main`` called in-process leaves none behind."""
    import warnings
    from pathlib import Path

    package = str(Path(__file__).resolve().parents[1])
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if str(Path(filename).resolve()).startswith(package):
            print(f"{prog}: warning: {message}", file=file or sys.stderr)
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
    if args.command is None:  # bare `dltune`: what it can do
        parser.print_help()
        return 0
    from dltune._log import configure

    args.verbose, args.quiet = getattr(args, "verbose", 0), getattr(args, "quiet", 0)
    configure(args.verbose - args.quiet)
    prog = _command_parser(parser, args).prog  # e.g. "dltune kb build", as argparse's errors name it
    try:
        with _one_line_warnings(prog):
            return int(args.func(args) or 0)
    except DltuneError as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dltune: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
