"""Argument helpers shared by the commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dltune._errors import ParameterError
from dltune._table import format_table  # re-exported: the commands' table formatter

__all__ = ["add_workload_args", "parse_key_values", "parse_list", "print_json", "format_table"]


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


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    from dltune.data import available_datasets
    from dltune.models import available_models

    parser.add_argument("--workload", default="digits",
                        help=f"data set: {', '.join(available_datasets())} (default: %(default)s)")
    parser.add_argument("--model", default="lenet",
                        help=f"model preset: {', '.join(available_models())} (default: %(default)s)")
    parser.add_argument("--data", action="append", metavar="KEY=VALUE",
                        help="data set parameter, e.g. --data n_train=500 (repeatable)")


def load_workload(args: argparse.Namespace):
    from dltune._workload import Workload

    return Workload.from_name(args.workload, args.model or "lenet", **parse_key_values(args.data, "data"))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")

