"""``recommend``: the framework and configuration to use for a workload on a hardware target,
predicted by surrogates fitted on the knowledge base."""

from __future__ import annotations

import sys
import types

from dltune.recommend._candidates import candidate_configs
from dltune.recommend._pipeline import ScoredCandidates, score_candidates
from dltune.recommend._policy import RecommendPolicy
from dltune.recommend._recommend import RECOMMEND_CONSTRAINTS, RECOMMEND_OBJECTIVES, recommend
from dltune.recommend._result import Candidate, Recommendation
from dltune.recommend._select import alternatives_of, pareto_front, pick

__all__ = ["RECOMMEND_CONSTRAINTS", "RECOMMEND_OBJECTIVES", "Candidate", "Recommendation",
           "RecommendPolicy", "ScoredCandidates", "alternatives_of", "candidate_configs",
           "pareto_front", "pick", "recommend", "score_candidates"]


class _CallablePackage(types.ModuleType):
    """``dltune.recommend`` names both the function and this package, and importing the package
    (``from dltune.recommend import Recommendation``) binds the package as ``dltune.recommend``:
    calling the package calls :func:`recommend`, so ``dltune.recommend(...)`` works either way."""

    def __call__(self, *args, **kwargs) -> Recommendation:
        return recommend(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
