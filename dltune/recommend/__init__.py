"""``recommend``: the framework and configuration to use for a workload on a hardware target,
predicted by surrogates fitted on the knowledge base."""

from __future__ import annotations

import sys
import types

from dltune.recommend._candidates import candidate_configs
from dltune.recommend._recommend import (
    OBJECTIVES,
    Candidate,
    Recommendation,
    alternatives_of,
    pareto_front,
    pick,
    recommend,
)

__all__ = ["OBJECTIVES", "Candidate", "Recommendation", "alternatives_of", "candidate_configs",
           "pareto_front", "pick", "recommend"]


class _CallablePackage(types.ModuleType):
    """``dltune.recommend`` names both the function and this package, and importing the package
    (``from dltune.recommend import Recommendation``) binds the package as ``dltune.recommend``:
    calling the package calls :func:`recommend`, so ``dltune.recommend(...)`` works either way."""

    def __call__(self, *args, **kwargs) -> Recommendation:
        return recommend(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
