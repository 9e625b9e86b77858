"""``dltune bench`` as a user runs it, and the rule that the parent never imports a framework."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dltune.config import usable_cores

FRAMEWORK_MODULES = ("torch", "tensorflow", "keras", "mxnet", "theano", "pytensor", "jax")


def test_import_dltune_imports_no_framework():
    code = f"import sys, dltune; print([m for m in {FRAMEWORK_MODULES!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_bench_digits_lenet_torch_and_tensorflow(tmp_path):
    """The issue's acceptance run, in a process that then checks its own sys.modules."""
    out = tmp_path / "records.json"
    code = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from dltune.cli import main
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            status = main(["bench", "--workload", "digits", "--model", "lenet",
                           "--frameworks", "torch,tensorflow", "--epochs", "5", "--json",
                           "--storage", "none"])
        loaded = [m for m in {FRAMEWORK_MODULES!r} if m in sys.modules]
        open({str(out)!r}, "w").write(json.dumps({{"status": status, "stdout": buffer.getvalue(),
                                                   "loaded": loaded}}))
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=900)
    result = json.loads(out.read_text())
    assert result["loaded"] == [], "the parent process imported a framework"
    assert result["status"] == 0
    records = json.loads(result["stdout"])  # --json prints the records and nothing else
    assert [r["config"]["framework"] for r in records] == ["torch", "tensorflow"]
    accuracies = []
    for record in records:
        assert record["status"] == "ok", record["error"]
        m = record["metrics"]
        assert m["test_accuracy"] >= 0.90
        for key in ("train_time_s", "test_time_s", "cpu_percent_mean", "peak_rss_mb"):
            assert m[key] > 0, key
        accuracies.append(m["test_accuracy"])
    assert abs(accuracies[0] - accuracies[1]) <= 0.03
    assert records[0]["metrics"]["param_count"] == records[1]["metrics"]["param_count"]


@pytest.mark.slow
def test_bench_table_csv_and_threads(cli, tmp_path):
    out = tmp_path / "not" / "yet" / "r.csv"  # its folders are made
    done = cli("bench", "--workload", "digits", "--data", "n_train=300", "--model", "mlp",
               "--frameworks", "torch", "--epochs", "1", "--threads", "1", "--out", str(out),
               "--storage", "none")
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[1]
    for column in ("framework", "train s", "test s", "accuracy %", "CPU %", "peak MB"):
        assert column in header
    assert "1/1" in done.stdout  # intra/inter-op threads really used
    from dltune.measure import load_records

    (record,) = load_records(out)
    assert record.metrics["threads"]["intra_op"] == 1


def test_bench_failure_record_then_success(cli):
    done = cli("bench", "--workload", "digits", "--data", "n_train=200", "--model", "mlp",
               "--frameworks", "torch", "--epochs", "1", "--fault", "raise", "--repeats", "2", "--json",
               "--storage", "none", env={"DLTUNE_ENABLE_FAULTS": "1"})
    (record,) = json.loads(done.stdout)
    # The first repeat failed with its reason, the second succeeded in a fresh worker.
    assert record["status"] == "ok"
    assert record["metrics"]["repeats_failed"] == 1


def test_an_out_file_that_cannot_be_written_is_refused_before_any_run(cli, tmp_path):
    done = cli("bench", "--frameworks", "torch", "--out", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"dltune bench: error: The 'out' parameter must be a file path. Got the folder {str(tmp_path)!r} instead."]
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = cli("bench", "--frameworks", "torch", "--out", str(blocked / "r.csv"))
    assert done.returncode == 2 and done.stdout == ""
    assert "The 'out' parameter must be a file path whose folder can be made." in done.stderr


@pytest.mark.parametrize("out, why", [("/proc/x.csv", "No such file or directory"),
                                      ("/dev/full", "not a regular file")])
