"""Rerun the comparative framework study on your own workload and machine, then read the report.

Every framework with its own default settings and with every other framework's, one-at-a-time
sweeps of batch size, learning rate and epochs, thread settings, and a short tune per framework,
all within a time budget, stored in an Optuna storage (run it again to resume). Then the report:
one self-contained HTML file with the tables, figures and findings. About 4 minutes on 2 cores
with the defaults below (the full study: ``dltune study --workload digits --time-budget 20m``).

    python examples/study.py [--frameworks torch,tensorflow] [--time-budget-minutes 3] [--out example-study]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dltune.report import write_report
from dltune.study import run_study
from dltune.tuning import tune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,tensorflow")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--time-budget-minutes", type=float, default=3.0)
    parser.add_argument("--out", default="example-study")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{out / 'study.db'}"
    result = run_study("digits", model=args.model, frameworks=args.frameworks,
                       time_budget_s=60 * args.time_budget_minutes, storage=storage, tune=tune,
                       trials=3)
    print(result.summary_text())
    html = write_report(storage=storage, out=out / "report.html")
    md = write_report(storage=storage, out=out / "markdown" / "report.md")
    print(f"report: {html} (open it in a browser) and {md}")


if __name__ == "__main__":
    main()
