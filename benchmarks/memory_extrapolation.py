"""Peak memory far beyond the knowledge base's data sizes: measured against predicted.

    python benchmarks/memory_extrapolation.py [--n-train 50000] [--frameworks tensorflow,torch]

Measures with ``dltune.benchmark`` (each framework in a new worker process: its peak RSS is the
run's own) one epoch of cifar_quick on a synthetic 32x32x3 data set of ``--n-train`` samples
(50,000: 4.2x the largest data set the knowledge base measured), Adam, learning rate 0.000494,
batch 128, 2 threads, and prints each framework's measured peak memory beside what the
surrogates fitted on the shipped knowledge base (and its calibrations; not the user's records)
predict for that same run, before ``recommend``'s out-of-distribution widening. About a minute
per framework on 2 cores.
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=50_000)
    parser.add_argument("--frameworks", default="tensorflow,torch")
    args = parser.parse_args()

    from dltune import Workload, benchmark
    from dltune.config import ThreadConfig, TrainConfig
    from dltune.surrogate import fitted_model, record_row

    workload = Workload.from_name("synthetic", "cifar_quick", n_train=args.n_train, height=32, width=32,
                                  channels=3, classes=10)
    records = []
    for framework in args.frameworks.split(","):
        config = TrainConfig(framework=framework, optimizer="adam", learning_rate=0.000494, batch_size=128,
                             epochs=1, threads=ThreadConfig.uniform(2))
        records.extend(benchmark(workload, [config], storage=None))
    model = fitted_model(storage=None)
    pred = model.predict([record_row(r.to_dict()) for r in records])
    print(f"synthetic {args.n_train} x 32x32x3, cifar_quick, 1 epoch, Adam, batch 128, 2 threads")
    print(f"{'framework':>10}  {'measured MB':>11}  {'predicted MB':>12}  {'interval':>16}  inside")
    for i, r in enumerate(records):
        measured = r.metrics["peak_rss_mb"]
        low, high = pred["peak_rss_mb_low"][i], pred["peak_rss_mb_high"][i]
        print(f"{r.framework:>10}  {measured:11.0f}  {pred['peak_rss_mb'][i]:12.0f}  "
              f"[{low:6.0f}, {high:6.0f}]  {'yes' if low <= measured <= high else 'no'}")


if __name__ == "__main__":
    main()
