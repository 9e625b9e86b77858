"""Files and folders given on the command line are checked before any work, in one line.

Each of these once ended in a traceback (IsADirectoryError, FileExistsError,
FileNotFoundError), some only after the runs whose records they were to hold.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("")
    return path


@pytest.mark.parametrize(("args", "says"), [
    (["report", "--records", "{tmp}"], "dltune report: error: The 'records' parameter must be a file. Got the folder '{tmp}' instead."),
    (["report", "--records", "{tmp}/none.jsonl"], "dltune report: error: The 'records' file '{tmp}/none.jsonl' does not exist."),
    (["kb", "validate", "--records", "{tmp}"], "dltune kb validate: error: The 'records' parameter must be a file. Got the folder '{tmp}' instead."),
    (["study", "--frameworks", "numpy", "--no-tune", "--out", "{file}"],
     "dltune study: error: The 'out' parameter must be a folder. Got the file '{file}' instead."),
    (["kb", "build", "--suite", "tiny", "--frameworks", "numpy", "--out", "{file}"],
     "dltune kb build: error: The 'out' parameter must be a folder. Got the file '{file}' instead."),
    (["tune", "--workload", "digits", "--frameworks", "numpy", "--trials", "1", "--storage", "sqlite:///{file}/t.db"],
     "dltune tune: error: The 'storage' parameter must be a file path whose folder can be made. "
     "Got '{file}/t.db': '{file}' is a file."),
])
def test_bad_paths_are_refused_in_one_line_before_any_work(cli, tmp_path, a_file, args, says):
    fill = {"tmp": str(tmp_path), "file": str(a_file)}
    done = cli(*[a.format(**fill) for a in args], env={"DLTUNE_CACHE": str(tmp_path / "cache"),
                                                          "DLTUNE_STORAGE": f"sqlite:///{tmp_path}/s.db"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [says.format(**fill)]
    assert not (tmp_path / "s.db").exists()  # nothing was measured or stored


def test_a_report_is_not_written_over_a_folder(cli, tmp_path):
    from dltune import Workload, benchmark
    from dltune.config import TrainConfig
    from dltune.measure import save_records

    runs = benchmark(Workload.from_name("digits", "mlp", n_train=200, n_test=100),
                     [TrainConfig(framework="numpy", epochs=1)], progress=False, storage=None)
    save_records(runs, tmp_path / "runs.json")
    done = cli("report", "--records", str(tmp_path / "runs.json"), "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"dltune report: error: The 'out' parameter must be a file path. Got the folder {str(tmp_path)!r} instead."]
    done = cli("report", "--records", str(tmp_path / "runs.json"), "--out", str(tmp_path / "new" / "r.md"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "new" / "r.md").read_text().startswith("#")


@pytest.mark.parametrize("url", ["foo", "foo://bar"])
def test_study_refuses_a_wrong_storage_before_it_makes_its_out_folder(cli, tmp_path, url):
    """`study --storage foo --out DIR` made DIR, then refused the URL."""
    done = cli("study", "--workload", "digits", "--frameworks", "numpy", "--no-tune", "--storage", url,
               "--out", str(tmp_path / "out"), env={"DLTUNE_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("dltune study: error: The 'storage' ") and "Got 'foo" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "out"), [
    (["report", "--records", "{file}", "--out", "/proc/r.html"], "/proc/r.html"),
    (["report", "--records", "{file}", "--out", "/dev/full"], "/dev/full"),
    (["study", "--workload", "digits", "--model", "mlp", "--frameworks", "numpy", "--no-tune",
      "--max-epochs", "1", "--time-budget", "6", "--out", "/proc"], "/proc"),
    (["kb", "build", "--plan", "--suite", "tiny", "--frameworks", "numpy", "--out", "/proc"], "/proc"),
    (["kb", "calibrate", "--plan", "--frameworks", "numpy", "--out", "/proc/cal"], "/proc/cal"),
])
def test_an_out_path_nothing_can_be_written_to_is_refused_before_any_work(cli, tmp_path, a_file, args, out):
    """As `bench --out`: a probe file is made and removed there (``os.access`` says yes to root
    on /proc), and an existing file must be a regular one (/dev/full fails only once written)."""
    done = cli(*[a.format(file=a_file) for a in args], env={"DLTUNE_CACHE": str(tmp_path / "cache"),
                                                             "DLTUNE_STORAGE": f"sqlite:///{tmp_path}/s.db"})
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "error: The 'out' parameter must be a writable f" in line and f"Got {out!r} instead (" in line, line
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "cache").exists()
