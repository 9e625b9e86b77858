"""Ask dltune which framework and configuration to use for the digits data on this machine.

The answer is instant: scikit-learn surrogates fitted on the shipped knowledge base of real
measurements predict accuracy, training time and memory. With --verify the recommended
configuration is then really trained, to compare prediction and measurement (about a minute).

    python examples/recommend.py [--objective balanced|accuracy|time] [--storage URL] [--verify]

--storage adds your own measurements (a study's or a tune's Optuna storage) to the knowledge base.
"""

from __future__ import annotations

import argparse

import dltune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objective", default="balanced", choices=("balanced", "accuracy", "time"))
    parser.add_argument("--storage", default="default",
                        help="Optuna storage whose records are added (default: ./dltune.db "
                             "when present)")
    parser.add_argument("--verify", action="store_true", help="train the recommendation and compare")
    args = parser.parse_args()

    rec = dltune.recommend("digits", objective=args.objective, storage=args.storage)
    print(rec)
    if args.verify:
        (measured,) = dltune.benchmark(dltune.Workload.from_name("digits", rec.model), rec.config)
        m = measured.metrics
        print(f"\nmeasured: accuracy {100 * m['test_accuracy']:.1f} %, training {m['train_time_s']:.2f} s, "
              f"peak {m['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
