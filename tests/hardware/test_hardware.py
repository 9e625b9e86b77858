from __future__ import annotations

import json
import re

import pytest

from dltune._errors import ParameterError
from dltune.config import usable_cores
from dltune.hardware import Hardware


def test_detect_describes_this_machine():
    hw = Hardware.detect()
    assert hw.usable_cores == usable_cores()
    assert hw.logical_cores >= hw.usable_cores >= 1
    assert hw.physical_cores >= 1
    assert hw.memory_gb > 0
    assert hw.cpu_model
    # numpy's BLAS is loaded here, so threadpoolctl sees at least one library.
    assert any(lib.get("user_api") == "blas" for lib in hw.blas)


def test_fingerprint_is_stable_and_names_the_core_subset():
    whole, again = Hardware.detect(), Hardware.detect()
    assert whole.fingerprint == again.fingerprint
    assert len(whole.fingerprint) == 12
    one = Hardware.detect(cores=1)
    assert one.usable_cores == 1
    if whole.usable_cores > 1:
        assert one.fingerprint != whole.fingerprint
        assert one.target != whole.target
    assert f"{one.usable_cores}of{one.logical_cores}c" in one.target


def test_instruction_sets_are_part_of_the_identity():
    """Two VMs both called "AMD EPYC" trained 3x apart, one with AVX-512: not one target."""
    from dltune.hardware import cpu_identity

    base = {"cpu_model": "AMD EPYC", "logical_cores": 2, "memory_gb": 23.5}
    fast = Hardware.from_dict({**base, "cpu_flags": ["avx", "avx2", "avx512f", "fma"]})
    slow = Hardware.from_dict({**base, "cpu_flags": ["avx", "avx2", "fma"]})
    assert fast.fingerprint != slow.fingerprint
    assert cpu_identity(fast.to_dict()) == "AMD EPYC [avx512f avx2]"
    assert cpu_identity(slow.to_dict()) == "AMD EPYC [avx2]"
    assert cpu_identity(base) == "AMD EPYC"  # a description without flags: the model alone
    # Flags that do not change the speed class do not split a machine.
    assert Hardware.from_dict({**base, "cpu_flags": ["avx", "avx2"]}).fingerprint == slow.fingerprint


def test_json_round_trip(tmp_path):
    hw = Hardware.detect()
    path = tmp_path / "hw.json"
    path.write_text(hw.to_json())
    back = Hardware.from_json(path)
    assert back.fingerprint == hw.fingerprint
    assert Hardware.from_json(hw.to_json()).to_dict() == hw.to_dict()


def test_described_machine_defaults():
    hw = Hardware.from_dict({"cpu_model": "Xeon E5-1620", "logical_cores": 8, "memory_gb": 32,
                             "gpus": [{"name": "GeForce GTX 1080 Ti", "memory_mb": 11264}]})
    assert hw.usable_cores == 8 and hw.physical_cores == 8
    assert "1080ti" in hw.target


@pytest.mark.parametrize(
    "data, match",
    [
        ([1, 2], "must be a JSON object"),
        ({"cpu_model": "x"}, "'logical_cores'"),
        ({"logical_cores": 0}, "'hardware.logical_cores' parameter must be an int in [1, 4096]. Got 0"),
        ({"logical_cores": 2, "usable_cores": 4}, "at most logical_cores"),
        ({"logical_cores": 2, "memory_gb": "lots"}, "'hardware.memory_gb'"),
        ({"logical_cores": 2, "gpus": ["x"]}, "'hardware.gpus'"),
        # Impossible machines: each names the field, the bounds and the value.
        ({"logical_cores": 10**6}, "'hardware.logical_cores' parameter must be an int in [1, 4096]. Got 1000000"),
        ({"logical_cores": 2, "physical_cores": 2.5}, "'hardware.physical_cores' parameter must be an int"),
        ({"logical_cores": 2, "usable_cores": float("nan")}, "'hardware.usable_cores' parameter must be an int"),
        ({"logical_cores": 2, "memory_gb": float("nan")},
         "'hardware.memory_gb' parameter must be a float in [0.0, 65536.0]. Got nan"),
        ({"logical_cores": 2, "memory_gb": float("inf")}, "'hardware.memory_gb' parameter must be a float"),
        ({"logical_cores": 2, "memory_gb": -1}, "'hardware.memory_gb' parameter must be a float"),
        ({"logical_cores": 2, "memory_gb": 1e9}, "'hardware.memory_gb' parameter must be a float"),
        ({"logical_cores": 2, "gpus": [{"name": "g", "memory_mb": float("nan")}]},
         "'hardware.gpus[0].memory_mb' parameter must be a float in [0.0, 1048576.0]. Got nan"),
        ({"logical_cores": 2, "blas": [{"num_threads": 0}]}, "'hardware.blas[0].num_threads' parameter must be an int"),
        ({"logical_cores": 2, "blas": "openblas"}, "'hardware.blas' parameter must be a list of objects"),
        ({"logical_cores": 2, "cpu_flags": "avx2"}, "'hardware.cpu_flags' parameter must be a list of strings"),
    ],
)
def test_malformed_descriptions(data, match):
    with pytest.raises(ParameterError, match=re.escape(match)):
        Hardware.from_dict(data)


def test_recommend_refuses_an_impossible_hardware_file_naming_the_field(cli, tmp_path):
    """10**6 cores or a NaN memory were accepted (only an "outside what was measured" note)."""
    for field, value, says in (("logical_cores", 10**6, "an int in [1, 4096]. Got 1000000 instead."),
                               ("memory_gb", float("nan"), "a float in [0.0, 65536.0]. Got nan instead.")):
        path = tmp_path / "hw.json"
        path.write_text(json.dumps({"cpu_model": "x", "logical_cores": 2, "memory_gb": 8, field: value}))
        done = cli("recommend", "--workload", "digits", "--storage", "none", "--hardware", str(path),
                   env={"DLTUNE_CACHE": str(tmp_path / "cache")})
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().splitlines() == [
            f"dltune recommend: error: The 'hardware.{field}' parameter must be {says}"]


def test_malformed_json_text_and_missing_file(tmp_path):
    with pytest.raises(ParameterError, match="valid JSON"):
        Hardware.from_json("{not json")
    with pytest.raises(ParameterError, match="does not exist"):
        Hardware.from_json(tmp_path / "none.json")


def test_cli_hardware_json(cli):
    done = cli("hardware", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["fingerprint"] == Hardware.detect().fingerprint
    bad = cli("hardware", "--cores", str(usable_cores() + 1))
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert "'cores' parameter must be an int in [1," in bad.stderr
