"""``dltune tune`` of N trials against the in-process limit, per framework, alternated.

A: ``dltune tune --workload digits --model mlp --frameworks FW --trials N --seed S --no-preset``
   (the factorized search's hyper-parameter phase: ``--thread-configs 0``), a fresh SQLite file
   each time.
B: the limit: the same N configurations (read back from A's study; the seeded sampler proposes
   the same ones every time) trained by ``run_training`` in one process that imports the
   framework once, asked and told through an in-memory Optuna study.

Both are timed as whole processes (interpreter start, imports, data, training). The order
alternates (A B, B A, ...). Prints per framework the median walls and wall A / wall B (goal: at
most 1.3), then, once, the full factorized tune (with its thread phase) for scale.

    python benchmarks/tune_throughput.py [--frameworks torch,tensorflow] [--trials 8]
        [--repeats 2] [--seed 0]

Run it alone (``flock /tmp/dltune-measure.lock``), with ``uptime`` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _inner(framework: str, configs_file: str) -> None:
    """B: the configurations through run_training in this process, with ask/tell."""
    import optuna

    from dltune._workload import Workload
    from dltune.backends._base import run_training
    from dltune.backends._loader import load_trainer_class

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    configs = json.loads(Path(configs_file).read_text())
    workload = Workload.from_name("digits", "mlp")
    d = workload.dataset
    data = (d.x_train, d.y_train, d.x_test, d.y_test)
    trainer_cls = load_trainer_class(framework)
    trainer_cls.setup({})
    study = optuna.create_study(directions=["maximize", "minimize"])
    for config in configs:
        trial = study.ask()
        trial.suggest_float("learning_rate", 1e-6, 10.0)  # what tune's trial records, roughly
        metrics = run_training(trainer_cls, workload.model, config, data)
        study.tell(trial, [metrics["test_accuracy"], metrics["train_time_s"]])


def _tune(framework: str, trials: int, seed: int, thread_configs: int) -> tuple[float, list[dict], float]:
    """A: the wall, the trials' configurations, and their training time (epochs and evaluation)."""
    import optuna

    from dltune.tuning._objective import record_from_trial

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/t.db"
        cmd = [sys.executable, "-m", "dltune.cli", "-q", "tune", "--workload", "digits", "--model",
               "mlp", "--frameworks", framework, "--trials", str(trials), "--seed", str(seed),
               "--no-preset", "--thread-configs", str(thread_configs), "--storage", url, "--json"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        name = json.loads(done.stdout)["studies"][framework]["study_name"]
        study = optuna.load_study(study_name=name, storage=url)
        trials_ = sorted(study.trials, key=lambda t: t.number)
        configs = [t.user_attrs["config"] for t in trials_]
        metrics = [record_from_trial(t).metrics for t in trials_]
        training = sum(m["train_time_s"] + sum(c["eval_time_s"] for c in m["curves"]) for m in metrics)
    return wall, configs, training


def _limit(framework: str, configs: list[dict]) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(configs, f)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--inner", framework, f.name],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                                "KERAS_BACKEND": "tensorflow",
                                                                "TF_CPP_MIN_LOG_LEVEL": "2"})
    wall = time.perf_counter() - t0
    os.unlink(f.name)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,tensorflow")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inner", nargs=2, metavar=("FRAMEWORK", "CONFIGS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        _inner(*args.inner)
        return
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    for fw in args.frameworks.split(","):
        walls: dict[str, list[float]] = {"tune": [], "limit": []}
        configs: list[dict] | None = None
        training: list[float] = []
        for r in range(args.repeats):
            for side in (("tune", "limit") if r % 2 == 0 or configs is None else ("limit", "tune")):
                if side == "tune":
                    wall, got, trained = _tune(fw, args.trials, args.seed, 0)
                    training.append(trained)
                    if configs is not None and [c["learning_rate"] for c in got] != [c["learning_rate"] for c in configs]:
                        print(f"  {fw}: warning: the seeded search proposed other configurations")
                    configs = got
                else:
                    wall = _limit(fw, configs)
                walls[side].append(wall)
                print(f"  {fw} repeat {r} {side}: {wall:.1f} s", flush=True)
        a, b = statistics.median(walls["tune"]), statistics.median(walls["limit"])
        ratios = [x / y for x, y in zip(walls["tune"], walls["limit"], strict=True)]
        print(f"{fw}: tune {a:.1f} s (its trials' training {statistics.median(training):.1f} s), "
              f"in-process limit {b:.1f} s, tune / limit {a / b:.2f} "
              f"(per repeat {min(ratios):.2f}-{max(ratios):.2f}; goal <= 1.3)", flush=True)
        full, _, _ = _tune(fw, args.trials, args.seed, 2)
        print(f"{fw}: with the thread phase (2 configurations): {full:.1f} s, {full / b:.2f} x the limit",
              flush=True)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
