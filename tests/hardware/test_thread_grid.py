from __future__ import annotations

import json

import pytest

from dltune._errors import ParameterError
from dltune.config._threads import thread_grid
from dltune.hardware import Hardware
from dltune.kb._suite import SUITES, plan_suite

SIXTEEN = {"cpu_model": "Described Xeon", "logical_cores": 16, "memory_gb": 64.0}


@pytest.mark.parametrize(("cores", "grid"), [(1, (1,)), (2, (1, 2)), (3, (1, 2, 3)), (16, (1, 2, 4, 8, 16)),
                                             (12, (1, 2, 4, 8, 12)), (96, (1, 2, 4, 8, 16, 32, 64, 96))])
def test_thread_grid_doubles_up_to_every_core(cores, grid):
    assert thread_grid(cores) == grid


def test_thread_grid_refuses_no_cores():
    with pytest.raises(ParameterError, match="The 'cores' parameter must be an int in"):
        thread_grid(0)


def test_a_described_16_core_machine_is_calibrated_and_sliced_at_its_grid():
    cores = Hardware.from_dict(SIXTEEN).usable_cores
    quick = plan_suite("quick", ["numpy"], 1, 0, 2, fresh=0, all_cores=cores)
    assert sorted({p.config.threads.intra_op for p in quick}) == [1, 2, 4, 8, 16]
    assert len(quick) == len(SUITES["quick"]) * 2 * 5
    # The many-core slice: the knowledge base's own configurations beyond its 2 threads only.
    sliced = plan_suite("many-cores", ["numpy"], 2, 0, 2, fresh=0, all_cores=cores)
    assert sorted({p.config.threads.intra_op for p in sliced}) == [4, 8, 16]
    reference = plan_suite("reference", ["numpy"], 2, 0, 2, fresh=0)
    def same(p):
        return p.workload.name, json.dumps(dict(p.config.to_dict(), threads=None), sort_keys=True)

    assert {same(p) for p in sliced} <= {same(p) for p in reference if p.kind == "space-filling"}
    assert plan_suite("many-cores", ["numpy"], 2, 0, 2, fresh=0, all_cores=2) == []
