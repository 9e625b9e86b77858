"""dltune's logger and its progress display.

Library messages go to the ``dltune`` logger; an application (or ``dltune``'s command line,
:func:`configure`) decides where they go and at which level. Progress draws a bar only when
stderr is a terminal; elsewhere (a log file, CI, a notebook) it logs a plain line now and then.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

__all__ = ["Progress", "configure", "logger", "quiet_optuna"]

logger = logging.getLogger("dltune")
logger.addHandler(logging.NullHandler())

# Plain progress lines at most this often: a log stays readable over an hour-long run.
PLAIN_INTERVAL_S = 30.0


def configure(verbosity: int = 0) -> None:
    """Send dltune's messages to stderr, one bare line each: INFO by default, DEBUG for
    ``verbosity > 0`` (``-v``), WARNING for ``verbosity < 0`` (``-q``). Idempotent."""
    level = logging.DEBUG if verbosity > 0 else logging.WARNING if verbosity < 0 else logging.INFO
    for handler in [h for h in logger.handlers if getattr(h, "_dltune_handler", False)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._dltune_handler = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)


def quiet_optuna() -> None:
    """Optuna's per-trial INFO lines off (dltune shows progress and tables instead): on when
    dltune's logger is at DEBUG (``-v``); a verbosity the user set other than Optuna's default
    INFO is kept."""
    import optuna

    if logger.isEnabledFor(logging.DEBUG):
        optuna.logging.set_verbosity(optuna.logging.INFO)
    elif optuna.logging.get_verbosity() == optuna.logging.INFO:
        optuna.logging.set_verbosity(optuna.logging.WARNING)


class Progress:
    """Counts done steps of ``total``: a tqdm bar on a terminal, else a plain INFO line at most
    every :data:`PLAIN_INTERVAL_S` seconds and one at the end (unless it said the same). Also a
    context manager."""

    def __init__(self, total: int, desc: str, unit: str = "run", initial: int = 0) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n = initial
        self._postfix = ""
        self._bar: Any = None
        self._last = time.monotonic()
        self._closed = False
        self._shown: int | None = None
        terminal = sys.stderr is not None and sys.stderr.isatty()
        if terminal and logger.isEnabledFor(logging.INFO):
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        elif n and time.monotonic() - self._last >= PLAIN_INTERVAL_S:
            self._line()

    def set_postfix_str(self, text: str) -> None:
        self._postfix = text
        if self._bar is not None:
            self._bar.set_postfix_str(text)

    def _line(self) -> None:
        self._last, self._shown = time.monotonic(), self.n
        tail = f" ({self._postfix})" if self._postfix else ""
        logger.info("%s: %d/%d %ss%s", self.desc, self.n, self.total, self.unit, tail)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif not self._closed and self._shown != self.n:
            self._line()
        self._closed = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
