"""The factorized search's thread phase against an exhaustive grid of thread settings.

Per framework, one configuration (digits, LeNet by default) is timed under every setting of
the default execution space (intra-op, inter-op and BLAS threads from 1 to the cores, and the
framework's start-up knob), each setting in its own warm worker, repeats alternated across the
settings (the order rotates each round), the median counting. Then the thread phase
(``dltune.tuning._thread_phase.tune_threads``) tunes the same configuration on its own.

Prints, per framework:
- the grid's fastest setting and the thread phase's pick, with the pick's time *in the grid*
  over the grid's best (goal: at most 1.05) and its evaluations over the grid's (goal: at most
  a third);
- the premise check: the same seed under every setting, the spread of test accuracy (points)
  and of the final training loss (float drift; a backend whose accuracy really moves belongs in
  ``dltune.tuning._space.THREADS_CHANGE_ACCURACY``).

    python benchmarks/thread_phase.py [--frameworks torch,tensorflow,numpy] [--model lenet]
        [--epochs 2] [--repeats 3]

Run it alone (``flock /tmp/dltune-measure.lock``), with ``uptime`` beside it.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _grid(space):
    names = list(space.dimensions)
    values = [list(range(int(d.low), int(d.high) + 1)) if d.is_range else list(d.choices)
              for d in space.dimensions.values()]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def _time_grid(workload, space, config, settings, repeats, pool):
    from dltune._bench import measure
    from dltune.tuning._objective import _startup_environment

    runs = [space.to_config(s, config) for s in settings]
    times = [[] for _ in settings]
    acc, loss = [None] * len(settings), [None] * len(settings)
    for r in range(repeats):
        for i in [(k + r) % len(settings) for k in range(len(settings))]:
            run_config, env = runs[i]
            with _startup_environment(env):
                record = measure(workload, run_config, pool=pool)
            if record.ok:
                times[i].append(record.metrics["train_time_s"])
                acc[i], loss[i] = record.metrics["test_accuracy"], record.metrics["final_train_loss"]
            else:
                print(f"    failed: {settings[i]}: {(record.error or {}).get('message')}")
    return [statistics.median(t) if t else float("inf") for t in times], acc, loss


def _key(params):
    return tuple(sorted(params.items()))


def main() -> None:
    import optuna

    from dltune._workload import Workload
    from dltune.config import TrainConfig
    from dltune.runtime import WorkerPool
    from dltune.tuning import SearchSpace
    from dltune.tuning._space import _KINDS
    from dltune.tuning._thread_phase import tune_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,tensorflow,numpy")
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    workload = Workload.from_name("digits", args.model)
    for fw in args.frameworks.split(","):
        space = SearchSpace().without_knobs(fw).split()[1]
        config = TrainConfig(framework=fw, optimizer="momentum", learning_rate=0.05, batch_size=64,
                             epochs=args.epochs, seed=0)
        settings = _grid(space)
        with WorkerPool() as pool:
            times, acc, loss = _time_grid(workload, space, config, settings, args.repeats, pool)
            by_setting = {_key(s): t for s, t in zip(settings, times, strict=True)}
            best_i = min(range(len(settings)), key=times.__getitem__)
            storage = optuna.storages.InMemoryStorage()
            hyper = optuna.create_study(storage=storage, study_name="bench", directions=["maximize"])
            hyper.add_trial(optuna.trial.create_trial(value=0.0, user_attrs={"config": config.to_dict()}))
            answer = tune_threads(storage, hyper, hyper.trials[0], workload, space, pool)
        pick = answer["params"]
        # A knob left unset is the grid point with its unset-like value; the framework's default
        # threads (no parameter set) are no grid point.
        full = {**{n: _KINDS[n].unset for n in space.dimensions if _KINDS[n].unset is not None}, **pick}
        pick_time = by_setting.get(_key(full)) if pick else None
        print(f"{fw}: grid of {len(settings)} settings, fastest {settings[best_i]} {times[best_i]:.3f} s")
        print(f"{fw}: grid (intra/inter/blas[/knob] s): " + ", ".join(
            "/".join(str(v) for v in s.values()) + f" {t:.3f}" for s, t in zip(settings, times, strict=True)))
        print(f"{fw}: thread phase picked {pick or 'the default'} after {answer['evaluations']} "
              f"evaluations ({answer['evaluations'] / len(settings):.2f} of the grid; goal <= 0.33); "
              + (f"its grid time / the grid's best {pick_time / times[best_i]:.3f} (goal <= 1.05)"
                 if pick_time is not None else
                 f"its own time / the grid's best {answer['train_time_s'] / times[best_i]:.3f}"))
        good = [i for i, a in enumerate(acc) if a is not None]
        if good:
            spread = 100 * (max(acc[i] for i in good) - min(acc[i] for i in good))
            drift = max(loss[i] for i in good) - min(loss[i] for i in good)
            print(f"{fw}: premise, same seed across {len(good)} settings: test accuracy spread "
                  f"{spread:.2f} pts, final training loss spread {drift:.2e}", flush=True)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
