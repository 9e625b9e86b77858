"""Several ``dltune worker`` processes on one study in a real PostgreSQL server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dltune import tune
from dltune.tuning import open_storage, record_from_trial

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_three_workers_share_a_study_and_stop_at_exactly_the_target(
    postgres_url, pg_password, tiny_workload, cheap_space
):
    import optuna
    from optuna.trial import TrialState

    # `dltune tune` creates the study (and runs its first trial); workers then join it.
    res = tune(tiny_workload, frameworks="numpy", space=cheap_space, trials=1,
               storage=postgres_url, seed=3, compare_preset=False)["numpy"]
    env = {**os.environ, "DLTUNE_STORAGE": postgres_url}  # the password stays out of argv
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "dltune.cli", "worker", "--study", res.study_name,
             "--trials", "7", "--seed-offset", str(i), "--json"],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(3)
    ]
    outputs = [w.communicate(timeout=600) for w in workers]
    for w, (out, err) in zip(workers, outputs, strict=True):
        assert w.returncode == 0, err[-2000:]
        assert pg_password not in out + err
    import json

    summaries = [json.loads(out) for out, _ in outputs]
    assert all(s["storage"].startswith("postgresql://dltune:***@") for s in summaries)
    study = optuna.load_study(study_name=res.study_name,
                              storage=open_storage(postgres_url, heartbeat=False))
    trials = study.trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 7
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # every trial ran exactly once: one trial per run, one measurement per trial
    assert sum(s["ran"] for s in summaries) == len(trials) - 1
    ids = [record_from_trial(t).id for t in complete]
    assert len(set(ids)) == len(ids)
    assert sorted(t.number for t in trials) == list(range(len(trials)))


def test_tune_with_local_workers_never_prints_the_password(postgres_url, pg_password, cli):
    # n_train=250: a workload (so a study) of its own, apart from the test above
    done = cli("tune", "--workload", "digits", "--model", "mlp", "--data", "n_train=250",
               "--data", "n_test=150", "--frameworks", "numpy", "--trials", "3", "--workers", "2",
               "--fix", "epochs=1", "--fix", "intra_op_threads=1", "--fix", "inter_op_threads=1",
               "--fix", "blas_threads=1", "--no-preset", "--storage", postgres_url, "--seed", "5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert pg_password not in done.stdout + done.stderr
    assert "postgresql://dltune:***@" in done.stdout
    assert "3 complete" in done.stdout
