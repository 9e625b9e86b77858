"""Shared fixtures: an isolated dltune cache per session, and the CLI run as a user runs it."""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
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
def _quick_c_modules(_dltune_cache):
    """Theano and PyTensor workers (the tests' own and the CLI's) compile their C modules as
    tests/compiler.rc says: unoptimised, without debug information, for about a third less
    than a clean compile cache costs otherwise, and with the headers every module starts with
    precompiled (_compiler_rc), for about half of what is left. The C code is the same;
    rounding may differ in the last bit (no fused multiply-adds), far inside every check's
    tolerance."""
    with pytest.MonkeyPatch.context() as patch:
        for name, variable in (("theano", "THEANORC"), ("pytensor", "PYTENSORRC")):
            patch.setenv(variable, str(_compiler_rc(name)))
        yield


# The headers each C module of Theano or PyTensor includes first: parsing them is about two
# thirds of a module's g++ time, so the tests precompile them once per cache (gcc's precompiled
# headers, named in cxxflags). gcc uses a precompiled header only where a module's flags match
# those it was made with (else it reads the headers themselves), and the guard lets the
# frameworks' own compiler checks, which pass no include folders, read it too.
_PREFIX_HEADERS = {
    "theano": ("<Python.h>", "<iostream>", '"theano_mod_helper.h"', "<math.h>", "<numpy/arrayobject.h>",
               "<numpy/arrayscalars.h>", "<vector>", "<algorithm>"),
    "pytensor": ("<Python.h>", '"pytensor_mod_helper.h"', "<math.h>", "<numpy/arrayobject.h>",
                 "<numpy/arrayscalars.h>", "<numpy/npy_math.h>", "<vector>", "<algorithm>"),
}
# Run in the framework's interpreter: the compiler, a module's flags (what CLinker.compile_args
# and compile_str put around the compiler's own, in cc.py / basic.py and cmodule.py) and the
# include folders.
_MODULE_FLAGS = r"""
import json, sys
if sys.argv[1] == "theano":
    from theano import config
    from theano.gof.cmodule import GCC_compiler, std_include_dirs
else:
    from pytensor import config
    from pytensor.link.c.cmodule import GCC_compiler, std_include_dirs
flags = ["-g", "-fno-math-errno", "-Wno-unused-label", "-Wno-unused-variable", "-Wno-write-strings",
         *GCC_compiler.compile_args(), "-fvisibility=hidden"]
print(json.dumps([config.cxx, flags, std_include_dirs()]))
"""


def _compiler_rc(name: str) -> Path:
    """tests/compiler.rc with ``name``'s (theano or pytensor) first headers precompiled, made once
    per cache, framework version and compiler; tests/compiler.rc itself where that cannot be."""
    from dltune._bench import interpreter_for, worker_extra_env
    from dltune._errors import DltuneError
    from dltune._paths import cache_dir
    from dltune.envs import LegacyRuntime, pytensor_flags
    from dltune.envs._legacy import _locked
    from dltune.runtime import worker_environment

    base, cxx = ROOT / "tests" / "compiler.rc", shutil.which("g++")
    headers = _PREFIX_HEADERS[name]
    prefix = "".join([f"#if {' && '.join(f'__has_include({h})' for h in headers)}\n",
                      *(f"#include {h}\n" for h in headers), "#endif\n"])
    try:
        python = interpreter_for(name)
        versions = ((LegacyRuntime().marker() or {}).get("versions") if name == "theano"
                    else [metadata.version(p) for p in ("pytensor", "numpy")])
        compiler = subprocess.run([cxx, "-dumpfullversion"], capture_output=True, text=True,
                                  check=True).stdout if cxx else ""
    except (DltuneError, metadata.PackageNotFoundError, OSError, subprocess.SubprocessError):
        return base
    folder = cache_dir() / "compiler" / hashlib.sha256(json.dumps(
        [name, python, versions, compiler, base.read_text(), prefix, _MODULE_FLAGS]).encode()).hexdigest()[:16]
    rc, header = folder / "compiler.rc", folder / "prefix.h"
    if not compiler or any(c.isspace() for c in str(header)):  # Theano splits cxxflags on spaces
        return base
    with _locked(folder.with_suffix(".lock")):
        if rc.exists():
            return rc
        extra = {**worker_extra_env(name), "THEANORC": str(base), "PYTENSORRC": str(base),
                 "PYTENSOR_FLAGS": pytensor_flags()}
        try:
            done = subprocess.run([python, "-c", _MODULE_FLAGS, name], capture_output=True, text=True,
                                  env=worker_environment({}, extra, python), timeout=600, check=True)
            cxx, flags, include = json.loads(done.stdout.strip().splitlines()[-1])
            folder.mkdir(parents=True, exist_ok=True)
            header.write_text(prefix)
            subprocess.run([cxx, "-x", "c++-header", *flags, *(f"-I{d}" for d in include), str(header),
                            "-o", f"{header}.gch"], capture_output=True, timeout=600, check=True)
        except (OSError, subprocess.SubprocessError, ValueError):
            return base
        config = configparser.ConfigParser()
        config.read(base)
        config["gcc"]["cxxflags"] += f" -include {header}"
        with open(f"{rc}.tmp", "w") as handle:
            config.write(handle)
        os.replace(f"{rc}.tmp", rc)
    return rc


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
    one cache (the tiny knowledge base, the precompiled headers and the compiled Theano and
    PyTensor modules are made once), and measure the tiny knowledge base on a quiet machine
    (see tiny_kb)."""
    config = session.config
    if not config.pluginmanager.has_plugin("dsession"):
        return
    os.environ.setdefault("DLTUNE_CACHE", str(config._tmp_path_factory.getbasetemp() / "dltune-cache"))
    try:
        _build_tiny_kb()
    except Exception as exc:  # the tests that need it then fail in the fixture, with its error
        config.get_terminal_writer().line(f"measuring the tiny knowledge base failed: {exc}", red=True)
    for name in _PREFIX_HEADERS:
        _compiler_rc(name)


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
