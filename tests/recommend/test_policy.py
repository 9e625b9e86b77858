from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from dltune._errors import ParameterError
from dltune.recommend import RecommendPolicy, alternatives_of, pick, recommend
from dltune.recommend._policy import DEFAULT_POLICY


def test_the_policy_is_frozen_and_checked():
    policy = RecommendPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.accuracy_tie = 0.1
    assert policy == DEFAULT_POLICY and hash(policy) == hash(RecommendPolicy())
    assert dataclasses.replace(policy, accuracy_tie=0.01).accuracy_tie == 0.01
    for field, value, message in [
        ("accuracy_tie", 2.0, "The 'accuracy_tie' parameter must be a float in [0.0, 1.0]. Got 2.0 instead."),
        ("hardware_time_factor", 0.5, "The 'hardware_time_factor' parameter must be a float in [1.0, inf). Got 0.5 instead."),
        ("min_framework_runs", 0, "The 'min_framework_runs' parameter must be an int in [1, inf). Got 0 instead."),
        ("candidate_batches", (), "The 'candidate_batches' parameter must be a non-empty tuple of ints in [1, inf). Got () instead."),
    ]:
        with pytest.raises(ParameterError) as info:
            RecommendPolicy(**{field: value})
        assert str(info.value) == message


def test_each_field_points_at_the_docs_section_that_measured_it():
    from pathlib import Path

    source = inspect.getsource(RecommendPolicy)
    root = Path(__file__).resolve().parents[2]
    for field in dataclasses.fields(RecommendPolicy):
        after = source.split(f"    {field.name}:", 1)[1].splitlines()[1]
        page, anchor = after.split("(docs/", 1)[1].split(")", 1)[0].split("#", 1)
        docs = (root / "docs" / page).read_text()
        headings = {"-".join("".join(c for c in line.lstrip("#").strip().lower() if c.isalnum() or c in " -").split())
                    for line in docs.splitlines() if line.startswith("#")}
        assert anchor in headings, (field.name, page, anchor)


def test_selection_defaults_are_the_policy_s():
    """``pick`` and ``alternatives_of`` take the policy; their defaults are RecommendPolicy()'s."""
    for function in (pick, alternatives_of):
        assert inspect.signature(function).parameters["policy"].default == RecommendPolicy()
    assert inspect.signature(recommend).parameters["policy"].default is None  # RecommendPolicy()
    low, time, point = np.array([0.95, 0.947, 0.90]), np.array([10.0, 1.0, 0.1]), np.array([0.95, 0.99, 0.99])
    assert pick("accuracy", low, time, point) == 1  # tied within half a point: the higher point
    assert pick("accuracy", low, time, point, RecommendPolicy(accuracy_tie=0.0)) == 0
    assert pick("accuracy", low, time, point, RecommendPolicy(accuracy_tie=0.1)) == 2
    assert pick("time", low, time) == 1
    assert pick("time", low, time, policy=RecommendPolicy(time_objective_slack=0.1)) == 2
    # balanced: 95 - log2(10) = 91.7, 94.7 - 0 = 94.7, 90 + 3.3 = 93.3; at 3 points per halving 100 wins.
    assert pick("balanced", low, time) == 1
    assert pick("balanced", low, time, policy=RecommendPolicy(balanced_points_per_halving=3.0)) == 2
    assert alternatives_of(0, low, time, 2) == [2, 1]
    assert alternatives_of(0, low, time, 1) == [2]  # both within 5 points: spread, the fast end
    assert alternatives_of(0, low, time, 2, RecommendPolicy(alternatives_within=0.01)) == [2, 1]
    assert alternatives_of(0, low, time, 1, RecommendPolicy(alternatives_within=0.01)) == [1]


@pytest.mark.slow
def test_recommend_uses_the_policy_defaults_and_refuses_anything_else(tiny_kb, monkeypatch):
    from dltune import Workload
    from dltune.recommend import _recommend

    kb = tiny_kb / "records.jsonl"
    workload = Workload.from_name("digits", "mlp", n_train=300, n_test=150)
    monkeypatch.setattr(_recommend, "_predictions", {})
    plain = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None)
    (entry,) = _recommend._predictions.values()
    assert entry.scored.policy is DEFAULT_POLICY
    same = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None, policy=RecommendPolicy())
    assert same.to_dict() == plain.to_dict() and len(_recommend._predictions) == 1  # one question
    assert "(within 0.5 points of it counts as tied" in plain.reason
    # The grid is the policy's: its batch sizes, and its size.
    two = RecommendPolicy(candidate_batches=(16, 64))
    recommend(workload, objective="accuracy", knowledge_base=kb, storage=None, policy=two)
    entry = _recommend._predictions[list(_recommend._predictions)[-1]]
    measured = set(entry.scored.measured.index.tolist())
    assert entry.scored.policy is two and len(_recommend._predictions) == 2
    assert {c.batch_size for i, c in enumerate(entry.configs) if i not in measured and not c.preset_name} == {16, 64}
    more = recommend(workload, objective="accuracy", knowledge_base=kb, storage=None,
                     policy=RecommendPolicy(grid_per_framework=1000))
    assert more.n_candidates > plain.n_candidates
    with pytest.raises(ParameterError, match=r"^The 'policy' parameter must be a RecommendPolicy or None\. "
                                             r"Got dict instead\.$"):
        recommend(workload, knowledge_base=kb, storage=None, policy={"accuracy_tie": 0.1})
