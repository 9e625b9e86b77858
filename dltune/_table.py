"""Plain-text tables: the one formatter the library's ``table()`` methods and the CLI share.

It lives in the domain layer, so that no library module has to import the command-line package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_table"]


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
