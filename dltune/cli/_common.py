"""Argument helpers shared by the commands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from dltune._errors import ParameterError
from dltune._table import format_table  # re-exported: the commands' table formatter

__all__ = ["HelpFormatter", "RenamedOption", "add_frameworks_arg", "add_renamed", "add_storage_arg",
           "add_workload_args", "duration", "format_table", "frameworks_from_args",
           "parse_key_values", "parse_list", "print_json", "storage_line"]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text names one already, or it has
    none to show) and keeps the examples of an epilog as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS)
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


class RenamedOption(argparse.Action):
    """An option that was renamed: refused with one line naming the new one (not an alias, so
    that scripts move to the one vocabulary)."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs="?", help=argparse.SUPPRESS)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.error(f"the option '{option_string}' is now '{self.new}'")


def add_renamed(parser: argparse.ArgumentParser, **renamed: str) -> None:
    """Refuse old options: ``add_renamed(parser, timeout="--run-timeout")`` for ``--timeout``."""
    for old, new in renamed.items():
        parser.add_argument("--" + old.replace("_", "-"), action=RenamedOption, new=new)


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``20m`` or ``1.5h`` (a bare number is seconds); the type of
    ``--time-budget``."""
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(text.strip()[-1:].lower(), None)
    number = text.strip()[:-1] if scale is not None else text.strip()
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(
            f"The 'time_budget' parameter must be a positive duration such as 90, 90s, 20m or "
            f"1.5h. Got {text!r} instead.")
    return seconds


def add_storage_arg(parser: argparse.ArgumentParser, use: str, none_ok: bool = False) -> None:
    """``--storage``: the one storage rule (:func:`dltune._storage_url.resolve_storage`);
    ``none_ok`` where the command can work without one."""
    parser.add_argument("--storage", default="default", metavar="URL",
                        help=f"Optuna storage URL {use} (default: $DLTUNE_STORAGE, else "
                             "sqlite:///dltune.db in the working folder"
                             + ("; 'none': store nothing)" if none_ok else ")"))


def storage_line(url: str | None) -> str:
    """The one line a command prints to say which storage it used (password masked)."""
    from dltune._storage_url import mask_url

    return f"storage: {mask_url(url)}" if url else "storage: none (nothing stored)"


def parse_list(name: str, text: str, allowed: list[str]) -> list[str]:
    """Split a comma-separated option and check each item; ``all`` means every allowed value."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items == ["all"]:
        return list(allowed)
    for item in items:
        if item not in allowed:
            raise ParameterError(
                f"The '{name}' parameter must be a comma-separated subset of "
                f"{{{', '.join(allowed)}}} or 'all'. Got {item!r} instead."
            )
    if not items:
        raise ParameterError(f"The '{name}' parameter must name at least one value. Got {text!r}.")
    return items


def parse_key_values(pairs: list[str] | None, option: str) -> dict[str, Any]:
    """``KEY=VALUE`` options; values are read as JSON where they parse, else kept as text."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ParameterError(f"The '{option}' parameter must look like KEY=VALUE. Got {pair!r} instead.")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def add_frameworks_arg(parser: argparse.ArgumentParser) -> None:
    """``--frameworks``, whose default is the one default-frameworks rule
    (:func:`dltune.backends._registry.default_framework_names`), shown in the help."""
    from dltune.backends._registry import default_framework_names

    here = ",".join(default_framework_names()) or "none installed"
    parser.add_argument("--frameworks", default=None, metavar="LIST",
                        help="comma-separated backends, or 'all' for every one installed here "
                             f"(default: the maintained frameworks installed here: {here})")


def frameworks_from_args(text: str | None, available: Callable[[str], bool]) -> list[str]:
    """The backends ``--frameworks`` names: the default ones when None, ``all`` the installed
    ones (``available``) but the numpy reference, else a checked comma-separated list."""
    from dltune.backends._registry import BACKENDS, default_framework_names

    if text is None:
        names = default_framework_names()
        if not names:
            from dltune._errors import BackendUnavailableError

            raise BackendUnavailableError(
                "No default framework (torch, tensorflow) is installed here: name one with "
                "--frameworks (see `dltune env status`).")
        return names
    if text.strip() == "all":
        return [n for n in BACKENDS if n != "numpy" and available(n)]
    return parse_list("frameworks", text, list(BACKENDS))


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    from dltune._workload import default_model
    from dltune.data import MODALITIES, available_datasets
    from dltune.models import available_models

    parser.add_argument("--workload", default="digits",
                        help=f"data set: {', '.join(available_datasets())} (default: %(default)s)")
    model = parser.add_mutually_exclusive_group()
    defaults = ", ".join(f"{default_model(m)} for {m}" for m in MODALITIES if default_model(m))
    model.add_argument("--model", default=None,
                       help=f"model preset: {', '.join(available_models())} (default: the data's, {defaults})")
    model.add_argument("--model-file", dest="model", action=ModelFile, metavar="FILE",
                       help="your own model, a YAML or JSON spec file (docs/how-to/your-own-model.md)")
    parser.set_defaults(model_file=None)
    parser.add_argument("--data", action="append", metavar="KEY=VALUE",
                        help="data set parameter, e.g. --data n_train=500 (repeatable)")


class ModelFile(argparse.Action):
    """``--model-file FILE``: ``model`` becomes the :class:`~dltune.models.ModelSpec` the file
    describes (a bad file is refused in one line before anything runs) and ``model_file`` its
    path, for the commands that print a command line to run next."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from dltune._errors import DltuneError
        from dltune.models import load_spec

        try:
            setattr(namespace, self.dest, load_spec(values))
        except DltuneError as exc:
            parser.error(f"argument {option_string}: {exc}")
        namespace.model_file = values


def load_workload(args: argparse.Namespace):
    from dltune._workload import Workload

    return Workload.from_name(args.workload, args.model, **parse_key_values(args.data, "data"))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")