def test_an_out_file_no_byte_can_be_written_to_is_refused_before_any_run(cli, tmp_path, out, why):
    """``os.access`` says yes to root on /proc, and /dev/full fails only once written to."""
    db = tmp_path / "not.db"
    done = cli("bench", "--frameworks", "numpy", "--model", "mlp", "--epochs", "1", "--out", out,
               env={"DLTUNE_STORAGE": f"sqlite:///{db}"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"dltune bench: error: The 'out' parameter must be a writable file path. Got {out!r} instead ({why})."]
    assert not db.exists()


def test_records_an_out_file_fails_to_take_after_the_runs_go_to_a_new_file(tmp_path, monkeypatch, capsys):
    """The check before the runs cannot foresee a disk that fills up during them."""
    import errno
    import tempfile

    import dltune.measure
    from dltune.cli import main
    from dltune.measure import load_records

    real_save = dltune.measure.save_records
    refused: set[Path] = set()

    def save_records(records, path):
        if Path(path).parent in refused:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(records, path)

    monkeypatch.setattr(dltune.measure, "save_records", save_records)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "r.csv"
    refused.add(out.parent)
    args = ["bench", "--workload", "digits", "--data", "n_train=200", "--data", "n_test=100", "--model", "mlp",
            "--frameworks", "numpy", "--epochs", "1", "--storage", "none", "--out", str(out)]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert "numpy" in captured.out and "records saved" not in captured.out  # the table still shows them
    (line,) = [line for line in captured.err.splitlines() if line.startswith("dltune")]
    (fallback,) = tmp_path.glob("dltune-bench-*.csv")
    assert line == (f"dltune bench: error: Could not write the records to {str(out)!r} (No space left on "
                    f"device); saved them to {str(fallback)!r} instead.")
    assert [r.config["framework"] for r in load_records(fallback)] == ["numpy"]
    # Where the working folder cannot take them either, the temp folder does.
    fallback.unlink()
    refused.add(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert main([*args, "--json"]) == 2
    captured = capsys.readouterr()
    assert [r["status"] for r in json.loads(captured.out)] == ["ok"]
    (fallback,) = (tmp_path / "tmp").glob("dltune-bench-*.csv")
    assert captured.err.splitlines()[-1].endswith(f"; saved them to {str(fallback)!r} instead.")


def test_a_gpu_run_of_a_backend_without_one_is_refused_before_any_run(cli, tmp_path):
    from dltune import Workload, benchmark
    from dltune._errors import ParameterError
    from dltune.config import TrainConfig

    message = ("The 'device' parameter must be 'cpu' for framework 'numpy' (only torch, tensorflow, jax run on "
               "'cuda'). Got 'cuda' instead.")
    db = tmp_path / "not.db"
    done = cli("bench", "--frameworks", "numpy", "--model", "mlp", "--epochs", "1", "--device", "cuda",
               env={"DLTUNE_STORAGE": f"sqlite:///{db}"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"dltune bench: error: {message}"]
    assert not db.exists()
    workload = Workload.from_name("digits", "mlp", n_train=200, n_test=100)
    with pytest.raises(ParameterError) as info:
        benchmark(workload, [TrainConfig(framework="numpy", device="cuda", epochs=1)],
                  progress=lambda record: pytest.fail("a run was measured"))
    assert str(info.value) == message


@pytest.mark.parametrize(
    "args, message",
    [
        (["--frameworks", "caffe"], "The 'frameworks' parameter must be a comma-separated subset of"),
        (["--workload", "imagenet"], "The 'workload' parameter must be one of"),
        (["--preset", "keras"], "The 'preset' parameter must be one of"),
        (["--batch-size", "0"], "The 'batch_size' parameter must be an int in [1, 65536]. Got 0 instead."),
        (["--lr", "-0.1"], "The 'learning_rate' parameter must be a float in (0.0, 10.0]. Got -0.1 instead."),
        (["--threads", str(usable_cores() + 1)], "The 'threads' parameter must be an int in [1, "),
        (["--optimizer", "rmsprop"], "The 'optimizer' parameter must be one of"),
        (["--model", "resnet"], "The 'model' parameter must be one of"),
        (["--data", "n_train"], "must look like KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, args, message):
    done = cli("bench", "--frameworks", "torch", *args) if "--frameworks" not in args else cli("bench", *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert message in lines[0]


def test_gpu_memory_column_only_when_a_run_has_it():
    from dltune.cli._bench import table_columns
    from dltune.cli._common import format_table

    cpu = {"framework": "torch", "status": "ok", "train_s": 0.5, "test_s": 0.01, "accuracy_pct": 97.5,
           "cpu_pct": 100.0, "peak_mb": 651.0, "gpu_mb": None, "threads": "16/1"}
    gpu = dict(cpu, train_s=0.25, peak_mb=1208.0, gpu_mb=108.4)
    assert "GPU MB" not in format_table([cpu], table_columns([cpu]))
    header, _, cpu_line, gpu_line = format_table([cpu, gpu], table_columns([cpu, gpu])).splitlines()
    assert header.split()[header.split().index("GPU") - 2:][:4] == ["peak", "MB", "GPU", "MB"]
    assert cpu_line.split()[7] == "-" and gpu_line.split()[7] == "108"


def test_benchmark_takes_configs_as_objects_or_dicts_and_refuses_anything_else():
    from dltune import Workload, benchmark
    from dltune._errors import ParameterError
    from dltune.config import TrainConfig

    workload = Workload.from_name("digits", "mlp", n_train=200, n_test=100)
    for bad, says in ((None, "Got NoneType instead"), ("numpy", "Got str instead"),
                      ([TrainConfig(framework="numpy"), 3], "must hold TrainConfig objects or dicts of their fields. Got int")):
        with pytest.raises(ParameterError, match=f"The 'configs' parameter .*{says}"):
            benchmark(workload, bad)
    with pytest.raises(ParameterError, match=r"Unknown TrainConfig field\(s\) \['lr'\]"):
        benchmark(workload, {"framework": "numpy", "lr": 0.1})
    as_dict = TrainConfig(framework="numpy", epochs=1, batch_size=32).to_dict()  # as --json prints it
    (record,) = benchmark(workload, as_dict, storage=None)
    assert record.ok and record.config["batch_size"] == 32


def test_bench_stores_its_records_where_recommend_reads_them_and_not_in_a_study_report(cli, tmp_path):
    from dltune.study import load_storage_records as study_records
    from dltune.surrogate import load_storage_measurements as user_records

    db = tmp_path / "mine.db"
    args = ("bench", "--workload", "digits", "--model", "mlp", "--data", "n_train=200", "--data", "n_test=100",
            "--frameworks", "numpy", "--epochs", "1")
    done = cli(*args, env={"DLTUNE_STORAGE": f"sqlite:///{db}"})  # the default storage
    assert done.returncode == 0, done.stderr[-2000:]
    assert (f"storage: sqlite:///{db} (study dltune-bench:digits-mlp, where dltune recommend fits "
            "on them)") in done.stdout.splitlines()
    (record,) = user_records(f"sqlite:///{db}")  # what recommend fits on
    assert record["config"]["framework"] == "numpy" and record["status"] == "ok"
    assert study_records(f"sqlite:///{db}") == []  # no part of a study: report leaves it out
    done = cli(*args, "--storage", "none", env={"DLTUNE_STORAGE": f"sqlite:///{tmp_path / 'not.db'}"})
    assert done.returncode == 0 and "storage: none (nothing stored)" in done.stdout.splitlines()
    assert not (tmp_path / "not.db").exists()


def test_seeds_give_distinct_accuracies_with_their_mean_spread_and_interval(tmp_path, capsys):
    from dltune.cli import main
    from dltune.measure import load_records

    out = tmp_path / "r.json"
    args = ["bench", "--workload", "digits", "--data", "n_train=200", "--data", "n_test=100", "--model", "mlp",
            "--frameworks", "numpy", "--epochs", "1", "--seed", "5", "--seeds", "3", "--storage", "none",
            "--out", str(out)]
    assert main(args) == 0
    (record,) = load_records(out)
    seeds = record.metrics["seeds"]
    assert seeds["seeds"] == [5, 6, 7] and record.config["seed"] == 5
    accuracies = [r["test_accuracy"] for r in record.metrics["repeats"][:3]]
    assert len(set(accuracies)) == 3
    acc = seeds["test_accuracy"]
    assert acc["n"] == 3 and acc["mean"] == pytest.approx(sum(accuracies) / 3)
    assert acc["interval"][1] < min(accuracies) <= max(accuracies) < acc["interval"][2]
    assert "numpy, 3 seeds: accuracy " in capsys.readouterr().out


def test_a_cell_with_noisy_timing_is_measured_once_more_and_flagged(monkeypatch):
    import dltune._bench as bench
    from dltune import TrainConfig
    from dltune.measure import Measurement

    times = iter([1.0, 1.5, 1.0, 1.6, 1.0, 1.5, 1.0, 1.01, 1.0, 1.01])
    seen = []

    def fake_measure(workload, config, pool=None, fault=None):
        seen.append(config.seed)
        return Measurement(status="ok", workload={}, hardware={}, config=config.to_dict(),
                           metrics={"train_time_s": next(times), "test_accuracy": 0.5})

    monkeypatch.setattr(bench, "measure", fake_measure)
    config = TrainConfig(framework="numpy", seed=3)
    noisy = bench.measure_cell(None, config, repeats=2)
    assert seen == [3, 3, 3, 3]  # measured twice over: 1.0 and 1.5 are 28 % apart
    assert noisy.metrics["timing_rerun"] and noisy.metrics["timing_noisy"]
    assert noisy.metrics["timing_cv"] == pytest.approx(0.5 / 1.25 / 2**0.5)  # the steadier pair
    assert [r["train_time_s"] for r in noisy.metrics["repeats"]] == [1.0, 1.5]
    steadied = bench.measure_cell(None, config, repeats=2)
    assert [r["train_time_s"] for r in steadied.metrics["repeats"]] == [1.0, 1.01]
    assert steadied.metrics["timing_rerun"] and not steadied.metrics["timing_noisy"]
    steady = bench.measure_cell(None, config, repeats=2)
    assert len(seen) == 10 and not steady.metrics["timing_rerun"] and not steady.metrics["timing_noisy"]


def test_mean_interval_is_students_t():
    from dltune._bench import mean_interval

    summary = mean_interval([1.0, 2.0, 3.0])
    assert summary["mean"] == 2.0 and summary["sd"] == 1.0
    assert summary["interval"] == pytest.approx([2.0, 2.0 - 4.303 / 3**0.5, 2.0 + 4.303 / 3**0.5])
    assert mean_interval([1.0] * 40)["interval"] == [1.0, 1.0, 1.0]
