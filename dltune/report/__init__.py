"""The report: tables, figures and findings from every kind of record (study, bench, tune, the
knowledge base), as HTML (self-contained) or Markdown + PNGs."""

from __future__ import annotations

from dltune.report._analysis import Analysis
from dltune.report._build import build_report, write_report
from dltune.report._data import load_study_records, records_frame, thread_label
from dltune.report._model import Figure, Finding, Report, Section, Table
from dltune.report._reference import published_figures
from dltune.report._render import render_html, render_markdown

__all__ = [
    "Analysis",
    "Figure",
    "Finding",
    "Report",
    "Section",
    "Table",
    "build_report",
    "load_study_records",
    "published_figures",
    "records_frame",
    "render_html",
    "render_markdown",
    "thread_label",
    "write_report",
]
