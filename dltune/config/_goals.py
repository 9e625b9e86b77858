"""What a user asks for: objective names, constraint keys and option words shared by the Python
API and every command (one vocabulary; an old spelling is refused with a pointer to the new)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_float

__all__ = ["CONSTRAINTS", "OBJECTIVES", "RENAMED", "RENAMED_KEYWORDS", "check_constraints",
           "check_objective", "constraint_flag", "refuse_renamed", "renamed_constraint_flags"]

# "balanced" trades accuracy against training time (tune: a Pareto front of both).
OBJECTIVES: tuple[str, ...] = ("accuracy", "time", "balanced")

# Constraint key -> (what it bounds, unit, low, high). Units are in the key; the CLI flag is the
# key with dashes (``max_train_time_s`` -> ``--max-train-time-s``).
CONSTRAINTS: dict[str, tuple[str, str, float, float | None]] = {
    "max_train_time_s": ("training time at most", "seconds", 0.0, None),
    "max_memory_mb": ("peak memory at most", "MB", 0.0, None),
    "min_accuracy": ("test accuracy at least", "fraction 0..1", 0.0, 1.0),
}

# Old spelling -> the current one: constraint keys (their flags follow:
# renamed_constraint_flags) and objective names.
RENAMED: dict[str, str] = {
    "max_train_time": "max_train_time_s",
    "max_memory": "max_memory_mb",
    "both": "balanced",
}

# Keyword parameters renamed; tune, run_worker, run_study and the kb builds refuse the old ones
# with a pointer (refuse_renamed).
RENAMED_KEYWORDS: dict[str, str] = {
    "n_trials": "trials",
    "tune_trials": "trials",
    "timeout": "time_budget_s",
    "budget_minutes": "time_budget_s",
    "budget_hours": "time_budget_s",
    "objectives": "objective",
}


def _renamed(name: str, value: Any) -> None:
    if isinstance(value, str) and value in RENAMED:
        raise ParameterError(
            f"The '{name}' parameter no longer accepts {value!r}: use {RENAMED[value]!r}.")


def check_objective(value: Any, name: str = "objective") -> str:
    """Return ``value`` if it is one of :data:`OBJECTIVES`; an old name gets a pointer."""
    _renamed(name, value)
    return check_choice(name, value, OBJECTIVES)


def check_constraints(value: Mapping[str, Any] | None, name: str = "constraints"
                      ) -> dict[str, float]:
    """Return the constraints as ``{key: float}``, keys among :data:`CONSTRAINTS`; ``None`` values
    are dropped. Old keys are refused with a pointer to the current key."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(
            f"The '{name}' parameter must be a dict with keys among {sorted(CONSTRAINTS)}. "
            f"Got {value!r} instead.")
    out: dict[str, float] = {}
    for key, bound in value.items():
        _renamed(f"{name}", key)
        check_choice(name, key, tuple(CONSTRAINTS))
        if bound is None:
            continue
        _, _, low, high = CONSTRAINTS[key]
        out[key] = check_float(f"{name}['{key}']", bound, low, high,
                               low_open=key != "min_accuracy")
    return out


def constraint_flag(key: str) -> str:
    """The command-line flag of constraint ``key``."""
    return "--" + key.replace("_", "-")


def renamed_constraint_flags() -> dict[str, str]:
    """Old constraint option name (``max_memory``) -> its current flag (``--max-memory-mb``)."""
    return {old: constraint_flag(new) for old, new in RENAMED.items() if new in CONSTRAINTS}


def refuse_renamed(function: str, given: dict[str, Any]) -> None:
    """Refuse keyword arguments a function no longer takes: a renamed one with a pointer to its
    new name, any other as Python would (TypeError)."""
    for name in given:
        if name in RENAMED_KEYWORDS:
            raise ParameterError(f"The '{name}' parameter of {function}() is now "
                                 f"'{RENAMED_KEYWORDS[name]}'.")
        raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
