"""Start-up settings of the legacy frameworks and PyTensor (pure functions, no framework)."""

from __future__ import annotations

import shlex

import pytest

from dltune._errors import ParameterError
from dltune.envs import LegacyRuntime, mxnet_env, pytensor_flags, theano_env, theano_flags


def _parse(flags: str) -> dict[str, str]:
    """Split THEANO_FLAGS the way Theano 1.0.5 does (posix shlex on commas, then key=value)."""
    lexer = shlex.shlex(flags, posix=True)
    lexer.whitespace = ","
    lexer.whitespace_split = True
    return dict(item.split("=", 1) for item in lexer)


def _runtime_with_blas(tmp_path, name="env"):
    runtime = LegacyRuntime(tmp_path / name)
    blas = runtime.path / "dltune-blas"
    blas.mkdir(parents=True)
    (blas / "libopenblas.so").write_bytes(b"")
    return runtime


def test_theano_flags_link_the_runtime_openblas_and_cache_under_dltune(tmp_path):
    runtime = _runtime_with_blas(tmp_path)
    flags = _parse(theano_flags(tmp_path / "cache", runtime=runtime))
    folder = runtime.path / "dltune-blas"
    assert flags["blas.ldflags"] == f"-L{folder} -lopenblas -Wl,-rpath,{folder}"
    assert flags["base_compiledir"] == str(tmp_path / "cache" / "theano")
    assert flags["floatX"] == "float32"
    assert flags["device"] == "cpu"
    assert flags["openmp"] == "False"


def test_theano_flags_fall_back_to_empty_ldflags_without_blas(tmp_path):
    flags = _parse(theano_flags(tmp_path, runtime=LegacyRuntime(tmp_path / "no-env")))
    assert flags["blas.ldflags"] == ""


def test_theano_flags_cannot_pass_a_blas_path_with_spaces(tmp_path):
    runtime = _runtime_with_blas(tmp_path, "with space")
    assert _parse(theano_flags(tmp_path, runtime=runtime))["blas.ldflags"] == ""


def test_theano_flags_escape_commas_in_paths(tmp_path):
    cache = tmp_path / "a,b"
    flags = _parse(theano_flags(cache, runtime=LegacyRuntime(tmp_path / "x")))
    assert flags["base_compiledir"] == str(cache / "theano")


def test_theano_flags_default_cache_follows_dltune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "c"))
    flags = _parse(theano_flags(runtime=LegacyRuntime(tmp_path / "x")))
    assert flags["base_compiledir"] == str(tmp_path / "c" / "theano")


def test_theano_env_sets_thread_variables_only_when_asked(tmp_path):
    runtime = LegacyRuntime(tmp_path / "x")
    assert set(theano_env(runtime=runtime, cache_root=tmp_path)) == {"THEANO_FLAGS"}
    env = theano_env(3, tmp_path, runtime=runtime, openmp=True)
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "3"
    assert _parse(env["THEANO_FLAGS"])["openmp"] == "True"


def test_mxnet_env():
    assert mxnet_env() == {"MXNET_ENGINE_TYPE": "ThreadedEnginePerDevice"}
    env = mxnet_env(2, worker_threads=4, engine="NaiveEngine")
    assert env == {
        "MXNET_ENGINE_TYPE": "NaiveEngine",
        "OMP_NUM_THREADS": "2",
        "OPENBLAS_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "MXNET_CPU_WORKER_NTHREADS": "4",
    }


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mxnet_env(engine="Fast"), "The 'engine' parameter must be"),
        (lambda: mxnet_env(0), "The 'threads' parameter must be an int in [1, 1024]. Got 0"),
        (lambda: mxnet_env(worker_threads=-1), "The 'worker_threads' parameter"),
        (lambda: theano_env(threads=2.5), "The 'threads' parameter"),
        (lambda: theano_flags(openmp="yes"), "The 'openmp' parameter"),
    ],
)
def test_bad_settings_are_parameter_errors(call, message):
    with pytest.raises(ParameterError) as info:
        call()
    assert message in str(info.value)


def test_pytensor_flags(tmp_path):
    flags = _parse(pytensor_flags(tmp_path))
    assert flags == {
        "base_compiledir": str(tmp_path / "pytensor"),
        "floatX": "float32",
        "device": "cpu",
        "mode": "CVM",
        "blas__ldflags": "",
    }
