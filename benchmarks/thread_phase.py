"""The factorized search's thread phase against an exhaustive grid of thread settings.

Per framework, one configuration (digits, LeNet by default) is timed under every setting of
the default execution space (intra-op, inter-op and BLAS threads from 1 to the cores, and the
framework's start-up knob) and under the framework's own default (no setting, the phase's first
candidate), each setting in its own warm worker, repeats alternated across the settings (the
order rotates each round), the median counting. Then the thread phase
(``dltune.tuning._thread_phase.tune_threads``) tunes the same configuration on its own.

Prints, per framework:
- the grid's fastest setting and the thread phase's pick, with the pick's time *in the grid*
  over the grid's best (goal: at most 1.05) and its evaluations over the grid's (goal: at most
  a third);
- the pick and the grid's fastest timed again side by side (``--confirm`` alternated repeats):
  the grid's fastest is the minimum of many noisy medians, so its grid time is biased low;
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
import math
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _grid(space):
    """The framework's default (no setting), then every combination of the dimensions. A knob
    at its declared unset-like value is left unset, as the thread phase leaves it: an explicit
    ``OMP_WAIT_POLICY=passive`` is not libgomp's default (which spins a while before sleeping)."""
    from dltune.tuning._space import _KINDS

    names = list(space.dimensions)
    values = [list(range(int(d.low), int(d.high) + 1)) if d.is_range else list(d.choices)
              for d in space.dimensions.values()]
    return [{}] + [{n: v for n, v in zip(names, combo, strict=True) if _KINDS[n].unset is None or v != _KINDS[n].unset}
                   for combo in itertools.product(*values)]


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
    from dltune.tuning._thread_phase import tune_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,tensorflow,numpy")
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--confirm", type=int, default=5,
                        help="alternated repeats timing the pick against the grid's fastest again")
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
            phase_times = {_key(t.params): t.values[0] for t in optuna.load_study(
                study_name=answer["study_name"], storage=storage).trials if t.values}
            # None where the pick is no grid point (the default's threads with one dimension set).
            pick_time = by_setting.get(_key(pick))
            same = _key(pick) == _key(settings[best_i])
            again = None if same else _time_grid(workload, space, config, [pick, settings[best_i]],
                                                 args.confirm, pool)[0]
        print(f"{fw}: grid of {len(settings)} settings, fastest {settings[best_i] or 'the default'} "
              f"{times[best_i]:.3f} s")
        print(f"{fw}: grid (intra/inter/blas[/knob] s): " + ", ".join(
            ("/".join(str(v) for v in s.values()) or "default") + f" {t:.3f}"
            for s, t in zip(settings, times, strict=True)))
        print(f"{fw}: thread phase's own times (s): " + ", ".join(
            f"{dict(k) or 'default'} {t:.3f}" for k, t in phase_times.items()))
        print(f"{fw}: thread phase picked {pick or 'the default'} after {answer['evaluations']} "
              f"evaluations ({answer['evaluations'] / len(settings):.2f} of the grid; goal <= 0.33); "
              + ("it is no grid point" if pick_time is None else
                 f"its grid time / the grid's best {pick_time / times[best_i]:.3f} (goal <= 1.05)"))
        near = sum(t <= 1.05 * times[best_i] for t in times)
        chance = 1 - math.comb(len(settings) - near, answer["evaluations"]) / math.comb(len(settings), answer["evaluations"])
        print(f"{fw}: {near} of {len(settings)} grid settings are within 5% of its best; "
              f"{answer['evaluations']} settings drawn at random hold one with probability {chance:.2f}")
        print(f"{fw}: timed again side by side ({args.confirm} alternated repeats): " + (
            "the pick is the grid's fastest" if again is None else
            f"pick {again[0]:.3f} s, grid's fastest {again[1]:.3f} s, ratio {again[0] / again[1]:.3f}"),
            flush=True)
        good = [i for i, a in enumerate(acc) if a is not None]
        if good:
            spread = 100 * (max(acc[i] for i in good) - min(acc[i] for i in good))
            drift = max(loss[i] for i in good) - min(loss[i] for i in good)
            print(f"{fw}: premise, same seed across {len(good)} settings: test accuracy spread "
                  f"{spread:.2f} pts, final training loss spread {drift:.2e}", flush=True)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
