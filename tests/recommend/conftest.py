"""A tiny knowledge base measured for real with the numpy backend, shared by the tests here."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_kb():
    """The ``tiny`` suite measured with the numpy backend (resumable: built once per cache)."""
    from dltune._paths import cache_dir
    from dltune.kb import build_kb

    folder = cache_dir() / "test-kb" / "tiny-numpy"
    build_kb("tiny", out=folder, frameworks=["numpy"], configs_per_pair=6, repeats=1)
    return folder
