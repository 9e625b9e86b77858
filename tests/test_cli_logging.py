"""dltune's logger and progress (dltune/_log.py), as the command line configures them."""

from __future__ import annotations

import io
import logging

import pytest

from dltune import _log
from dltune._log import Progress, configure, quiet_optuna


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.fixture
def stderr(monkeypatch):
    """A stderr to read, a terminal or not; the CLI's logger configuration on it, restored after."""
    logger = logging.getLogger("dltune")
    saved = (logger.level, list(logger.handlers))

    def make(tty: bool, verbosity: int = 0) -> _Stream:
        stream = _Stream(tty)
        monkeypatch.setattr("sys.stderr", stream)
        configure(verbosity)
        return stream

    yield make
    logger.setLevel(saved[0])
    logger.handlers[:] = saved[1]


def test_progress_off_a_terminal_is_plain_lines_at_a_modest_rate(stderr, monkeypatch):
    stream = stderr(tty=False)
    with Progress(100, "bench", "run") as progress:
        for _ in range(100):
            progress.update()
    assert stream.getvalue() == "bench: 100/100 runs\n"  # one line: the interval never passed
    monkeypatch.setattr(_log, "PLAIN_INTERVAL_S", 0.0)
    stream = stderr(tty=False)
    with Progress(2, "tune", "trial") as progress:
        progress.set_postfix_str("last: #1 complete")
        progress.update()
        progress.update()
    assert stream.getvalue().splitlines() == ["tune: 1/2 trials (last: #1 complete)",
                                              "tune: 2/2 trials (last: #1 complete)"]
    assert "\r" not in stream.getvalue()


def test_progress_on_a_terminal_draws_a_bar(stderr):
    stream = stderr(tty=True)
    with Progress(4, "kb tiny", "run", initial=1) as progress:
        progress.update(3)
        assert progress.n == 4
    assert "\r" in stream.getvalue() and "4/4" in stream.getvalue()


def test_quiet_draws_and_logs_no_progress_but_warnings(stderr):
    stream = stderr(tty=True, verbosity=-1)
    with Progress(2, "bench", "run") as progress:
        progress.update(2)
    logging.getLogger("dltune").info("hidden")
    logging.getLogger("dltune").warning("shown")
    assert stream.getvalue() == "shown\n"


def test_optuna_is_quiet_unless_verbose(stderr):
    import optuna

    stderr(tty=False)
    quiet_optuna()
    assert optuna.logging.get_verbosity() == optuna.logging.WARNING
    stderr(tty=False, verbosity=1)
    quiet_optuna()
    assert optuna.logging.get_verbosity() == optuna.logging.INFO
    stderr(tty=False)
    quiet_optuna()
    assert optuna.logging.get_verbosity() == optuna.logging.WARNING


def test_configure_keeps_one_handler_of_its_own(stderr):
    stream = stderr(tty=False)
    configure(0)
    configure(0)
    logging.getLogger("dltune").info("once")
    assert stream.getvalue() == "once\n"
