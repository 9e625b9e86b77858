"""Does a warm worker whose OpenMP threads busy-wait slow the runs measured beside it?

    python benchmarks/idle_worker_spin.py [--runs 5]

``tune`` searches ``OMP_WAIT_POLICY`` (passive / active) for torch, and the worker pool keys
workers by their environment. Side by side in one run: the median training time of a torch
digits LeNet run (2 epochs, 2 threads, ``OMP_WAIT_POLICY=passive``) in a pool alone, and in a
pool that has just run the same configuration with ``OMP_WAIT_POLICY=active``; each with the
pool as it is (since 2026-12-05 it closes such a worker after its run:
``dltune.runtime._pool.spins_when_idle``) and as it was (keeping it warm), with the CPU the
kept worker used while it waited and the warm workers left. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
from unittest import mock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import psutil

    from dltune import Workload
    from dltune._bench import measure
    from dltune.config import ThreadConfig, TrainConfig
    from dltune.runtime import WorkerPool, _pool

    workload = Workload.from_name("digits", "lenet")
    config = TrainConfig(framework="torch", epochs=2, batch_size=64, threads=ThreadConfig.uniform(2))
    saved = os.environ.get("OMP_WAIT_POLICY")

    def one(policy: str, pool: WorkerPool) -> float:
        os.environ["OMP_WAIT_POLICY"] = policy
        return measure(workload, config, pool=pool).metrics["train_time_s"]

    try:
        for pool_kind in ("as it is", "as it was"):
            keeps = (mock.patch.object(_pool, "spins_when_idle", lambda env: False) if pool_kind == "as it was"
                     else contextlib.nullcontext())
            with keeps:
                for label in ("alone", "after an active-wait run"):
                    with WorkerPool(max_workers=3) as pool:
                        if label != "alone":
                            one("active", pool)
                        others = [psutil.Process(w.proc.pid) for w in pool._workers.values()]
                        for p in others:
                            p.cpu_percent(None)
                        one("passive", pool)  # warm-up: the framework's import
                        seconds = statistics.median(one("passive", pool) for _ in range(args.runs))
                        busy = [p.cpu_percent(None) for p in others]
                        print(f"pool {pool_kind}, {label:25s}: {seconds:.3f} s (median of {args.runs}); "
                              f"{len(pool._workers)} warm worker(s) left"
                              + (f"; the active-wait worker kept warm used {busy[0]:.0f} % CPU meanwhile"
                                 if busy else ""))
    finally:
        if saved is None:
            os.environ.pop("OMP_WAIT_POLICY", None)
        else:
            os.environ["OMP_WAIT_POLICY"] = saved


if __name__ == "__main__":
    main()
