"""Bad command-line input, across every command: one line naming the parameter, exit 2, nothing
done and nothing written.

Each case runs ``dltune.cli.main`` in-process (a subprocess each would take minutes) in a fresh
working folder that holds the files the case names, and compares that folder before and after.
The commands' options are guarded (numpy, one epoch, tiny data, one trial, ``--plan``) so that
an input wrongly accepted ends quickly; a watchdog interrupts one that does not, and fails it.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import signal
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dltune.cli import main

# A wrongly accepted case is interrupted after this long: it would train or search.
WATCHDOG_S = 30

# Options that keep a run small should a case be wrongly accepted (the case's own options come
# after them, and argparse keeps an option's last value).
TINY_DATA = "--workload digits --model mlp --data n_train=50 --data n_test=50"
BENCH = f"bench {TINY_DATA} --frameworks numpy --epochs 1 --storage none"
TUNE = f"tune {TINY_DATA} --frameworks numpy --trials 1 --no-preset --quiet --fix epochs=1"
WORKER = "worker --study {study} --storage sqlite:///{db} --quiet"
DASHBOARD = "dashboard --storage sqlite:///{db}"
KB_BUILD = "kb build --plan --suite tiny --frameworks numpy"
KB_BUILD_RUN = "kb build --suite tiny --frameworks numpy --configs-per-pair 1 --repeats 0 --fresh 0 --quiet-wait 0 --out {work}/kb"
KB_CALIBRATE = "kb calibrate --plan --frameworks numpy"
KB_CALIBRATE_RUN = "kb calibrate --frameworks numpy --quiet-wait 0 --out {work}/cal"
KB_VALIDATE = "kb validate --records {records} --no-calibrations"
KB_EXPORT = "kb export --out {work}/export"
RECOMMEND = "recommend --workload digits --model mlp"
STUDY = (f"study {TINY_DATA} --frameworks numpy --no-tune --max-epochs 1 --time-budget 6 "
         "--quiet --storage sqlite:///{work}/study.db --out {work}/study")
REPORT = "report --records {records} --out {work}/report.html"

# (command line, text the one error line must hold: the parameter's name as the message gives it)
CASES: list[tuple[str, str]] = [
    # no command, or an unknown one
    ("nope", "COMMAND"),
    ("--bogus", "--bogus"),
    # hardware
    ("hardware --cores 0", "'cores'"),
    ("hardware --cores -1", "'cores'"),
    ("hardware --cores 1000000", "'cores'"),
    ("hardware --cores x", "--cores"),
    ("hardware --cores 1.5", "--cores"),
    ("hardware --cores nan", "--cores"),
    ("hardware --json --bogus", "--bogus"),
    ("hardware extra", "extra"),
    # bench: wrong types and out-of-range numbers
    (f"{BENCH} --epochs x", "--epochs"),
    (f"{BENCH} --epochs 0", "'epochs'"),
    (f"{BENCH} --epochs -3", "'epochs'"),
    (f"{BENCH} --epochs 10000000", "'epochs'"),
    (f"{BENCH} --batch-size 0", "'batch_size'"),
    (f"{BENCH} --batch-size 1e3", "--batch-size"),
    (f"{BENCH} --batch-size 100000000", "'batch_size'"),
    (f"{BENCH} --lr nan", "'learning_rate'"),
    (f"{BENCH} --lr inf", "'learning_rate'"),
    (f"{BENCH} --lr -1", "'learning_rate'"),
    (f"{BENCH} --lr 0", "'learning_rate'"),
    (f"{BENCH} --lr abc", "--lr"),
    (f"{BENCH} --momentum nan", "'momentum'"),
    (f"{BENCH} --momentum -0.5", "'momentum'"),
    (f"{BENCH} --momentum 2", "'momentum'"),
    (f"{BENCH} --weight-decay inf", "'weight_decay'"),
    (f"{BENCH} --weight-decay -1", "'weight_decay'"),
    (f"{BENCH} --seed -1", "'seed'"),
    (f"{BENCH} --seed 99999999999999999999", "'seed'"),
    (f"{BENCH} --seed x", "--seed"),
    (f"{BENCH} --threads 0", "'threads'"),
    (f"{BENCH} --threads 1000000", "'threads'"),
    (f"{BENCH} --inter-op 0", "'threads.inter_op'"),
    (f"{BENCH} --inter-op -2", "'threads.inter_op'"),
    (f"{BENCH} --blas-threads 0", "'threads.blas'"),
    (f"{BENCH} --cores 0", "'threads.cores'"),
    (f"{BENCH} --cores 1000000", "'threads.cores'"),
    (f"{BENCH} --run-timeout 0", "'timeout_s'"),
    (f"{BENCH} --run-timeout -5", "'timeout_s'"),
    (f"{BENCH} --run-timeout nan", "'timeout_s'"),
    (f"{BENCH} --run-timeout inf", "'timeout_s'"),
    (f"{BENCH} --repeats 0", "'repeats'"),
    (f"{BENCH} --repeats -1", "'repeats'"),
    (f"{BENCH} --repeats 1000000", "'repeats'"),
    # bench: unknown names
    (f"{BENCH} --frameworks nope", "'frameworks'"),
    (f"{BENCH} --frameworks numpy,nope", "'frameworks'"),
    (f"{BENCH} --frameworks ''", "'frameworks'"),
    (f"{BENCH} --frameworks ,", "'frameworks'"),
    (f"{BENCH} --workload imagenet", "'workload'"),
    (f"{BENCH} --workload ''", "'workload'"),
    (f"{BENCH} --model resnet", "'model'"),
    (f"{BENCH} --preset keras", "'preset'"),
    (f"{BENCH} --optimizer rmsprop", "'optimizer'"),
    (f"{BENCH} --device tpu", "'device'"),
    (f"{BENCH} --device cuda", "'device'"),
    (f"{BENCH} --bogus 1", "--bogus"),
    # bench: malformed data parameters
    (f"{BENCH} --data n_train", "'data'"),
    (f"{BENCH} --data =5", "'data'"),
    (f"{BENCH} --data n_train=abc", "'n_train'"),
    (f"{BENCH} --data n_train=0", "'n_train'"),
    (f"{BENCH} --data n_train=-5", "'n_train'"),
    (f"{BENCH} --data n_train=1000000000", "'n_train'"),
    (f"{BENCH} --data n_train=NaN", "'n_train'"),
    (f"{BENCH} --data n_train=50.5", "'n_train'"),
    (f"{BENCH} --data n_train=true", "'n_train'"),
    (f"{BENCH} --data seed=-1", "'seed'"),
    (f"{BENCH} --data bogus=1", "bogus"),
    (f"{BENCH} --data 'n_train=[1, 2]'", "'n_train'"),
    # bench: outputs and storages
    (f"{BENCH} --out {{dir}}", "'out'"),
    (f"{BENCH} --out {{file}}/r.csv", "'out'"),
    (f"{BENCH} --out /proc/x.csv", "'out'"),
    (f"{BENCH} --storage foo", "'storage'"),
    (f"{BENCH} --storage redis://localhost/0", "'storage'"),
    (f"{BENCH} --storage sqlite:///{{textdb}}", "'storage'"),
    (f"{BENCH} --storage sqlite:///{{truncdb}}", "'storage'"),
    (f"{BENCH} --storage sqlite:///{{file}}/s.db", "'storage'"),
    (f"{BENCH} --storage sqlite:///{{dir}}", "'storage'"),
    # env
    ("env", "ACTION"),
    ("env nope", "ACTION"),
    ("env status --bogus", "--bogus"),
    ("env install", "name"),
    ("env install nope", "'name'"),
    ("env install legacy --python {missing} --path {work}/legacy", "Python interpreter"),
    ("env install legacy --python {dir} --path {work}/legacy", "Python interpreter"),
    ("env install legacy --python /bin/false --path {work}/legacy", "Python interpreter"),
    ("env install legacy --path {file}", "'path'"),
    ("env install legacy extra", "extra"),
    # tune
    (f"{TUNE} --trials 0", "'trials'"),
    (f"{TUNE} --trials -1", "'trials'"),
    (f"{TUNE} --trials x", "--trials"),
    (f"{TUNE} --objective nope", "--objective"),
    (f"{TUNE} --sampler nope", "'sampler'"),
    (f"{TUNE} --pruner nope", "'pruner'"),
    (f"{TUNE} --max-train-time-s nan", "'max_train_time"),
    (f"{TUNE} --max-train-time-s -1", "'max_train_time"),
    (f"{TUNE} --max-memory-mb -5", "'max_memory"),
    (f"{TUNE} --max-memory-mb inf", "'max_memory"),
    (f"{TUNE} --min-accuracy 2", "'min_accuracy'"),
    (f"{TUNE} --min-accuracy nan", "'min_accuracy'"),
    (f"{TUNE} --storage foo", "'storage'"),
    (f"{TUNE} --storage ftp://host/x", "'storage'"),
    (f"{TUNE} --storage sqlite:///{{textdb}}", "'storage'"),
    (f"{TUNE} --storage sqlite:///{{truncdb}}", "'storage'"),
    (f"{TUNE} --storage sqlite:///{{dir}}", "'storage'"),
    (f"{TUNE} --workers 0", "'workers'"),
    (f"{TUNE} --workers -1", "'workers'"),
    (f"{TUNE} --seed -1", "'seed'"),
    (f"{TUNE} --space {{missing}}", "search-space file"),
    (f"{TUNE} --space {{dir}}", "search-space file"),
    (f"{TUNE} --space {{badjson}}", "search-space file"),
    (f"{TUNE} --space {{ints}}", "search-space file"),
    (f"{TUNE} --space {{empty}}", "search-space file"),
    (f"{TUNE} --fix nonsense=1", "'nonsense'"),
    (f"{TUNE} --fix epochs", "'fix'"),
    (f"{TUNE} --fix epochs=0", "'epochs'"),
    (f"{TUNE} --fix epochs=abc", "'epochs'"),
    (f"{TUNE} --fix batch_size=-1", "'batch_size'"),
    (f"{TUNE} --fix learning_rate=NaN", "'learning_rate'"),
    (f"{TUNE} --time-budget -1", "'time_budget'"),
    (f"{TUNE} --time-budget 5d", "'time_budget'"),
    (f"{TUNE} --run-timeout 0", "'timeout_s'"),
    (f"{TUNE} --run-timeout nan", "'timeout_s'"),
    (f"{TUNE} --storage none", "'storage'"),
    (f"{TUNE} --time-budget nan", "'time_budget'"),
    (f"{TUNE} --cores 0", "'cores'"),
    (f"{TUNE} --cores 1000000", "'cores'"),
    (f"{TUNE} --device tpu", "'device'"),
    (f"{TUNE} --preset-epochs 0", "'preset_epochs'"),
    (f"{TUNE} --repeat-best -1", "'repeat_best'"),
    (f"{TUNE} --repeat-best 1000000", "'repeat_best'"),
    (f"{TUNE} --frameworks ''", "'frameworks'"),
    (f"{TUNE} --frameworks nope", "'frameworks'"),
    (f"{TUNE} --workload nope", "'workload'"),
    (f"{TUNE} --model nope", "'model'"),
    (f"{TUNE} --data n_train=0", "'n_train'"),
    (f"{TUNE} --data x", "'data'"),
    # worker (on a database that holds one finished study, so that a wrongly accepted case ends)
    ("worker", "--study"),
    (f"{WORKER} --study nope", "'nope'"),
    (f"{WORKER} --trials 0", "'trials'"),
    (f"{WORKER} --trials -1", "'trials'"),
    (f"{WORKER} --trials x", "--trials"),
    (f"{WORKER} --time-budget -1", "'time_budget'"),
    (f"{WORKER} --time-budget nan", "'time_budget'"),
    (f"{WORKER} --seed-offset x", "--seed-offset"),
    (f"{WORKER} --storage foo", "'storage'"),
    (f"{WORKER} --storage sqlite:///{{missing}}", "'storage'"),
    (f"{WORKER} --storage sqlite:///{{textdb}}", "'storage'"),
    (f"{WORKER} --storage sqlite:///{{truncdb}}", "'storage'"),
    (f"{WORKER} --storage sqlite:///{{dir}}", "'storage'"),
    # dashboard
    (f"{DASHBOARD} --port 0", "'port'"),
    (f"{DASHBOARD} --port -1", "'port'"),
    (f"{DASHBOARD} --port 70000", "'port'"),
    (f"{DASHBOARD} --port x", "--port"),
    (f"{DASHBOARD} --port {{busy_port}}", "'port'"),
    (f"{DASHBOARD} --host no-such-host.invalid", "'host'"),
    (f"{DASHBOARD} --storage foo", "'storage'"),
    (f"{DASHBOARD} --storage http://localhost/x", "'storage'"),
    (f"{DASHBOARD} --storage sqlite:///{{missing}}", "'storage'"),
    (f"{DASHBOARD} --storage sqlite:///{{textdb}}", "'storage'"),
    (f"{DASHBOARD} --storage sqlite:///{{truncdb}}", "'storage'"),
    (f"{DASHBOARD} --storage sqlite:///{{dir}}", "'storage'"),
    # kb
    ("kb", "ACTION"),
    ("kb nope", "ACTION"),
    (f"{KB_BUILD} --suite nope", "'suite'"),
    (f"{KB_BUILD} --suite ''", "'suite'"),
    (f"{KB_BUILD} --frameworks ''", "'frameworks'"),
    (f"{KB_BUILD} --frameworks nope", "'frameworks'"),
    (f"{KB_BUILD} --configs-per-pair 0", "'configs_per_pair'"),
    (f"{KB_BUILD} --configs-per-pair x", "--configs-per-pair"),
    (f"{KB_BUILD} --json --configs-per-pair -5", "'configs_per_pair'"),
    (f"{KB_BUILD} --fresh x", "--fresh"),
    (f"{KB_BUILD} --repeats -1", "'repeats'"),
    (f"{KB_BUILD} --fresh -1", "'fresh'"),
    (f"{KB_BUILD} --time-budget 0", "'time_budget'"),
    (f"{KB_BUILD} --time-budget nan", "'time_budget'"),
    (f"{KB_BUILD} --quiet-wait -1", "'quiet_wait"),
    (f"{KB_BUILD} --quiet-wait nan", "'quiet_wait"),
    (f"{KB_BUILD} --quiet-wait x", "--quiet-wait"),
    (f"{KB_BUILD} --out {{file}}", "'out'"),
    (f"{KB_BUILD_RUN} --out {{file}}", "'out'"),
    (f"{KB_BUILD_RUN} --quiet-wait -1", "'quiet_wait"),
    (f"{KB_BUILD_RUN} --time-budget -1", "'time_budget'"),
    (f"{KB_CALIBRATE} --frameworks ''", "'frameworks'"),
    (f"{KB_CALIBRATE} --frameworks nope", "'frameworks'"),
    (f"{KB_CALIBRATE} --json --frameworks numpy,nope", "'frameworks'"),
    (f"{KB_CALIBRATE} --quiet-wait -5", "'quiet_wait"),
    (f"{KB_CALIBRATE} --time-budget -1", "'time_budget'"),
    (f"{KB_CALIBRATE} --time-budget nan", "'time_budget'"),
    (f"{KB_CALIBRATE} --out {{file}}", "'out'"),
    (f"{KB_CALIBRATE_RUN} --out {{file}}", "'out'"),
    (f"{KB_CALIBRATE_RUN} --quiet-wait -5", "'quiet_wait"),
    (f"{KB_VALIDATE} --records {{missing}}", "'records'"),
    (f"{KB_VALIDATE} --records {{dir}}", "'records'"),
    (f"{KB_VALIDATE} --records {{ints}}", "'records'"),
    (f"{KB_VALIDATE} --records {{badjson}}", "'records'"),
    (f"{KB_VALIDATE} --records {{empty}}", "'records'"),
    (f"{KB_VALIDATE} --records {{badjsonl}}", "'records'"),
    ("kb validate --records {records} --calibrations {missing}", "'calibrations'"),
    ("kb validate --records {records} --calibrations {dir}", "'calibrations'"),
    ("kb validate --records {records} --calibrations {ints}", "'calibrations'"),
    ("kb validate --records {records} --calibrations {records} --no-calibrations", "calibrations"),
    (f"{KB_VALIDATE} --objective nope", "--objective"),
    (f"{KB_VALIDATE} --own-runs -1", "'own_runs'"),
    (f"{KB_VALIDATE} --own-runs x", "--own-runs"),
    (f"{KB_VALIDATE} --seed -1", "'seed'"),
    (f"{KB_EXPORT} --from {{missing}}", "'source'"),
    (f"{KB_EXPORT} --from {{file}}", "'source'"),
    (f"{KB_EXPORT} --from {{dir}}", "'source'"),
    (f"{KB_EXPORT} --calibration --from {{dir}}", "'--from'"),
    (f"{KB_EXPORT} --calibration --from {{missing}}", "'--from'"),
    (f"{KB_EXPORT} --surrogates-only", "'--surrogates-only'"),
    # recommend
    (f"{RECOMMEND} --objective nope", "'objective'"),
    (f"{RECOMMEND} --max-train-time-s -1", "'max_train_time"),
    (f"{RECOMMEND} --max-train-time-s nan", "'max_train_time"),
    (f"{RECOMMEND} --max-memory-mb -1", "'max_memory_mb'"),
    (f"{RECOMMEND} --max-memory-mb nan", "'max_memory_mb'"),
    (f"{RECOMMEND} --min-accuracy 1.5", "'min_accuracy'"),
    (f"{RECOMMEND} --min-accuracy nan", "'min_accuracy'"),
    (f"{RECOMMEND} --frameworks ''", "'frameworks'"),
    (f"{RECOMMEND} --frameworks nope", "'frameworks'"),
    (f"{RECOMMEND} --top-k 0", "'top_k'"),
    (f"{RECOMMEND} --top-k -1", "'top_k'"),
    (f"{RECOMMEND} --top-k x", "--top-k"),
    (f"{RECOMMEND} --workload nope", "'workload'"),
    (f"{RECOMMEND} --model nope", "'model'"),
    (f"{RECOMMEND} --data n_train=0", "'n_train'"),
    (f"{RECOMMEND} --data x", "'data'"),
    (f"{RECOMMEND} --storage foo", "'storage'"),
    (f"{RECOMMEND} --storage sqlite:///{{missing}}", "'storage'"),
    (f"{RECOMMEND} --storage sqlite:///{{ints}}", "'storage'"),
    (f"{RECOMMEND} --storage sqlite:///{{textdb}}", "'storage'"),
    (f"{RECOMMEND} --storage sqlite:///{{truncdb}}", "'storage'"),
    (f"{RECOMMEND} --storage sqlite:///{{dir}}", "'storage'"),
    (f"{RECOMMEND} --records {{missing}}", "'records'"),
    (f"{RECOMMEND} --records {{dir}}", "'records'"),
    (f"{RECOMMEND} --records {{ints}}", "'records'"),
    (f"{RECOMMEND} --records {{badjson}}", "'records'"),
    (f"{RECOMMEND} --records {{empty}}", "'records'"),
    (f"{RECOMMEND} --records {{badjsonl}}", "'records'"),
    (f"{RECOMMEND} --records {{badcsv}}", "'records'"),
    (f"{RECOMMEND} --kb {{missing}}", "'knowledge_base'"),
    (f"{RECOMMEND} --kb {{dir}}", "'knowledge_base'"),
    (f"{RECOMMEND} --kb {{ints}}", "'knowledge_base'"),
    (f"{RECOMMEND} --hardware {{missing}}", "'hardware'"),
    (f"{RECOMMEND} --hardware {{dir}}", "'hardware'"),
    (f"{RECOMMEND} --hardware {{badjson}}", "'hardware'"),
    (f"{RECOMMEND} --hardware {{ints}}", "'hardware'"),
    (f"{RECOMMEND} --hardware {{hw_huge_cores}}", "'hardware.logical_cores'"),
    (f"{RECOMMEND} --hardware {{hw_nan_memory}}", "'hardware.memory_gb'"),
    (f"{RECOMMEND} --hardware {{hw_zero_cores}}", "'hardware.logical_cores'"),
    (f"{RECOMMEND} --hardware {{hw_more_usable}}", "'hardware.usable_cores'"),
    (f"{RECOMMEND} --hardware '{{\"logical_cores\": 0}}'", "'hardware.logical_cores'"),
    (f"{RECOMMEND} --verify --hardware {{hw}}", "'verify'"),
    # study
    (f"{STUDY} --time-budget 0", "'time_budget'"),
    (f"{STUDY} --time-budget -1", "'time_budget'"),
    (f"{STUDY} --time-budget nan", "'time_budget'"),
    (f"{STUDY} --time-budget inf", "'time_budget'"),
    (f"{STUDY} --max-epochs 0", "'max_epochs'"),
    (f"{STUDY} --trials -1", "'trials'"),
    (f"{STUDY} --frameworks ''", "'frameworks'"),
    (f"{STUDY} --frameworks nope", "'frameworks'"),
    (f"{STUDY} --storage foo", "'storage'"),
    (f"{STUDY} --storage sqlite:///{{textdb}}", "'storage'"),
    (f"{STUDY} --storage sqlite:///{{truncdb}}", "'storage'"),
    (f"{STUDY} --out {{file}}", "'out'"),
    (f"{STUDY} --workload nope", "'workload'"),
    (f"{STUDY} --model nope", "'model'"),
    (f"{STUDY} --data n_train=abc", "'n_train'"),
    # report
    ("report --records {ints}", "'records'"),
    ("report --records {badjson}", "'records'"),
    ("report --records {empty}", "No records in"),
    ("report --records {missing}", "'records'"),
    ("report --records {dir}", "'records'"),
    ("report --records {textdb}", "'records'"),
    ("report --records {badjsonl}", "'records'"),
    ("report --records {badcsv}", "'records'"),
    ("report --storage foo", "'storage'"),
    ("report --storage none", "'storage'"),
    ("dashboard --storage none", "'storage'"),
    ("report --storage sqlite:///{missing}", "'storage'"),
    ("report --storage sqlite:///{textdb}", "'storage'"),
    ("report --storage sqlite:///{truncdb}", "'storage'"),
    ("report --storage sqlite:///{dir}", "'storage'"),
    ("report --records {records} --storage sqlite:///{db}", "--storage"),
    (f"{REPORT} --format pdf", "--format"),
    (f"{REPORT} --out {{dir}}", "'out'"),
    (f"{REPORT} --out {{file}}/r.html", "'out'"),
    (f"{REPORT} --workload nope", "workload 'nope'"),
]


class _Interrupted(BaseException):
    """Raised by the watchdog; a BaseException so that no ``except Exception`` swallows it."""


def _hardware_json() -> dict:
    return {"cpu_model": "Test CPU", "logical_cores": 4, "physical_cores": 4, "usable_cores": 4,
            "memory_gb": 16.0, "machine": "x86_64", "os": "Linux"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Any]:
    """Made once and copied into every case's folder: records of a real (tiny) run, and an
    Optuna database holding a study that has all the trials it asks for (a worker wrongly
    let in finds nothing to do)."""
    from dltune import Workload, benchmark, tune
    from dltune.config import TrainConfig
    from dltune.measure import save_records
    from dltune.tuning import SearchSpace

    folder = tmp_path_factory.mktemp("fuzz-sources")
    workload = Workload.from_name("digits", "mlp", n_train=50, n_test=50)
    records = benchmark(workload, [TrainConfig(framework="numpy", epochs=1)], progress=False,
                        storage=None)
    save_records(records, folder / "records.json")
    result = tune(workload, frameworks=["numpy"], space=SearchSpace().fix(epochs=1), trials=1,
                  storage=f"sqlite:///{folder / 'optuna.db'}", compare_preset=False, progress=False,
                  thread_configs=0)
    return {"records": folder / "records.json", "db": folder / "optuna.db",
            "study": result.studies["numpy"].study_name}


@pytest.fixture
def busy_port():
    """A loopback port something already listens on."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        yield listening.getsockname()[1]


