"""``dltune report``: tables, figures and findings from every stored record, as HTML or Markdown."""

from __future__ import annotations

import argparse

EXAMPLES = """examples:
  dltune report
  dltune report --workload digits-lenet --out digits.md
  dltune report --records study-digits/records.jsonl --out study.html"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLES
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--storage", default=None, metavar="URL",
                        help="Optuna storage URL to read (default: $DLTUNE_STORAGE, else "
                             "sqlite:///dltune.db in the working folder)")
    source.add_argument("--records", default=None,
                        help="records file (JSON, JSON lines or CSV) instead of a storage")
    parser.add_argument("--workload", default=None,
                        help="report this workload only (e.g. digits-lenet, or a data set name); "
                             "default: every workload in the source")
    parser.add_argument("--out", default=None,
                        help="output file (default: report.html, or report.md with --format md)")
    parser.add_argument("--format", choices=("html", "md"), default=None,
                        help="html (one self-contained file) or md (Markdown with PNGs beside it); "
                             "default: from --out's suffix, else html")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune._errors import ParameterError
    from dltune._storage_url import resolve_storage
    from dltune.cli._common import storage_line
    from dltune.report import write_report

    storage = None if args.records else resolve_storage(args.storage or "default")
    if storage is None and not args.records:
        raise ParameterError("The 'storage' parameter must be a database URL that holds the "
                             "records to report (or pass --records). Got 'none' instead.")
    path = write_report(storage=storage, records=args.records, out=args.out,
                        format=args.format, workload=args.workload)
    print(f"report written to {path}")
    print(f"records: {args.records}" if args.records else storage_line(storage))
    return 0
