"""A rerun of a seeded tune continues its sampler instead of replaying the first proposals."""

from __future__ import annotations

import pytest

from dltune import tune
from dltune.tuning._worker import resume_seed


def test_resume_seed_keeps_a_fresh_study_reproducible_and_moves_on_after():
    assert resume_seed(None, 5) is None
    assert resume_seed(1, 0) == 1
    assert len({resume_seed(1, n) for n in range(50)}) == 50


@pytest.mark.slow
def test_a_rerun_after_a_kill_gives_new_configurations(tiny_workload, cheap_space, tmp_path):
    """A killed tune loses its sampler: the rerun builds it again from the stored seed, as a
    second call does here. Each of the N COMPLETE trials is a configuration of its own."""
    import optuna
    from optuna.trial import TrialState

    url = f"sqlite:///{tmp_path}/r.db"
    space = cheap_space.fix(epochs=1)
    kwargs = dict(frameworks="numpy", space=space, storage=url, seed=1, sampler="random",
                  compare_preset=False)
    name = tune(tiny_workload, trials=2, **kwargs)["numpy"].study_name
    tune(tiny_workload, trials=4, **kwargs)
    complete = optuna.load_study(study_name=name, storage=url).get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == 4
    assert len({tuple(sorted(t.params.items())) for t in complete}) == 4
