"""Shared fixtures: an isolated dltune cache per session, and the CLI run as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The CLI runs in the repository root (run_cli): a test that stores in the default storage there
# would leave ./dltune.db behind, which every later default-storage read then fits on.
_ROOT_DB_BEFORE = (ROOT / "dltune.db").exists()


@pytest.fixture(scope="session", autouse=True)
def _dltune_cache(tmp_path_factory):
    """Keep test artefacts out of the user's cache, but reuse the project cache's legacy runtime
    and compiled caches (set up by `make test`) when DLTUNE_CACHE points at them."""
    os.environ.setdefault("DLTUNE_CACHE", str(tmp_path_factory.mktemp("dltune-cache")))
    yield


@pytest.fixture(scope="session", autouse=True)
def _quick_c_modules():
    """Theano and PyTensor workers (the tests' own and the CLI's) compile their C modules as
    tests/compiler.rc says: unoptimised, without debug information, for about a third less
    than a clean compile cache costs otherwise. The C code is the same; rounding may differ in
    the last bit (no fused multiply-adds), far inside every check's tolerance."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("THEANORC", "PYTENSORRC"):
            patch.setenv(variable, str(ROOT / "tests" / "compiler.rc"))
        yield


def _build_tiny_kb() -> Path:
    from dltune._paths import cache_dir
    from dltune.envs._legacy import _locked
    from dltune.kb import build_kb

    folder = cache_dir() / "test-kb" / "tiny-numpy"
    # build_kb refuses a second builder of a folder at once: the other worker waits here instead.
    with _locked(folder.with_name(folder.name + ".lock")):
        build_kb("tiny", out=folder, frameworks=["numpy"], configs_per_pair=6, repeats=1, quiet_wait_s=60.0)
    return folder


@pytest.fixture(scope="session")
def tiny_kb():
    """The ``tiny`` suite measured for real with the numpy backend (resumable: built once per
    cache), shared by the knowledge-base, surrogate and recommend tests.

    Each run first waits (up to 60 s) for the rest of the machine to fall quiet, as
    ``dltune kb build`` does by default: a busy neighbouring process made 2-thread runs of
    14 ms take up to 1 s on a 2-core machine, and the tests that read these records would then
    test that neighbour rather than dltune. Under pytest-xdist each worker is the other's
    neighbour, so the controller measures it before the workers start (pytest_sessionstart)."""
    return _build_tiny_kb()


def pytest_sessionstart(session):
    """Under pytest-xdist (``-n``), in the controller before the workers start: give the workers
    one cache (the tiny knowledge base and the compiled Theano and PyTensor modules are made
    once), and measure the tiny knowledge base on a quiet machine (see tiny_kb)."""
    config = session.config
    if not config.pluginmanager.has_plugin("dsession"):
        return
    os.environ.setdefault("DLTUNE_CACHE", str(config._tmp_path_factory.getbasetemp() / "dltune-cache"))
    try:
        _build_tiny_kb()
    except Exception as exc:  # the tests that need it then fail in the fixture, with its error
        config.get_terminal_writer().line(f"measuring the tiny knowledge base failed: {exc}", red=True)


# Theano and PyTensor compile C modules into one cache each, one compile at a time: their
# backend tests, of every file, form one unit of work each (see _work_unit).
_COMPILED_FILES = {"tests/backends/test_legacy_backends.py": "theano",
                   "tests/backends/test_pytensor.py": "pytensor"}
_COMPILED_CASE = re.compile(r"\[(theano|pytensor)[-\]]")


def _work_unit(nodeid: str) -> str:
    """What runs on one pytest-xdist worker under ``make test``: a test file (its module
    fixtures are made once), but the tests in tests/backends of a backend that compiles
    (_COMPILED_FILES, _COMPILED_CASE) together, whatever their file."""
    path, _, rest = nodeid.partition("::")
    case = _COMPILED_CASE.search(rest) if path.startswith("tests/backends/") else None
    return _COMPILED_FILES.get(path) or (case.group(1) if case else path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the work units of _work_unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return Scheduling(config, log)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m dltune.cli ARGS`` in a fresh process; returns the completed process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dltune.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT,
    )


@pytest.fixture(scope="session")
def cli():
    return run_cli


def pytest_sessionfinish(session, exitstatus):
    """In CI a skipped test is a failure: a backend or service that is missing must not hide.

    Tests marked ``gpu`` may skip: no CI machine has a GPU."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    # GPU checks are the exception: CI machines have no GPU (see tests/backends/test_gpu.py).
    skipped = len([r for r in reporter.stats.get("skipped", []) if "gpu" not in r.keywords]) if reporter else 0
    if os.environ.get("CI") == "true" and skipped and exitstatus == 0:
        reporter.write_line(f"CI: {skipped} test(s) skipped; every test must run in CI.", red=True)
        session.exitstatus = 1
    if not _ROOT_DB_BEFORE and (ROOT / "dltune.db").exists():
        if reporter:
            reporter.write_line(f"a test wrote {ROOT / 'dltune.db'}: pass a storage of its own "
                                "(--storage URL or none).", red=True)
        session.exitstatus = 1
