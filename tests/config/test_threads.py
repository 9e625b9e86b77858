"""ThreadConfig: the environment a worker starts with, and the counts' validation."""

from __future__ import annotations

import pytest

from dltune._errors import ParameterError
from dltune.config import ThreadConfig, usable_cores


def test_uniform_sets_every_library():
    env = ThreadConfig.uniform(2).environment()
    assert env == {
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "OPENBLAS_NUM_THREADS": "2",
        "TF_NUM_INTRAOP_THREADS": "2",
        "MXNET_CPU_WORKER_NTHREADS": "1",  # MXNet's engine workers follow inter-op
        "TF_NUM_INTEROP_THREADS": "1",
    }
    assert ThreadConfig.uniform(None) == ThreadConfig()
    assert ThreadConfig().environment() == {}


def test_blas_separate_from_intra_op_and_cores():
    config = ThreadConfig(intra_op=2, blas=1, cores=1)
    env = config.environment()
    assert env["OMP_NUM_THREADS"] == "1" and env["TF_NUM_INTRAOP_THREADS"] == "2"
    assert env["DLTUNE_CPU_CORES"] == "1"
    assert config.effective_blas == 1
    assert ThreadConfig(intra_op=3).effective_blas == 3


def test_validate_against_usable_cores():
    ThreadConfig.uniform(1).validate()
    assert ThreadConfig(intra_op=usable_cores()).validate() is not None
    with pytest.raises(ParameterError, match=r"must be an int in \[1, 4\]. Got 0 instead."):
        ThreadConfig(intra_op=0).validate(max_cores=4)
    with pytest.raises(ParameterError, match="'threads.inter_op'"):
        ThreadConfig(inter_op=5).validate(max_cores=4)


def test_dict_round_trip():
    config = ThreadConfig(intra_op=2, inter_op=1, blas=2, cores=2)
    assert ThreadConfig.from_dict(config.to_dict()) == config
    assert ThreadConfig.from_dict(None) == ThreadConfig()
