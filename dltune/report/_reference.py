"""The published figures of the original study (GTDLBench, "Server 1"), shipped as package data."""

from __future__ import annotations

import csv
from importlib import resources
from typing import Any

__all__ = ["published_figures", "reference_text"]


def _open(name: str):
    return resources.files("dltune").joinpath("reference", name).open("r", encoding="utf-8")


def published_figures(dataset: str = "mnist") -> dict[str, dict[str, Any]]:
    """Framework -> the study's training / testing seconds and accuracy % (CPU and GPU)."""
    out: dict[str, dict[str, Any]] = {}
    with _open("gtdlbench_results.csv") as fh:
        for row in csv.DictReader(fh):
            if row["dataset"] == dataset:
                out[row["framework"]] = {k: float(v) for k, v in row.items()
                                         if k not in ("dataset", "framework")}
    return out


def reference_text() -> str:
    """The presets' description (framework_defaults.md)."""
    with _open("framework_defaults.md") as fh:
        return fh.read()
