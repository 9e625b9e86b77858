"""Trials per minute: K trials at once on disjoint cores (``tune --jobs K``) against one at a time.

    flock /tmp/dltune-measure.lock python benchmarks/parallel_jobs.py [--trials 12] [--epochs 2] [--rounds 3]

Side by side in one run, alternated round by round: ``tune`` of the same ``--trials``
configurations (torch, digits LeNet, ``--epochs``, enqueued so that both modes train exactly the
same ones) as one trial at a time on all usable cores, and as K = usable cores trials at once
on one core each (``jobs=K``). Each mode works in a fresh SQLite storage. Printed: trials per
minute of the whole ``tune`` call (worker start-up included), the median training time of a
trial, and the ratio jobs / sequential. The two modes are different hardware targets (a trial
on 1 core is not a trial on 2), so this measures throughput, not which configuration wins.
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def _configs(n: int, epochs: int) -> list[dict[str, float | int | str]]:
    return [{"optimizer": "momentum", "learning_rate": round(0.01 + 0.01 * i, 3), "momentum": 0.9,
             "weight_decay": 1e-5, "batch_size": 64, "epochs": epochs} for i in range(n)]


def _one(mode: str, jobs: int, trials: int, epochs: int, seed: int) -> tuple[float, float]:
    import optuna
    from optuna.trial import TrialState

    from dltune import tune
    from dltune.config import usable_cores
    from dltune.tuning import SearchSpace

    cores = usable_cores() if mode == "sequential" else usable_cores() // jobs
    space = SearchSpace(cores=cores).fix(epochs=epochs, intra_op_threads=cores, inter_op_threads=1,
                                         blas_threads=cores, omp_wait_policy="passive")
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/jobs.db"
        t0 = time.perf_counter()
        res = tune("digits", model="lenet", frameworks="torch", space=space, trials=trials,
                   storage=url, seed=seed, sampler="random", compare_preset=False,
                   enqueue=_configs(trials, epochs), jobs=1 if mode == "sequential" else jobs,
                   thread_configs=0)["torch"]
        wall = time.perf_counter() - t0
        done = optuna.load_study(study_name=res.study_name, storage=url).get_trials(
            states=(TrialState.COMPLETE,))
    train = statistics.median(float(t.user_attrs["train_time_s"]) for t in done)
    return 60.0 * len(done) / wall, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from dltune.config import usable_cores

    jobs = usable_cores()
    print(f"{os.uname().nodename}: {jobs} usable cores; load {os.getloadavg()}")
    rates: dict[str, list[float]] = {"sequential": [], "jobs": []}
    for r in range(args.rounds):
        order = ("sequential", "jobs") if r % 2 == 0 else ("jobs", "sequential")
        for mode in order:
            per_min, train = _one(mode, jobs, args.trials, args.epochs, seed=r)
            rates[mode].append(per_min)
            label = f"1 x {jobs} cores" if mode == "sequential" else f"{jobs} x 1 core"
            print(f"round {r + 1} {label:>12}: {per_min:5.1f} trials/min, "
                  f"median training {train:.2f} s per trial")
    seq, par = statistics.median(rates["sequential"]), statistics.median(rates["jobs"])
    paired = [p / s for p, s in zip(rates["jobs"], rates["sequential"], strict=True)]
    print(f"median: sequential {seq:.1f} trials/min, jobs={jobs} {par:.1f} trials/min; "
          f"jobs / sequential by round {', '.join(f'{r:.2f}' for r in paired)}, "
          f"median {statistics.median(paired):.2f}")


if __name__ == "__main__":
    main()
