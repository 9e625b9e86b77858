"""``dltune report``: the study's tables, figures and findings as HTML or Markdown."""

from __future__ import annotations

import argparse


def add_parser(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--storage", default=None,
                        help="Optuna storage URL to read (default: $DLTUNE_STORAGE, else sqlite:///dltune.db)")
    source.add_argument("--records", default=None,
                        help="records file (JSON, JSON lines or CSV) instead of a storage")
    parser.add_argument("--workload", default=None,
                        help="workload name (e.g. digits-lenet) when the source holds several")
    parser.add_argument("--out", default=None,
                        help="output file (default: report.html, or report.md with --format md)")
    parser.add_argument("--format", choices=("html", "md"), default=None,
                        help="html (one self-contained file) or md (Markdown with PNGs beside it); "
                             "default: from --out's suffix, else html")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune.report import write_report

    path = write_report(storage=args.storage, records=args.records, out=args.out,
                        format=args.format, workload=args.workload)
    print(f"report written to {path}")
    return 0
