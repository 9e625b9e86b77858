"""``dltune tune``, ``dltune worker`` and ``dltune dashboard`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_TUNE = ("tune", "--workload", "digits", "--model", "mlp", "--data", "n_train=300", "--data",
         "n_test=150", "--frameworks", "numpy", "--fix", "intra_op_threads=1", "--fix",
         "inter_op_threads=1", "--fix", "blas_threads=1", "--fix", "epochs=2")


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory):
    """A SQLite storage holding one small tuned study, made by the CLI."""
    db = tmp_path_factory.mktemp("cli") / "cli.db"
    done = subprocess.run(
        [sys.executable, "-m", "dltune.cli", *_TUNE, "--trials", "2", "--storage",
         f"sqlite:///{db}", "--seed", "0", "--preset-epochs", "1", "--repeat-best", "1", "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return f"sqlite:///{db}", json.loads(done.stdout)


@pytest.mark.slow
def test_tune_json_reports_front_best_and_preset_comparison(tuned_db):
    _, report = tuned_db
    study = report["studies"]["numpy"]
    assert study["counts"] == {"COMPLETE": 2}
    assert study["pareto"] and study["best"]["config"]["epochs"] == 2
    comparison = study["comparison"]
    assert comparison["preset_label"] == "caffe/mnist (no numpy preset), epochs capped 11->1"
    assert comparison["speedup"] > 0 and comparison["trial"] in {0, 1}
    # --repeat-best 1: the most accurate trial measured again with seed 1
    (repeat,) = study["repeats"]
    best = max(study["pareto"], key=lambda t: (t["accuracy"], -t["train_time_s"]))
    assert repeat["trial"] == best["number"] and repeat["seed"] == 1 and repeat["status"] == "ok"
    assert 0.0 <= repeat["accuracy_again"] <= 1.0 and study["repeat_summary"]["pairs"] == 1


@pytest.mark.slow
def test_worker_joins_and_tops_up_an_existing_study(tuned_db, cli):
    url, report = tuned_db
    name = report["studies"]["numpy"]["study_name"]
    done = cli("worker", "--study", name, "--trials", "3", "--json", env={"DLTUNE_STORAGE": url})
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["ran"] == 1 and summary["counts"]["COMPLETE"] == 3


@pytest.mark.slow
def test_cli_errors_are_one_line_exit_2(tmp_path, cli):
    url = f"sqlite:///{tmp_path}/e.db"
    done = cli(*_TUNE, "--fix", "nonsense=1", "--storage", url)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        done.stderr.strip().splitlines()[0]] and "Unknown search-space dimension 'nonsense'" in done.stderr
    done = cli(*_TUNE, "--repeat-best", "-1", "--storage", url)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "The 'repeat_best' parameter must be an int in [0, 1000]. Got -1 instead." in done.stderr
    done = cli("worker", "--study", "nope", "--storage", url)  # no database there yet
    assert done.returncode == 2 and not (tmp_path / "e.db").exists()  # none is created
    assert done.stderr.strip().splitlines() == [
        f"dltune worker: error: The 'storage' database {str(tmp_path / 'e.db')!r} does not exist: a "
        "worker joins a study that 'dltune tune' created there (pass --storage or $DLTUNE_STORAGE)."]
    from dltune.tuning import open_storage

    done = cli("dashboard", "--storage", url, "--port", "1")  # refused before it binds a port
    assert done.returncode == 2 and not (tmp_path / "e.db").exists()
    assert "does not exist: the dashboard shows the studies that 'dltune tune' or 'dltune study'" in done.stderr
    open_storage(url, heartbeat=False)  # a database without that study
    done = cli("worker", "--study", "nope", "--storage", url)
    assert done.returncode == 2 and "No study named 'nope'" in done.stderr
    done = cli("tune", "--frameworks", "numpy", "--storage", "postgresql://u:hunter22@127.0.0.1:1/x")
    assert done.returncode == 2 and "hunter22" not in done.stdout + done.stderr
    assert "postgresql://u:***@127.0.0.1:1/x" in done.stderr


@pytest.mark.parametrize(("option", "says"), [
    ("--sampler", "The 'sampler' parameter must be one of {tpe, random, nsga2} or an Optuna sampler. "
                  "Got 'nope' instead."),
    ("--pruner", "The 'pruner' parameter must be one of {median, none}, None or an Optuna pruner. "
                 "Got 'nope' instead."),
])
def test_a_wrong_sampler_or_pruner_is_refused_before_the_storage_is_made(tmp_path, cli, option, says):
    """The SQLite file was created first, then the name refused."""
    done = cli(*_TUNE, option, "nope", "--storage", f"sqlite:///{tmp_path}/t.db")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"dltune tune: error: {says}"]
    assert list(tmp_path.iterdir()) == []  # no database, lock or writers' folder


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_dashboard_serves_the_study_and_its_trials(tuned_db):
    import socket

    url, report = tuned_db
    name = report["studies"]["numpy"]["study_name"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "dltune.cli", "dashboard", "--storage", url, "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                studies = _get(f"http://127.0.0.1:{port}/api/studies")["study_summaries"]
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()[-2000:]
                assert time.monotonic() < deadline, "the dashboard did not answer"
                time.sleep(0.5)
        found = [s for s in studies if s["study_name"] == name]
        assert len(found) == 1
        detail = _get(f"http://127.0.0.1:{port}/api/studies/{found[0]['study_id']}")
        trials = detail["trials"]
        assert len(trials) >= 2
        for trial in trials:
            keys = {a["key"] for a in trial["user_attrs"]}
            assert {"measurement", "config", "test_accuracy", "train_time_s"} <= keys
            if trial["state"] == "Complete":
                assert len(trial["intermediate_values"]) == 2  # one accuracy per epoch
        assert detail["best_trials"]
        assert detail["objective_names"] == ["test accuracy", "training time (s)"]
        assert detail["directions"] == ["maximize", "minimize"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_tune_ends_with_the_recommend_command_that_picks_among_its_trials():
    """The text output names the ``dltune recommend`` call for this workload, frameworks,
    constraints and storage (its password masked), and recommend's own parser accepts it."""
    import argparse
    import shlex

    from dltune.cli import build_parser
    from dltune.cli._tune import recommend_hint

    args = argparse.Namespace(workload="digits", model="mlp", data=["n_train=300", "n_test=150"],
                              max_train_time_s=2.5, max_memory_mb=None, min_accuracy=0.9,
                              storage="postgresql://u:hunter22@127.0.0.1:5432/x", repeat_best=3)
    first, why = recommend_hint(args, ["torch", "tensorflow"]).splitlines()
    command = first.removeprefix("which configuration to use: ")
    assert command == ("dltune recommend --workload digits --model mlp --data n_train=300 --data n_test=150 "
                       "--objective accuracy --frameworks torch,tensorflow --max-train-time-s 2.5 "
                       "--min-accuracy 0.9 --storage 'postgresql://u:***@127.0.0.1:5432/x'")
    assert "hunter22" not in first and "these trials and their repeats" in why and "luck" in why
    argv = shlex.split(command)[1:]
    parsed = build_parser(argv).parse_args(argv)
    assert (parsed.command, parsed.model, parsed.objective, parsed.max_train_time_s, parsed.min_accuracy,
            parsed.frameworks, parsed.data) == ("recommend", "mlp", "accuracy", 2.5, 0.9,
                                                "torch,tensorflow", ["n_train=300", "n_test=150"])
    # Without a storage given, recommend reads the same default storage tune wrote to.
    args.storage, args.repeat_best = "default", 0
    assert "--storage" not in recommend_hint(args, ["torch"])
    assert "their repeats" not in recommend_hint(args, ["torch"])


def test_a_warm_start_for_a_framework_recommend_cannot_predict_warns_in_one_line_and_tunes(tmp_path, cli):
    """The shipped knowledge base has no numpy runs: recommend refuses the framework, so its
    study starts from the sampler (the whole tune once failed on that refusal)."""
    url = f"sqlite:///{tmp_path}/w.db"  # recommend's records too (none when it is asked)
    done = cli(*_TUNE, "--trials", "1", "--warm-start", "--no-preset", "--storage", url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("dltune tune: warning: No warm start for numpy (its study starts from the sampler): The "
            "'frameworks' parameter must be one of {'jax', 'mxnet', 'tensorflow', 'theano', 'torch'}. Got 'numpy' "
            "instead.") in done.stderr.splitlines(), done.stderr
    assert "1 complete" in done.stdout
