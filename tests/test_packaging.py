"""What a wheel ships: every data file in the package is declared package data.

An editable install (``make``) reads files from the source tree, so a file missing from the
package-data patterns works here and is absent for everyone who installs the wheel: the
knowledge base once was (``kb/*.json.gz`` did not match ``reference.jsonl.gz``).
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest


def test_every_data_file_in_the_package_is_declared_package_data():
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["dltune"]
    package = root / "dltune"
    data = sorted(p.relative_to(package).as_posix() for p in package.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)
    assert "kb/reference.jsonl.gz" in data
    # setuptools' '*' does not cross folders: compare the depth too.
    missing = [f for f in data if not any(fnmatch(f, pat) and f.count("/") == pat.count("/")
                                          for pat in patterns)]
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
