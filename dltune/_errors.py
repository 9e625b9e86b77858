"""Exceptions raised by dltune.

Every error a user can cause by bad input is a :class:`DltuneError`; the command-line interface
prints those as one line and exits with status 2, never with a traceback.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "DltuneError",
    "FrameworkNotPredictedError",
    "NotFittedError",
    "ParameterError",
    "RunFailedError",
]


class DltuneError(Exception):
    """Base class of the errors dltune raises on purpose."""


class ParameterError(DltuneError, ValueError):
    """A parameter has a value outside its allowed set or range."""


class FrameworkNotPredictedError(ParameterError):
    """``recommend`` was asked for a framework the surrogates have no runs of, or too few to
    predict its training time; the message gives the counts."""


class BackendUnavailableError(DltuneError, ImportError):
    """A backend's framework is not installed; the message says what to install."""


class NotFittedError(DltuneError, ValueError, AttributeError):
    """An estimator was used before ``fit``."""


class RunFailedError(DltuneError, RuntimeError):
    """A measured run failed and the caller asked for an exception rather than a record."""
