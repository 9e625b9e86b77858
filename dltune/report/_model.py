"""What a report is made of (tables, figures, findings, sections) and how numbers are written."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Figure", "Finding", "Report", "Section", "Table", "fmt_mb", "fmt_num", "fmt_pct",
           "fmt_s", "fmt_span", "fmt_x", "names", "same_time"]


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt_s(x: Any) -> str:
    """Seconds: 3 significant figures below 100 s, whole seconds above."""
    if _missing(x):
        return "–"
    x = float(x)
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_pct(x: Any) -> str:
    """Accuracy or CPU percentages, one decimal."""
    return "–" if _missing(x) else f"{float(x):.1f}"


def fmt_mb(x: Any) -> str:
    return "–" if _missing(x) else f"{float(x):.0f}"


def fmt_x(x: Any) -> str:
    """A ratio such as a speed-up."""
    return "–" if _missing(x) else f"{float(x):.1f}x"


def same_time(a: Any, b: Any) -> bool:
    """Whether two times are a tie: their ratio shows as 1.0x, so no finding ranks them."""
    lo, hi = sorted((float(a), float(b)))
    return hi == lo if lo <= 0 else fmt_x(hi / lo) == "1.0x"


def fmt_span(lo: Any, hi: Any, fmt) -> str:
    """``lo–hi`` in ``fmt``, or one value where both show the same."""
    a, b = fmt(lo), fmt(hi)
    return a if a == b else f"{a}–{b}"


def names(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def fmt_num(x: Any) -> str:
    """A hyper-parameter value: ints as ints, floats in short form."""
    if _missing(x):
        return "–"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:.3g}"
    try:
        return str(int(x))
    except (TypeError, ValueError):
        return str(x)


@dataclass
class Table:
    name: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str | None = None


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    caption: str = ""

    @property
    def filename(self) -> str:
        return f"{self.name}.png"


@dataclass
class Finding:
    """One sentence of the findings and the numbers it states (keyed for checking)."""

    topic: str
    text: str
    values: dict[str, float] = field(default_factory=dict)


@dataclass
class Section:
    title: str
    items: list[Any] = field(default_factory=list)


@dataclass
class Report:
    title: str
    meta: list[str]
    findings: list[Finding]
    sections: list[Section]

    @property
    def tables(self) -> dict[str, Table]:
        return {i.name: i for s in self.sections for i in s.items if isinstance(i, Table)}

    @property
    def figures(self) -> dict[str, Figure]:
        return {i.name: i for s in self.sections for i in s.items if isinstance(i, Figure)}
