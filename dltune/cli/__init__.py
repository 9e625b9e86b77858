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


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the chosen command's module is imported (all of them without argv)."""
    from dltune import __version__

    parser = argparse.ArgumentParser(
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


def _one_line_warnings(command: str) -> None:
    """dltune's own warnings as one line each, ``dltune COMMAND: warning: ...``, as its errors
    are; another library's keep Python's form (file and line), which says whose they are."""
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


def main(argv: list[str] | None = None) -> int:
    from dltune._errors import DltuneError

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    _one_line_warnings(args.command)
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
