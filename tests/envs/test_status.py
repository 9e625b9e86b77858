"""``dltune env status``: every backend, where it runs, and the fix for a missing one."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from dltune.envs import (
    BACKEND_NAMES,
    LegacyRuntime,
    backend_status,
    install_command,
    status_command,
)

FIELDS = {"name", "available", "interpreter", "version", "location", "fix", "reason"}


def test_every_backend_is_listed_with_its_location(tmp_path):
    statuses = backend_status(runtime=LegacyRuntime(tmp_path / "absent"))
    assert [s.name for s in statuses] == list(BACKEND_NAMES)
    assert set(BACKEND_NAMES) >= {"torch", "tensorflow", "pytensor", "numpy", "mxnet", "theano"}
    where = {s.name: s.location for s in statuses}
    assert where["mxnet"] == where["theano"] == "legacy"
    assert where["torch"] == where["tensorflow"] == where["pytensor"] == where["numpy"] == "main"


def test_available_and_missing_entries_are_consistent(tmp_path):
    for s in backend_status(runtime=LegacyRuntime(tmp_path / "absent")):
        if s.available:
            assert s.fix is None and s.reason is None and s.version
        else:
            assert s.fix and s.reason
    numpy_status = next(s for s in backend_status() if s.name == "numpy")
    assert numpy_status.available and numpy_status.interpreter == sys.executable


def test_missing_legacy_runtime_says_how_to_fix_it(tmp_path):
    runtime = LegacyRuntime(tmp_path / "absent")
    legacy = {s.name: s for s in backend_status(runtime=runtime) if s.location == "legacy"}
    for status in legacy.values():
        assert not status.available
        assert status.fix == "dltune env install legacy"
        assert str(runtime.path) in status.reason
        assert status.interpreter == runtime.python
    table = status_command(False, runtime=runtime)
    assert "To make the missing backends available:" in table
    assert "  mxnet: dltune env install legacy" in table


def test_cli_status_json(tmp_path, cli):
    done = cli("env", "status", "--json", env={"DLTUNE_LEGACY_ENV": str(tmp_path / "absent")})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [d["name"] for d in data] == list(BACKEND_NAMES)
    assert all(set(d) == FIELDS for d in data)
    mxnet = next(d for d in data if d["name"] == "mxnet")
    assert mxnet["available"] is False
    assert mxnet["fix"] == "dltune env install legacy"


def test_status_does_not_import_frameworks():
    import dltune.envs  # noqa: F401

    backend_status()
    loaded = [m for m in ("torch", "tensorflow", "mxnet", "theano", "pytensor") if m in sys.modules]
    assert loaded == []


@pytest.fixture
def marker_only_runtime(tmp_path):
    """A runtime whose files say "installed" but whose interpreter cannot import anything."""
    import dltune.envs._legacy as legacy

    runtime = LegacyRuntime(tmp_path / "env")
    (runtime.path / "bin").mkdir(parents=True)
    (runtime.path / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
    (runtime.path / "bin" / "python").chmod(0o755)
    marker = {"schema": 1, "pins": list(legacy.LEGACY_PINS), "python": "3.11.7",
              "versions": {"mxnet": "1.9.1", "theano": "1.0.5"}}
    runtime.marker_path.write_text(json.dumps(marker))
    return runtime


def test_deep_status_catches_a_runtime_that_only_looks_installed(marker_only_runtime):
    shallow = {s.name: s for s in backend_status(runtime=marker_only_runtime)}
    assert shallow["mxnet"].available and shallow["mxnet"].version == "1.9.1"
    deep = {s.name: s for s in backend_status(deep=True, runtime=marker_only_runtime)}
    assert not deep["mxnet"].available and not deep["theano"].available
    assert deep["mxnet"].fix == "dltune env install legacy"


def test_the_listing_labels_the_retired_frameworks(tmp_path):
    table = status_command(False, runtime=LegacyRuntime(tmp_path / "absent"))
    rows = {line.split("  ")[0].strip() for line in table.splitlines()[1:8]}
    assert rows == {"torch", "tensorflow", "pytensor", "jax", "numpy", "mxnet (retired)", "theano (retired)"}
    # JSON keeps the bare names.
    assert {d["name"] for d in json.loads(status_command(True, runtime=LegacyRuntime(tmp_path / "absent")))} == set(BACKEND_NAMES)


def test_install_progress_goes_to_the_logger(monkeypatch, caplog, tmp_path):
    class Installed:
        path, python, actions = tmp_path, sys.executable, ("created",)

        def marker(self) -> dict:
            return {}

    def install(path=None, python=None, progress=None):
        progress("creating the virtual environment")
        return Installed()

    monkeypatch.setattr(LegacyRuntime, "install", staticmethod(install))
    with caplog.at_level(logging.INFO, logger="dltune"):
        summary = install_command("legacy", tmp_path)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("dltune", "creating the virtual environment")]
    assert summary.startswith(f"legacy runtime installed at {tmp_path}")
