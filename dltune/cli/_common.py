"""Argument helpers shared by the commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dltune._errors import ParameterError

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
        if "=" not in pair:
            raise ParameterError(f"The '{option}' parameter must look like KEY=VALUE. Got {pair!r} instead.")
        key, value = pair.split("=", 1)
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


def format_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """Rows as an aligned text table; ``columns`` holds (key, header, format spec)."""

    def cell(value: Any, spec: str) -> str:
        if value is None:
            return "-"
        if spec and isinstance(value, (int, float)):
            return format(value, spec)
        return str(value)

    body = [[cell(row.get(k), spec) for k, _, spec in columns] for row in rows]
    headers = [h for _, h, _ in columns]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in body:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(lines)
