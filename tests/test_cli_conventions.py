"""The command line's conventions: help for every option, examples for every command, one
vocabulary (old flags refused with a pointer), bare ``dltune`` is help, a light start-up."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys

import pytest

from dltune.cli import COMMANDS, build_parser, main
from dltune.cli._common import duration


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (command path, parser) below ``parser``, itself included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def _is_leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def test_every_option_has_help_and_every_command_examples():
    missing_help, missing_examples, hidden_default = [], [], []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                                   argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
                continue
            name = " ".join(["dltune", *path, action.option_strings[0] if action.option_strings
                             else action.dest])
            if not (action.help or "").strip():
                missing_help.append(name)
            elif action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
                shown = parser._get_formatter()._get_help_string(action) or ""
                if "default" not in shown:
                    hidden_default.append(name)
        if path and _is_leaf(parser) and "examples:" not in (parser.epilog or ""):
            missing_examples.append(" ".join(["dltune", *path]))
        elif parser.epilog and not all(line.strip().startswith(("dltune ", "DLTUNE_"))
                                       for line in parser.epilog.splitlines()[1:]):
            missing_examples.append(" ".join(["dltune", *path]) + " (an example is no command)")
    assert missing_help == []
    assert hidden_default == []
    assert missing_examples == []


def test_commands_are_listed_in_the_order_a_new_user_meets_them():
    assert list(COMMANDS)[:4] == ["recommend", "bench", "tune", "report"]
    assert set(COMMANDS) == {"recommend", "bench", "tune", "report", "study", "dashboard", "worker",
                             "kb", "env", "hardware"}
    assert all(len(help_text) <= 60 for _, help_text in COMMANDS.values())


def test_bare_dltune_prints_help_and_succeeds(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dltune")
    assert out.index("recommend") < out.index("bench") < out.index("hardware")
    assert "examples:" in out


@pytest.mark.parametrize(("argv", "new"), [
    (["bench", "--timeout", "5"], "--run-timeout"),
    (["tune", "--timeout=5"], "--time-budget"),
    (["tune", "--n-trials", "5"], "--trials"),
    (["tune", "--max-train-time", "5"], "--max-train-time-s"),
    (["tune", "--max-memory", "500"], "--max-memory-mb"),
    (["worker", "--study", "x", "--n-trials", "5"], "--trials"),
    (["worker", "--study", "x", "--timeout", "5"], "--time-budget"),
    (["study", "--budget-minutes", "5"], "--time-budget"),
    (["study", "--tune-trials", "5"], "--trials"),
    (["kb", "build", "--budget-hours", "1"], "--time-budget"),
    (["kb", "calibrate", "--budget-hours", "1"], "--time-budget"),
])
def test_an_old_flag_is_refused_in_one_line_naming_the_new_one(capsys, argv, new):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"is now '{new}'" in err and err.startswith(f"dltune {' '.join(argv[:2 if argv[0] == 'kb' else 1])}")


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("20m", 1200.0),
                                               ("1.5h", 5400.0), (" 2H ", 7200.0)])
def test_a_time_budget_is_a_duration(text, seconds):
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "0", "-5m", "nan", "inf", "1d", "5 min"])
def test_a_bad_time_budget_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="'time_budget' parameter must be a positive"):
        duration(text)


def test_verbosity_flags_set_the_dltune_logger_before_or_after_the_command(monkeypatch):
    import dltune.cli._hardware as hardware

    levels = []
    monkeypatch.setattr(hardware, "run", lambda args: levels.append(logging.getLogger("dltune").level))
    for argv in (["hardware"], ["-q", "hardware"], ["hardware", "-v"], ["hardware", "--quiet"]):
        assert main(argv) == 0
    assert levels == [logging.INFO, logging.WARNING, logging.DEBUG, logging.WARNING]


def test_start_up_imports_no_heavy_module():
    """``dltune`` and ``dltune --help`` list the commands without importing any of them (nor
    numpy, a framework or Optuna): start-up stays well under 0.3 s."""
    code = ("import sys; from dltune.cli import main; main([]);"
            "print(sorted(m for m in ('numpy', 'optuna', 'torch', 'tensorflow', 'tqdm', 'dltune.data',"
            " 'dltune.cli._bench') if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"


@pytest.mark.parametrize(("call", "old", "new"), [
    ("dltune.tuning:tune", "n_trials", "trials"),
    ("dltune.tuning:tune", "timeout", "time_budget_s"),
    ("dltune.tuning:tune", "objectives", "objective"),
    ("dltune.tuning:run_worker", "n_trials", "trials"),
    ("dltune.tuning:run_worker", "timeout", "time_budget_s"),
    ("dltune.study:run_study", "budget_minutes", "time_budget_s"),
    ("dltune.study:run_study", "tune_trials", "trials"),
    ("dltune.kb:build_kb", "budget_hours", "time_budget_s"),
    ("dltune.kb:calibrate_machine", "budget_hours", "time_budget_s"),
])
def test_the_python_api_refuses_a_renamed_keyword_naming_the_new_one(tmp_path, monkeypatch, call, old, new):
    """The same vocabulary as the flags; the refusal comes before anything is opened or made."""
    import importlib

    from dltune._errors import ParameterError

    monkeypatch.chdir(tmp_path)
    module, name = call.split(":")
    function = getattr(importlib.import_module(module), name)
    first = {"tune": ("digits",), "run_worker": ("study",), "run_study": ("digits",)}.get(name, ())
    with pytest.raises(ParameterError, match=f"The '{old}' parameter of {name}\\(\\) is now '{new}'"):
        function(*first, **{old: 1})
    assert list(tmp_path.iterdir()) == []
