"""The real legacy runtime (``dltune env install legacy``, run by ``make test`` first).

Without it these tests skip, except under ``CI=true``, where they fail. The missing-runtime
errors are checked against a path that does not exist, so they always run.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from dltune._errors import BackendUnavailableError
from dltune.envs import LegacyRuntime, backend_status, clean_environment

FRAMEWORKS = ("torch", "tensorflow", "sklearn", "optuna", "pandas", "pytensor")


@pytest.fixture(scope="module")
def runtime() -> LegacyRuntime:
    runtime = LegacyRuntime()
    problem = runtime.check()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the legacy runtime is needed under CI: {problem}")
        pytest.skip(f"{problem}; run: dltune env install legacy")
    return runtime


def test_install_again_changes_nothing(runtime):
    again = LegacyRuntime.install(runtime.path)
    assert again.actions == ()
    assert again.check() is None


def test_pins_are_installed(runtime):
    versions = runtime.marker()["versions"]
    assert versions["numpy"] == "1.23.5"
    assert versions["mxnet"] == "1.9.1"
    assert versions["theano"] == "1.0.5"
    assert runtime.marker()["python"].split(".")[:2] <= ["3", "11"]


@pytest.mark.slow
def test_frameworks_import_with_explicit_blas(runtime):
    probe = runtime.probe()
    assert probe.ok, probe.errors
    assert probe.versions["mxnet"] == "1.9.1" and probe.versions["theano"] == "1.0.5"
    ldflags = probe.details["theano_blas_ldflags"]
    if runtime.blas_dir is not None:
        assert ldflags.startswith(f"-L{runtime.blas_dir} -lopenblas")
    assert probe.details["theano_compiledir"].startswith(os.environ["DLTUNE_CACHE"])


def test_worker_code_imports_without_main_dependencies(runtime, tmp_path):
    out = tmp_path / "modules.json"
    code = (
        "import json, sys, numpy\n"
        "import dltune.runtime._worker, dltune.backends._base, dltune.backends._common\n"
        "import dltune.models._spec, dltune.envs\n"
        "from dltune.backends import load_trainer_class\n"
        f"json.dump({{'numpy': numpy.__version__, 'dltune': dltune.__file__,\n"
        f"           'loaded': [m for m in {FRAMEWORKS!r} if m in sys.modules]}},\n"
        f"          open({str(out)!r}, 'w'))\n"
    )
    subprocess.run(
        [runtime.python, "-c", code], check=True, env=clean_environment(),
        stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
    )
    result = json.loads(out.read_text())
    assert result["numpy"] == "1.23.5"
    assert result["loaded"] == []
    import dltune

    assert result["dltune"] == dltune.__file__


def test_status_reports_legacy_backends_available(runtime):
    statuses = {s.name: s for s in backend_status()}
    for name, version in (("mxnet", "1.9.1"), ("theano", "1.0.5")):
        assert statuses[name].available, statuses[name].reason
        assert statuses[name].version == version
        assert statuses[name].interpreter == runtime.python


def test_benchmark_without_runtime_raises_backend_unavailable(tmp_path, monkeypatch):
    import dltune
    from dltune.config import TrainConfig

    monkeypatch.setenv("DLTUNE_LEGACY_ENV", str(tmp_path / "deleted"))
    with pytest.raises(BackendUnavailableError, match="run: dltune env install legacy"):
        dltune.benchmark("digits", TrainConfig(framework="mxnet", epochs=1), model="mlp")


@pytest.mark.parametrize("framework", ["mxnet", "theano"])
def test_bench_cli_without_runtime_is_one_line_naming_the_fix(tmp_path, cli, framework):
    done = cli(
        "bench", "--workload", "digits", "--model", "mlp", "--frameworks", framework,
        "--epochs", "1", env={"DLTUNE_LEGACY_ENV": str(tmp_path / "deleted")},
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "dltune env install legacy" in lines[0]
    assert "Traceback" not in done.stderr
