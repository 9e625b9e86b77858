"""The user documentation stays true to the code: the generated reference is current, the
tutorial's and how-to guides' runnable snippets run, every documented command and flag exists,
every relative link resolves, and the whole stays within its size budget."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Pages a user reads as prose (the generated reference and the generated example report aside).
PAGES = sorted([ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("how-to/*.md"),
                *DOCS.glob("explanation/*.md"), DOCS / "example-report" / "README.md"])
RUNNABLE = "<!-- runnable -->"
MAX_WORDS, MAX_README_LINES = 15_000, 150


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_is_current():
    generator = _generator()
    stale = [path.relative_to(ROOT).as_posix() for path, text in generator.generated().items()
             if not path.exists() or path.read_text() != text]
    assert not stale, f"{stale} are stale: run {generator.COMMAND}"


def test_the_cli_reference_lists_every_command_and_option():
    text = _generator().render_cli()
    parser = _parsers()
    for name, sub in parser.items():
        assert f"## `{name}`" in text, name
        for option in _options(sub):
            if option.startswith("--"):
                assert f"`{option}" in text or f", {option}" in text, (name, option)


def _snippets(page: Path) -> list[str]:
    """The ```python blocks of ``page`` that follow a ``<!-- runnable -->`` line."""
    blocks, lines = [], page.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == RUNNABLE:
            assert lines[i + 1].strip() == "```python", f"{page.name}:{i + 2}: a runnable block is ```python"
            end = lines.index("```", i + 2)
            blocks.append("\n".join(lines[i + 2:end]))
    return blocks


RUNNABLE_PAGES = [p for p in PAGES if RUNNABLE in p.read_text()]


def test_the_tutorial_and_how_to_guides_have_runnable_code():
    names = {p.relative_to(DOCS).as_posix() for p in RUNNABLE_PAGES}
    assert {"tutorial.md", "how-to/your-own-data.md", "how-to/your-own-model.md"} <= names


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda p: p.name)
def test_runnable_snippets_run(page, tmp_path, monkeypatch):
    """Each page's runnable blocks run in order, in one namespace, in an empty folder (so the
    default storage is a fresh ./dltune.db): what a reader who pastes them gets."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DLTUNE_STORAGE", raising=False)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for number, code in enumerate(_snippets(page), 1):
        exec(compile(code, f"{page.name} block {number}", "exec"), namespace)


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def _bad_keywords(source: str) -> list[str]:
    """Keywords that calls of dltune's functions in ``source`` pass and the function does not
    take (a renamed parameter is refused by ``**renamed``, so it counts as not taken)."""
    tree = ast.parse(source)
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update({a.asname or a.name: a.name for a in node.names if a.name.startswith("dltune")})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dltune"):
            names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain, func = [], node.func
        while isinstance(func, ast.Attribute):
            chain.insert(0, func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id not in names:
            continue
        dotted = names[func.id].split(".") + chain
        for split in range(len(dotted), 0, -1):
            try:
                obj = importlib.import_module(".".join(dotted[:split]))
                break
            except ImportError:
                continue
        for attr in dotted[split:]:
            obj = getattr(obj, attr)
        try:
            parameters = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        catch_all = [p.name for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
        for keyword in node.keywords:
            named = keyword.arg in parameters and parameters[keyword.arg].kind is not inspect.Parameter.VAR_KEYWORD
            if keyword.arg is not None and not named and catch_all in ([], ["renamed"]):
                bad.append(f"{'.'.join(dotted)}({keyword.arg}=...)")
    return bad


@pytest.mark.parametrize("source", [*PAGES, *sorted((ROOT / "examples").glob("*.py"))],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_code_calls_dltune_with_parameters_it_takes(source):
    """Every Python block of the docs (runnable or not) and every example: what runs cheaply
    above is run; what needs real frameworks is at least called as the API is now."""
    blocks = [source.read_text()] if source.suffix == ".py" else _python_blocks(source)
    bad = [call for block in blocks for call in _bad_keywords(block)]
    assert not bad, f"{source.name}: {bad}"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its full name: 'dltune', 'dltune kb build', ..."""
    from dltune.cli import build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child, sub in action.choices.items():
                    walk(f"{name} {child}", sub)

    walk("dltune", build_parser())
    return found


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """The options a user may pass: not the hidden ones (a renamed option that is refused)."""
    return {option for option, action in parser._option_string_actions.items()
            if action.help != argparse.SUPPRESS}


def _command_lines(text: str) -> list[str]:
    """`dltune ...` command lines of the shell blocks and inline code spans."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        lines += [line.split(" #", 1)[0].strip() for line in block.replace("\\\n", " ").splitlines()]
    lines += re.findall(r"(?<!`)`(dltune [^`]+)`", text)
    return [line for line in lines if line.startswith("dltune ")]


def _flags(text: str) -> set[str]:
    """Every --flag named alone in an inline code span, as `--objective accuracy` is."""
    return {m.split("=")[0] for m in re.findall(r"(?<!`)`(--[a-z][a-z0-9-]*)[^`]*`", text)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documented_commands_and_flags_exist(page):
    parsers = _parsers()
    text = page.read_text()
    everywhere = set().union(*map(_options, parsers.values()))
    for line in _command_lines(text):
        words = shlex.split(line)
        name = "dltune"
        while len(words) > 1 and f"{name} {words[1]}" in parsers:
            name = f"{name} {words.pop(1)}"
        for word in words[1:]:
            if word.startswith("--"):
                flag = word.split("=")[0]
                assert flag in _options(parsers[name]), f"{page.name}: `{line}`: {name} has no {flag}"
    unknown = sorted(_flags(text) - everywhere)
    assert not unknown, f"{page.name} names flags no command has: {unknown}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return "-".join("".join(c for c in heading.lower() if c.isalnum() or c in " -_").split(" "))


@pytest.mark.parametrize("page", PAGES + sorted(DOCS.glob("reference/*.md")),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    for target in re.findall(r"\]\(([^)#:]*)(#[^)]*)?\)", page.read_text()):
        path, anchor = target
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name} links to a missing {path}"
        if anchor and resolved.suffix == ".md":
            headings = {_anchor(line.lstrip("#").strip()) for line in resolved.read_text().splitlines()
                        if line.startswith("#")}
            assert anchor[1:] in headings, f"{page.name} links to a missing heading {path}{anchor}"


def test_the_docs_stay_within_their_budget():
    """`wc -w README.md docs/*.md docs/*/*.md` at most 15,000; README at most 150 lines."""
    files = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("*/*.md")]
    words = sum(len(f.read_text().split()) for f in files)
    assert words <= MAX_WORDS, f"{words} words in README.md and docs/ (at most {MAX_WORDS})"
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"
