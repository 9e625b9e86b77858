"""The shipped surrogates' fit key and fit cover every shipped suite's file: shipping a second
suite makes the shipped fit stale, and ``kb export`` refits on all of them."""

from __future__ import annotations

import gzip
import json

import pytest

import dltune.measure._shipped as shipped
from dltune.surrogate import _cache


def _write(folder, suite, ids):
    with gzip.open(folder / f"{suite}.jsonl.gz", "wt") as fh:
        for i in ids:
            fh.write(json.dumps({"id": i, "status": "ok", "workload": {}, "config": {"framework": "numpy"},
                                 "hardware": {}, "kb": {"suite": suite}}) + "\n")


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An empty package kb folder (no knowledge base, no calibrations)."""
    folder = tmp_path / "kb"
    folder.mkdir()
    monkeypatch.setattr(shipped, "package_kb_dir", lambda: folder)
    monkeypatch.setattr(_cache, "package_kb_dir", lambda: folder)
    return folder


def test_the_shipped_fit_key_covers_every_shipped_suites_file(package):
    _write(package, "reference", ["r1", "r2"])
    alone = _cache.shipped_model_key()
    # One file given alone or as the only shipped suite keys the fit alike.
    assert alone == _cache._fit_key(package / "reference.jsonl.gz", [], [])
    assert alone == _cache._fit_key([package / "reference.jsonl.gz"], [], [])
    _write(package, "families", ["f1"])
    both = _cache.shipped_model_key()
    assert both != alone
    _write(package, "families", ["f1", "f2"])  # families measured further
    assert _cache.shipped_model_key() not in (alone, both)
    assert _cache.shipped_model_dir() == package / "surrogates"


def test_the_shipped_surrogates_are_fitted_on_every_shipped_suite(package, tmp_path, monkeypatch):
    fitted = []

    class Model:
        def fit(self, records):
            fitted.extend(r["id"] for r in records)
            return self

        def save(self, path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"fit")
            return path

    monkeypatch.setattr(_cache, "PerformanceModel", Model)
    _write(package, "reference", ["r1", "r2"])
    _write(package, "families", ["f1"])
    summary = _cache.export_shipped_model(out=tmp_path / "out")
    assert fitted == ["r1", "r2", "f1"] and summary["records"] == 3
    assert summary["key"] == _cache.shipped_model_key()
