"""``recommend``: the framework and configuration to use for a workload on a hardware target,
predicted by surrogates fitted on the knowledge base."""

from __future__ import annotations

from dltune.recommend._candidates import candidate_configs
from dltune.recommend._recommend import (
    OBJECTIVES,
    Candidate,
    Recommendation,
    pareto_front,
    pick,
    recommend,
)

__all__ = ["OBJECTIVES", "Candidate", "Recommendation", "candidate_configs", "pareto_front",
           "pick", "recommend"]