def _write_inputs(work: Path, sources: dict[str, Any]) -> dict[str, str]:
    """The files the cases name, written in ``work``; returns the placeholders' values."""
    shutil.copy(sources["records"], work / "records.json")
    shutil.copy(sources["db"], work / "optuna.db")
    whole = sources["db"].read_bytes()
    (work / "truncated.db").write_bytes(whole[: len(whole) // 2])
    (work / "text.db").write_text("not a database\n")
    (work / "ints.json").write_text("[1, 2, 3]\n")
    (work / "bad.json").write_text('{"oops": \n')
    (work / "empty.json").write_text("")
    (work / "bad.jsonl").write_text('{"id": "x"}\nnot json\n')
    (work / "bad.csv").write_text("a,b\n1,2\n")
    (work / "a-file").write_text("")
    (work / "a-dir").mkdir()
    (work / "a-dir" / "x.txt").write_text("")
    hardware = {
        "hw": _hardware_json(),
        "hw_huge_cores": {**_hardware_json(), "logical_cores": 10**6, "physical_cores": 10**6,
                          "usable_cores": 10**6},
        "hw_nan_memory": {**_hardware_json(), "memory_gb": math.nan},
        "hw_zero_cores": {**_hardware_json(), "logical_cores": 0},
        "hw_more_usable": {**_hardware_json(), "usable_cores": 8},
    }
    for name, data in hardware.items():
        (work / f"{name}.json").write_text(json.dumps(data))  # NaN as JSON's extension: NaN
    values = {"work": work, "records": work / "records.json", "db": work / "optuna.db",
              "truncdb": work / "truncated.db", "textdb": work / "text.db", "ints": work / "ints.json",
              "badjson": work / "bad.json", "empty": work / "empty.json", "file": work / "a-file",
              "dir": work / "a-dir", "missing": work / "missing.json", "badjsonl": work / "bad.jsonl",
              "badcsv": work / "bad.csv", "study": sources["study"],
              **{name: work / f"{name}.json" for name in hardware}}
    return {key: str(value) for key, value in values.items()}


def _argv(line: str, values: dict[str, str]) -> list[str]:
    words = shlex.split(line)
    for key, value in values.items():
        words = [w.replace("{" + key + "}", value) for w in words]
    return words


def _listing(folder: Path) -> dict[str, tuple[bool, int, int]]:
    """Every path under ``folder`` with whether it is a folder, its size and modification time."""
    out = {}
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        out[str(path.relative_to(folder))] = (path.is_dir(), stat.st_size, stat.st_mtime_ns)
    return out


def _run(argv: list[str]) -> int:
    """``main(argv)``'s exit status, interrupted after ``WATCHDOG_S``; an exception that
    escapes it (a traceback for the user) fails the case."""

    def interrupt(signum, frame):
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(WATCHDOG_S)
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:
        pytest.fail(f"a traceback: {type(exc).__name__}: {exc}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_table_covers_every_command_and_150_inputs():
    from dltune.cli import COMMANDS

    commands = {shlex.split(line)[0] for line, _ in CASES if line} - {"nope", "--bogus"}
    assert commands == set(COMMANDS)
    actions = {" ".join(shlex.split(line)[:2]) for line, _ in CASES
               if line.split(" ")[0] in ("kb", "env") and len(shlex.split(line)) > 1}
    for action in ("env status", "env install", "kb build", "kb calibrate", "kb validate", "kb export"):
        assert action in actions
    assert len(CASES) >= 150 and len(set(CASES)) == len(CASES)


_PREFIXES = {"BENCH": BENCH, "TUNE": TUNE, "WORKER": WORKER, "DASHBOARD": DASHBOARD,
             "KB_BUILD": KB_BUILD, "KB_BUILD_RUN": KB_BUILD_RUN, "KB_CALIBRATE": KB_CALIBRATE,
             "KB_CALIBRATE_RUN": KB_CALIBRATE_RUN, "KB_VALIDATE": KB_VALIDATE, "KB_EXPORT": KB_EXPORT,
             "RECOMMEND": RECOMMEND, "STUDY": STUDY, "REPORT": REPORT}


def _case_id(line: str) -> str:
    """The case's command line with its guard options named, e.g. ``BENCH --epochs x``."""
    for name, prefix in _PREFIXES.items():
        if line == prefix or line.startswith(prefix + " "):
            return name + line[len(prefix):]
    return line or "(nothing)"


def _params() -> list[Any]:
    return [pytest.param(line, names, id=_case_id(line)) for line, names in CASES]


@pytest.mark.parametrize(("line", "names"), _params())
def test_bad_input_is_one_line_exit_2_and_writes_nothing(line, names, sources, busy_port, tmp_path,
                                                         monkeypatch, capfd):
    work = tmp_path / "work"
    work.mkdir()
    values = {**_write_inputs(work, sources), "busy_port": str(busy_port)}
    monkeypatch.chdir(work)
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DLTUNE_STORAGE", raising=False)
    # As on a busy machine: a warning about the load must not come before a refusal.
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    before = _listing(work)
    capfd.readouterr()
    try:
        status = _run(_argv(line, values))
    except _Interrupted:
        pytest.fail(f"still running after {WATCHDOG_S} s: the input was accepted")
    out, err = capfd.readouterr()
    lines = err.splitlines()
    assert "Traceback" not in err, err[-3000:]
    assert status == 2, f"exit status {status}; stderr: {err[-2000:]}"
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith("dltune") and ": error: " in lines[0], lines[0]
    assert names in lines[0], lines[0]
    assert out == "", out[-2000:]
    after = _listing(work)
    assert after == before, {"new": sorted(set(after) - set(before)),
                             "changed": sorted(k for k in before if after.get(k) != before[k])}
    if (tmp_path / "cache").exists():
        assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*")), \
            sorted(str(p) for p in (tmp_path / "cache").rglob("*"))


def test_a_truncated_database_is_one_that_sqlite_cannot_read(sources, tmp_path):
    """The ``truncdb`` input is what its cases say: a SQLite file that no longer reads."""
    values = _write_inputs(tmp_path, sources)
    with pytest.raises(sqlite3.DatabaseError), sqlite3.connect(values["truncdb"]) as connection:
        connection.execute("SELECT * FROM studies").fetchall()


def test_argparse_errors_are_one_line_naming_the_command_and_its_help(capsys):
    for argv, line in [
        (["bench", "--epochs", "x"],
         "dltune bench: error: argument --epochs: invalid int value: 'x' (see 'dltune bench --help')"),
        (["kb", "build", "--zzz"],
         "dltune kb build: error: unrecognized arguments: --zzz (see 'dltune kb build --help')"),
        (["env"], "dltune env: error: the following arguments are required: ACTION "
                  "(see 'dltune env --help')"),
    ]:
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", line + "\n")
    with pytest.raises(SystemExit) as exited:  # help itself keeps its usage block
        main(["kb", "build", "--help"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("usage: dltune kb build")


def test_main_leaves_the_warnings_display_as_it_found_it():
    import warnings

    shown = warnings.showwarning
    assert main(["kb", "build", "--plan", "--suite", "tiny", "--frameworks", "numpy", "--json"]) == 0
    assert warnings.showwarning is shown
