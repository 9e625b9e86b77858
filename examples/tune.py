"""Tune PyTorch on the digits data with Optuna: accuracy against training time, real runs.

Trials are stored in an Optuna storage (SQLite by default) that ``dltune dashboard`` and
``optuna-dashboard`` read; running the script again resumes the study. A few minutes on 2 cores.

    python examples/tune.py [--frameworks torch] [--trials 8] [--storage sqlite:///example-tune.db]
"""

from __future__ import annotations

import argparse

import dltune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--storage", default="sqlite:///example-tune.db")
    args = parser.parse_args()

    result = dltune.tune("digits", frameworks=args.frameworks, model="mlp", trials=args.trials,
                         storage=args.storage, seed=0, preset_epochs=5, progress=True)
    print(result.table())
    print(f"\nsee the trials with: dltune dashboard --storage {args.storage}")


if __name__ == "__main__":
    main()
