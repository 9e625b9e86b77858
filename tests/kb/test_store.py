"""kb export: the shipped file is named after the build folder's suite, so shipping one suite
never replaces another's file; a folder mixing shipped suites is refused."""

from __future__ import annotations

import gzip
import json

import pytest

import dltune.kb._store as store
from dltune._errors import ParameterError
from dltune.kb import RecordStore, export_kb, load_shipped_records
from dltune.measure import Measurement


def _folder(path, *suites, provenance=True):
    """A build folder with one run per suite in ``suites`` (the first is the build's)."""
    for number, suite in enumerate(suites):
        record = Measurement(status="ok", workload={"name": f"w{number}", "dataset": "digits", "model": "mlp"},
                             config={"framework": "numpy"}, hardware={}, metrics={"test_accuracy": 0.5})
        RecordStore(path).append(record, {"suite": suite, "key": f"k{number}"})
    if provenance:
        (path / "provenance.json").write_text(json.dumps({"suite": suites[0], "sessions": []}))
    return path


def test_an_export_is_named_after_its_folders_suite(tmp_path):
    out = tmp_path / "package"
    reference = export_kb(_folder(tmp_path / "ref", "reference", "reference"), out)
    before = (out / "reference.jsonl.gz").read_bytes()
    summary = export_kb(_folder(tmp_path / "fam", "families", "families", "families"), out)
    assert summary == {"records": 3, "ok": 3, "path": str(out / "families.jsonl.gz"), "suite": "families"}
    assert reference["suite"] == "reference" and (out / "reference.jsonl.gz").read_bytes() == before
    assert json.loads((out / "families_provenance.json").read_text())["suite"] == "families"
    with gzip.open(out / "families.jsonl.gz", "rt") as fh:
        assert [json.loads(line)["kb"]["suite"] for line in fh] == ["families"] * 3
    assert len(load_shipped_records(out / "families.jsonl.gz")) == 3
    # Without a provenance file the records name the suite.
    assert export_kb(_folder(tmp_path / "bare", "families", provenance=False), tmp_path / "o")["suite"] == "families"


def test_a_folder_mixing_suites_is_refused(tmp_path):
    out = tmp_path / "package"
    with pytest.raises(ParameterError) as err:
        export_kb(_folder(tmp_path / "mixed", "reference", "families"), out)
    assert str(err.value) == ("The 'source' folder must hold the runs of one suite. "
                              "Got 'families', 'reference' instead.")
    assert not out.exists()
    with pytest.raises(ParameterError, match="Got 'quick', 'tiny' instead"):
        export_kb(_folder(tmp_path / "two", "tiny", "quick"), out)
    # Runs of a suite not shipped on its own (reference workloads at more threads) go with the
    # shipped suite of the folder.
    summary = export_kb(_folder(tmp_path / "more", "reference", "many-cores"), out)
    assert summary["suite"] == "reference" and summary["records"] == 2


def test_only_a_shipped_suite_is_exported_into_the_package(tmp_path, monkeypatch):
    package = tmp_path / "package"
    package.mkdir()
    monkeypatch.setattr(store, "package_kb_dir", lambda: package)
    tiny = _folder(tmp_path / "tiny", "tiny")
    with pytest.raises(ParameterError) as err:
        export_kb(tiny)
    assert str(err.value) == ("The 'source' folder's suite must be one of 'reference', 'families' to "
                              "ship in the package. Got 'tiny' instead.")
    assert list(package.iterdir()) == []
    assert export_kb(tiny, tmp_path / "elsewhere")["path"].endswith("tiny.jsonl.gz")
    assert export_kb(_folder(tmp_path / "fam", "families"))["path"] == str(package / "families.jsonl.gz")


def test_cli_export_names_the_suite(tmp_path, capsys):
    from dltune.cli import main

    folder = _folder(tmp_path / "fam", "families", "families")
    assert main(["kb", "export", "--from", str(folder), "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out == (
        f"shipped 2 records (2 ok) of the families suite to {tmp_path / 'o' / 'families.jsonl.gz'}\n")
    assert main(["kb", "export", "--from", str(_folder(tmp_path / "mix", "families", "reference")),
                 "--out", str(tmp_path / "o")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(": error: The 'source' folder must hold the runs of one suite. "
                         "Got 'families', 'reference' instead.")
