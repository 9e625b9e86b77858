"""The legacy runtime: refusing what cannot work, making and repairing a virtual environment.

The make-and-repair test installs a tiny stand-in pin set (psutil alone) into a fresh venv, so
that it exercises every branch of ``LegacyRuntime.install`` in seconds; the real runtime is
checked in ``test_legacy_runtime.py``.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

import dltune.envs._legacy as legacy
from dltune._errors import BackendUnavailableError, DltuneError, ParameterError
from dltune.envs import LegacyRuntime, install_command, runtime_interpreter


def _fake_python(tmp_path, version: str):
    """An executable that answers the version probe like a Python ``version`` would."""
    path = tmp_path / f"python{version}"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_default_path_is_under_the_dltune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path))
    monkeypatch.delenv("DLTUNE_LEGACY_ENV", raising=False)
    assert LegacyRuntime().path == tmp_path / "legacy"
    monkeypatch.setenv("DLTUNE_LEGACY_ENV", str(tmp_path / "elsewhere"))
    assert LegacyRuntime().path == tmp_path / "elsewhere"


def test_an_isolated_cache_without_a_runtime_uses_the_users(tmp_path, monkeypatch):
    """`make demo` installs into the user cache; a DLTUNE_CACHE of the tests' or a benchmark's
    must still find that runtime, and one with its own runtime keeps it."""
    monkeypatch.delenv("DLTUNE_LEGACY_ENV", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "isolated"))
    assert LegacyRuntime().path == tmp_path / "isolated" / "legacy"  # neither has one: install here
    users = tmp_path / "user" / "dltune" / "legacy"
    users.mkdir(parents=True)
    (users / "dltune-legacy.json").write_text("{}")
    assert LegacyRuntime().path == users
    own = tmp_path / "isolated" / "legacy"
    own.mkdir(parents=True)
    (own / "dltune-legacy.json").write_text("{}")
    assert LegacyRuntime().path == own
    monkeypatch.delenv("DLTUNE_CACHE")
    assert LegacyRuntime().path == users


@pytest.mark.parametrize("version", ["3.12.1", "3.13.0", "3.8.18"])
def test_install_refuses_unsupported_python(tmp_path, version):
    with pytest.raises(DltuneError) as info:
        LegacyRuntime.install(tmp_path / "env", python=_fake_python(tmp_path, version))
    message = str(info.value)
    assert f"is Python {version}" in message
    assert "Python 3.9 to 3.11" in message
    assert "dltune env install legacy --python" in message
    assert not (tmp_path / "env").exists()


def test_install_refuses_an_interpreter_that_does_not_run(tmp_path):
    with pytest.raises(DltuneError, match="could not be run"):
        LegacyRuntime.install(tmp_path / "env", python=str(tmp_path / "no-such-python"))


@pytest.mark.parametrize(("python", "says"), [
    ("/bin/false", "'/bin/false' exited with status 1 when asked its version and printed nothing."),
    ("/bin/true", "'/bin/true' answered '' when asked its version."),
    ("3.12.1", "The legacy runtime needs Python 3.9 to 3.11"),
])
def test_a_wrong_interpreter_is_refused_in_one_line_saying_why_and_leaves_nothing(tmp_path, cli, python, says):
    """/bin/false gave an empty reason ("failed: ") and left the install's lock file behind."""
    folder = tmp_path / "envs"
    folder.mkdir()
    if python == "3.12.1":
        python = _fake_python(tmp_path, python)
    done = cli("env", "install", "legacy", "--path", str(folder / "env"), "--python", python,
               env={"DLTUNE_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("dltune env install: error: ") and says in line, line
    assert list(folder.iterdir()) == []  # no lock file, no environment
    assert not (tmp_path / "cache").exists()


def test_install_refuses_a_path_that_is_a_file_and_leaves_no_lock_file(tmp_path):
    """It was a NotADirectoryError traceback, after the lock file beside it was made."""
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ParameterError, match="The 'path' parameter must be a folder. Got the file"):
        LegacyRuntime.install(tmp_path / "a-file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_install_refuses_to_clear_a_folder_that_is_not_a_venv(tmp_path):
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(DltuneError, match="is not a virtual environment; refusing"):
        LegacyRuntime.install(folder, python=sys.executable)
    assert (folder / "notes.txt").read_text() == "keep me"


def test_cli_install_with_newer_python_is_a_one_line_error(tmp_path, cli):
    done = cli("env", "install", "legacy", "--path", str(tmp_path / "env"),
               "--python", _fake_python(tmp_path, "3.12.1"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("dltune env install: error: The legacy runtime needs Python 3.9 to 3.11")


def test_cli_install_rejects_unknown_runtime(tmp_path, cli):
    done = cli("env", "install", "modern", "--path", str(tmp_path / "env"))
    assert done.returncode == 2
    assert "The 'name' parameter must be one of {'legacy'}. Got 'modern' instead." in done.stderr


def test_missing_runtime_names_the_fix(tmp_path):
    runtime = LegacyRuntime(tmp_path / "absent")
    assert "not installed" in runtime.check()
    for backend in ("mxnet", "theano"):
        with pytest.raises(BackendUnavailableError) as info:
            runtime_interpreter(backend, runtime)
        assert str(info.value).endswith("run: dltune env install legacy")
    assert runtime_interpreter("torch", runtime) == sys.executable


@pytest.mark.slow
def test_install_makes_is_idempotent_and_repairs(tmp_path, monkeypatch):
    if sys.version_info[:2] > (3, 11):
        pytest.skip("the main interpreter is newer than the legacy runtime allows")
    # A stand-in pin set (one small wheel) keeps this fast; the logic is the real one.
    monkeypatch.setattr(legacy, "LEGACY_PINS", ("psutil>=5.9",))
    lines: list[str] = []
    runtime = LegacyRuntime.install(tmp_path / "env", progress=lines.append)
    assert runtime.actions == ("venv", "pip", "pth", "marker")
    assert runtime.check() is None
    marker = runtime.marker()
    assert marker["pins"] == ["psutil>=5.9"]
    assert marker["python"] == ".".join(str(v) for v in sys.version_info[:3])
    assert any("creating virtual environment" in line for line in lines)

    # dltune's worker code imports there, without dltune's main dependencies installed.
    code = (
        "import sys, dltune.runtime._worker, dltune.backends._base, dltune.models._spec;"
        "import importlib.util as u;"
        "print(u.find_spec('sklearn') is None, dltune.__file__)"
    )
    done = subprocess.run(
        [runtime.python, "-c", code], capture_output=True, text=True, check=False,
        env=legacy.clean_environment(), stdin=subprocess.DEVNULL, timeout=120,
    )
    # numpy is not among the stand-in pins, so the worker cannot import; the path is still right.
    assert "No module named 'numpy'" in done.stderr
    done = subprocess.run(
        [runtime.python, "-c", "import dltune, dltune.envs; print(dltune.__file__)"],
        capture_output=True, text=True, check=True, env=legacy.clean_environment(), timeout=60,
    )
    assert done.stdout.strip() == str(legacy._DLTUNE_PARENT / "dltune" / "__init__.py")

    # Second run: nothing to do; the command says how to make dltune use this folder.
    assert LegacyRuntime.install(tmp_path / "env").actions == ()
    summary = install_command("legacy", tmp_path / "env")
    assert summary.startswith(f"legacy runtime already up to date at {runtime.path}")
    assert f"export DLTUNE_LEGACY_ENV={runtime.path}" in summary

    # A deleted package folder (pip would call it "already satisfied") is reinstalled.
    purelib = next((runtime.path / "lib").glob("python3*/site-packages"))
    shutil.rmtree(purelib / "psutil")
    repaired = LegacyRuntime.install(tmp_path / "env")
    assert "pip" in repaired.actions
    assert (purelib / "psutil" / "__init__.py").exists()

    # A half-made environment (interrupted before the marker was written) is completed.
    runtime.marker_path.unlink()
    (purelib / legacy.PTH_NAME).unlink()
    assert runtime.check() is not None
    assert LegacyRuntime.install(tmp_path / "env").actions == ("pip", "pth", "marker")
    assert runtime.check() is None

    # A missing interpreter recreates the environment.
    os.unlink(runtime.python)
    assert LegacyRuntime.install(tmp_path / "env").actions[0] == "venv"
    assert runtime.check() is None
