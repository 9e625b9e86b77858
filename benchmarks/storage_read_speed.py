"""How fast the records of an Optuna SQLite storage are read: one SQL query against Optuna's
tables, and Optuna's public API, side by side in one run.

    python benchmarks/storage_read_speed.py [--records N] [--studies S] [--repeats R]

Builds a storage in a temporary folder with N trials written as ``dltune tune`` writes them
(the record through :mod:`dltune.measure._codec`, the headline attributes, parameters, values
and a learning curve; every 50th record chunked, every 10th trial failed) over S studies, each
with a preset record, then times :func:`dltune.measure._storage_reader.read_storage_records` on
the file (the direct query) and on the opened storage (Optuna), the best of R calls each, and
Optuna's import in a fresh process (the direct query never imports it). Both must return the
same records. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _record(i: int, epochs: int, big: bool, ok: bool):
    from dltune.config import TrainConfig
    from dltune.measure import Measurement

    curves = [{"epoch": e + 1, "test_accuracy": 0.5 + e / (2 * epochs), "train_loss": 1.0 / (e + 1),
               "epoch_time_s": 0.1} for e in range(epochs)]
    metrics = {"test_accuracy": 0.9, "train_time_s": 1.0 + i % 7, "test_time_s": 0.1,
               "peak_rss_mb": 300.0, "cpu_percent_mean": 180.0, "curves": curves,
               "threads": {"intra_op": 2, "inter_op": 1}}
    if big:  # a long record (many repeats), chunked by the codec
        metrics["repeats"] = [{"train_time_s": 1.0, "test_accuracy": 0.9, "curves": curves}] * 400
    return Measurement(
        status="ok" if ok else "failed", id=f"run-{i}",
        workload={"name": "digits-mlp", "dataset": "digits", "fingerprint": "f" * 16},
        config=TrainConfig(framework="numpy", batch_size=2 ** (3 + i % 5), epochs=epochs).to_dict(),
        hardware={"target": "cpu-2of2c", "cpu_model": "x", "fingerprint": "h" * 16},
        versions={"dltune": "0", "numpy": "2"}, metrics=metrics if ok else {},
        error=None if ok else {"kind": "exit", "message": "boom", "stderr_tail": "x" * 500},
    )


def build(path: Path, n: int, studies: int) -> None:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import TrialState

    from dltune.measure._codec import PRESET_PREFIX, encode, set_record

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    dists = {"learning_rate": FloatDistribution(1e-4, 1.0, log=True),
             "batch_size": CategoricalDistribution([8, 16, 32, 64, 128])}
    for s in range(studies):
        study = optuna.create_study(storage=storage, study_name=f"dltune:digits-mlp:numpy:t{s}",
                                    directions=["maximize", "minimize"])
        set_record(study, _record(n + s, 3, False, True), f"{PRESET_PREFIX}numpy")
        trials = []
        for i in range(s, n, studies):
            ok = i % 10 != 9
            record = _record(i, 5, i % 50 == 0, ok)
            attrs = {**encode(record), "framework": "numpy", "config": record.config,
                     "startup_env": {"OMP_NUM_THREADS": "2"}, "status": record.status}
            if ok:
                attrs.update({k: record.metrics[k] for k in ("test_accuracy", "train_time_s",
                                                             "test_time_s", "peak_rss_mb")})
            trials.append(optuna.trial.create_trial(
                state=TrialState.COMPLETE if ok else TrialState.FAIL,
                values=[0.9, record.metrics["train_time_s"]] if ok else None,
                params={"learning_rate": 0.01, "batch_size": record.config["batch_size"]},
                distributions=dists, user_attrs=attrs,
                intermediate_values={c["epoch"]: c["test_accuracy"] for c in record.metrics["curves"]}
                if ok else None))
        study.add_trials(trials)
    storage.remove_session()
    storage.engine.dispose()


def best_of(repeats: int, call) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--studies", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import optuna

    from dltune.measure._storage_reader import read_storage_records

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dltune.db"
        started = time.perf_counter()
        build(path, args.records, args.studies)
        print(f"storage: {args.records} trials in {args.studies} studies, "
              f"{path.stat().st_size / 1e6:.1f} MB (built in {time.perf_counter() - started:.0f} s)")
        direct_s, direct = best_of(args.repeats, lambda: read_storage_records(path))
        storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
        api_s, api = best_of(args.repeats, lambda: read_storage_records(storage))
        storage.engine.dispose()
    import_s = min(
        float(subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                              "import optuna; print(time.perf_counter() - t)"],
                             check=True, capture_output=True, text=True).stdout)
        for _ in range(args.repeats))
    assert direct == api, "the two readers disagree"
    print(f"records read: {len(direct)} (best of {args.repeats} calls each)")
    print(f"direct SQL query:  {direct_s:7.3f} s")
    print(f"Optuna public API: {api_s:7.3f} s  ({api_s / direct_s:.1f}x the direct query)")
    print(f"import optuna (fresh process): {import_s:.3f} s; Optuna API + import: "
          f"{(api_s + import_s) / direct_s:.1f}x the direct query")


if __name__ == "__main__":
    main()
