from __future__ import annotations

import fcntl
import gzip
import json

import pytest

from dltune._errors import DltuneError, ParameterError
from dltune.kb import RecordStore, build_kb, export_kb, load_shipped_records, plan_suite
from dltune.kb._suite import SUITES

pytestmark = pytest.mark.slow


def test_build_measures_every_planned_run(tiny_kb):
    entries = RecordStore(tiny_kb).entries()
    plan = plan_suite("tiny", ["numpy"], 6, 1)
    assert {e["kb"]["key"] for e in entries} == {p.key for p in plan}
    ok = [e for e in entries if e["status"] == "ok"]
    assert len(ok) >= len(plan) - 2
    for e in ok:
        assert e["metrics"]["train_time_s"] > 0
        assert 0 <= e["metrics"]["test_accuracy"] <= 1
        assert e["workload"]["meta"]["flops_per_sample"] > 0
        assert "landmark_logreg" in e["workload"]["meta"]
        if e["config"]["threads"]["cores"] == 1:
            assert e["hardware"]["usable_cores"] == 1  # the 1-core hardware target


def test_build_resumes_without_remeasuring(tiny_kb, tmp_path):
    import shutil

    # A copy: a build of the shared folder itself would race the tiny_kb fixture of another
    # pytest-xdist worker (a second builder of a folder is refused).
    folder = shutil.copytree(tiny_kb, tmp_path / "kb")
    before = len(RecordStore(folder).entries())
    result = build_kb("tiny", out=folder, frameworks=["numpy"], configs_per_pair=6, repeats=1)
    assert result.measured == 0 and result.done_before == result.planned
    assert result.stopped_by == "complete"
    assert len(RecordStore(folder).entries()) == before


def test_provenance_names_machine_versions_dates_and_command(tiny_kb):
    provenance = json.loads((tiny_kb / "provenance.json").read_text())
    assert provenance["machines"][0]["cpu_model"] and provenance["machines"][0]["fingerprint"]
    assert provenance["sessions"][0]["machine"] == provenance["machines"][0]["fingerprint"]
    assert provenance["host_versions"]["numpy"]
    assert provenance["sessions"][0]["started_at"] and provenance["sessions"][0]["finished_at"]
    assert provenance["sessions"][0]["command"]
    assert provenance["measured_from"] <= provenance["measured_to"]
    assert provenance["records"] == len(RecordStore(tiny_kb).entries())
    assert "load_1m" in provenance["notes"]
    # How loaded the machine was when each run started: the noise its training time carries.
    assert all(e["kb"]["load_1m"] >= 0 for e in RecordStore(tiny_kb).entries())


def test_an_all_cores_build_measures_each_configuration_with_every_usable_core(tmp_path, monkeypatch):
    # As `dltune kb calibrate` builds on a machine with more than 2 cores (4 here, by
    # pretending: the runs oversubscribe this machine's cores, which only slows them).
    import dltune.config

    monkeypatch.setattr(dltune.config, "usable_cores", lambda: 4)
    result = build_kb("tiny", out=tmp_path / "kb", frameworks=["numpy"], configs_per_pair=1,
                      repeats=0, fresh=0, all_cores=True)
    entries = RecordStore(tmp_path / "kb").entries()
    wide = [e for e in entries if e["kb"]["kind"] == "all-cores"]
    filling = [e for e in entries if e["kb"]["kind"] == "space-filling"]
    assert result.failed == 0 and len(wide) == len(filling) == 3
    assert {e["config"]["threads"]["intra_op"] for e in wide} == {4}
    assert all(e["status"] == "ok" and e["metrics"]["train_time_s"] > 0 for e in wide)
    # The other runs are the plan's without all_cores (2 threads at most), under the same keys.
    plain = plan_suite("tiny", ["numpy"], 1, 0, 2, fresh=0)
    assert {e["kb"]["key"] for e in entries if e["kb"]["kind"] != "all-cores"} == {p.key for p in plain}


def test_budget_stops_before_the_next_run(tmp_path):
    result = build_kb("tiny", out=tmp_path / "kb", frameworks=["numpy"], time_budget_s=1e-6)
    assert result.stopped_by == "budget" and result.measured <= 1 < result.planned


def test_a_second_builder_on_the_same_folder_is_refused(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DltuneError, match="Another 'dltune kb build' is writing"):
            build_kb("tiny", out=folder, frameworks=["numpy"])


def test_torn_last_line_is_skipped(tiny_kb, tmp_path):
    copy = tmp_path / "kb"
    copy.mkdir()
    text = (tiny_kb / "records.jsonl").read_text()
    (copy / "records.jsonl").write_text(text + '{"status": "ok", "workl')
    assert len(RecordStore(copy).entries()) == len(text.splitlines())


def test_export_compresses_records_and_provenance(tiny_kb, tmp_path):
    summary = export_kb(tiny_kb, tmp_path)
    path = tmp_path / "tiny.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        assert sum(1 for _ in fh) == summary["records"]
    records = load_shipped_records(path)
    assert len(records) == summary["records"] and all(r.workload["meta"] for r in records)
    provenance = json.loads((tmp_path / "tiny_provenance.json").read_text())
    assert provenance["shipped_records"] == summary["records"]
    assert export_kb(tiny_kb, tmp_path) == summary and (tmp_path / "tiny.jsonl.gz").read_bytes() == path.read_bytes()


def test_build_rejects_unknown_framework(tmp_path):
    with pytest.raises(ParameterError, match=r"The 'frameworks' parameter must hold backends among .* Got 'caffe' instead."):
        build_kb("tiny", out=tmp_path, frameworks=["caffe"])


def test_a_busy_machine_is_warned_about_before_a_build():
    from dltune.kb import load_warning

    assert load_warning(0.9, 2) is None  # the build's own runs
    message = load_warning(3.04, 2)
    assert message.startswith("warning: the 1-minute load average is 3.0 on 2 usable cores")
    assert "kb.load_1m" in message
    assert load_warning(3.0, 8) is None


def test_calibrate_measures_the_calibration_suite_into_this_machines_folder(tiny_kb, tmp_path, monkeypatch):
    import dltune.kb._calibrate as calibrate
    from dltune.hardware import Hardware
    from dltune.kb import calibrate_machine, calibration_dir, calibration_records

    calls = []
    monkeypatch.setattr(calibrate, "build_kb", lambda *a, **kw: calls.append((a, kw)) or "result")
    assert calibrate_machine(["numpy"], time_budget_s=1800, full=True) == "result"
    [(args, kwargs)] = calls
    assert args == ("calibration", calibration_dir(), ["numpy"], 1800)
    assert kwargs["configs_per_pair"] == 4 and kwargs["repeats"] == 0 and kwargs["fresh"] == 0
    monkeypatch.undo()
    # The default folder is this machine's, under the cache, where fits look for records.
    here = Hardware.detect().to_dict()
    assert calibration_dir() == calibration_dir(here) != calibration_dir(dict(here, cpu_model="Other"))
    assert calibration_dir().parent.name == "kb" and calibration_dir().name.startswith("calibration-")
    record = RecordStore(tiny_kb).records()[:2]
    # In a cache of its own: the shared one's calibrations are what every fit beside it reads.
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path))
    before = len(calibration_records())
    folder = calibration_dir(dict(here, cpu_model="Test CPU"))
    assert folder.parent == tmp_path / "kb"
    for r in record:
        RecordStore(folder).append(r, {"suite": "calibration"})
    assert len(calibration_records()) == before + 2


def test_shipped_calibrations_are_exported_and_read_once(tiny_kb, tmp_path, monkeypatch):
    import dltune.measure._shipped as shipped
    from dltune.kb import calibration_records, export_calibration, shipped_calibration_paths

    folder = tmp_path / "calibration-0123456789"
    records = RecordStore(tiny_kb).records()[:3]
    for r in records:
        RecordStore(folder).append(r, {"suite": "calibration"})
    summary = export_calibration(folder, tmp_path / "ship")
    [path] = shipped_calibration_paths(tmp_path / "ship")
    assert path.name == "calibration-0123456789.jsonl.gz" and summary["records"] == 3
    assert json.loads((tmp_path / "ship" / "calibration-0123456789_provenance.json").read_text())["shipped_ok"] == 3
    assert shipped_calibration_paths(tmp_path / "nothing") == []
    # Shipped files are read with the cache's folders; a run found twice counts once.
    monkeypatch.setattr(shipped, "shipped_calibration_paths", lambda: [path, path])
    found = calibration_records()
    ids = [e["id"] for e in found]
    assert len(ids) == len(set(ids)) and {r.id for r in records} <= set(ids)
    # Marked as shipped: made on another machine of the kind, on another day.
    assert all(e["kb"]["shipped"] is True for e in found if e["id"] in {r.id for r in records})
    assert not {r.id for r in records} & {e["id"] for e in calibration_records(shipped=False)}
    # The same runs in this machine's cache too are this machine's: not marked.
    import dltune._paths as paths

    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path / "cache")
    (tmp_path / "cache" / "kb").mkdir(parents=True)
    (tmp_path / "cache" / "kb" / folder.name).symlink_to(folder)
    here = {e["id"]: e for e in calibration_records()}
    assert all(not here[r.id]["kb"].get("shipped") for r in records)


def test_calibration_files_are_parsed_again_only_when_they_change(tiny_kb, tmp_path, monkeypatch):
    """recommend reads the calibrations on every call (to notice a new one): an unchanged file
    is not parsed again, a changed one is, and what a caller does to the records it got does
    not reach the next caller."""
    import dltune._paths as paths
    import dltune.measure._shipped as shipped
    from dltune.kb import calibration_records

    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(shipped, "shipped_calibration_paths", lambda: [])
    folder = tmp_path / "cache" / "kb" / "calibration-0123456789"
    records = RecordStore(tiny_kb).records()[:3]
    for r in records[:2]:
        RecordStore(folder).append(r, {"suite": "calibration"})
    parsed = []
    real = shipped.read_jsonl
    monkeypatch.setattr(shipped, "read_jsonl", lambda path: parsed.append(path) or real(path))
    first = calibration_records()
    first[0]["id"] = "changed by a caller"
    second = calibration_records()
    assert len(parsed) == 1 and len(second) == 2
    assert {e["id"] for e in second} == {r.id for r in records[:2]}
    RecordStore(folder).append(records[2], {"suite": "calibration"})
    assert {e["id"] for e in calibration_records()} == {r.id for r in records} and len(parsed) == 2


def test_cli_export_calibration_needs_calibration_records(tmp_path, capsys):
    from dltune.cli import main

    assert main(["kb", "export", "--calibration", "--from", str(tmp_path), "--out", str(tmp_path / "o")]) != 0
    assert "holds no calibration records: run `dltune kb calibrate` first" in capsys.readouterr().err


def test_cli_export_fits_the_shipped_surrogates_only_when_it_ships_into_the_package(tiny_kb, tmp_path,
                                                                                    monkeypatch, capsys):
    import dltune.surrogate
    from dltune.cli import main

    fits = []
    monkeypatch.setattr(dltune.surrogate, "export_shipped_model",
                        lambda out=None: fits.append(out) or {"records": 1, "path": "x.npz", "bytes": 1})
    assert main(["kb", "export", "--from", str(tiny_kb), "--out", str(tmp_path)]) == 0
    assert fits == [] and "fitting the surrogates" not in capsys.readouterr().out
    assert main(["kb", "export", "--surrogates-only"]) == 0
    assert fits == [None] and "shipped the surrogates fitted on 1 records" in capsys.readouterr().out
    assert main(["kb", "export", "--surrogates-only", "--out", str(tmp_path)]) != 0
    assert "'--surrogates-only' takes no '--from', '--out' or '--calibration'" in capsys.readouterr().err


def test_wait_for_quiet_waits_out_other_work_then_measures_anyway():
    from dltune.kb._build import wait_for_quiet

    readings, slept = iter([95.0, 80.0, 12.0, 99.0]), []
    assert wait_for_quiet(60, 30.0, sample=lambda: next(readings), sleep=slept.append) == (12.0, 4.0)
    assert slept == [2.0, 2.0]
    # Busy throughout: gives up after max_wait_s and returns the last reading (kept in the record).
    slept.clear()
    assert wait_for_quiet(5, 30.0, sample=lambda: 100.0, sleep=slept.append) == (100.0, 5.0)
    assert slept == [2.0, 2.0, 1.0]
    # No waiting asked for (the API default), or a stop signal: one reading, no sleep.
    assert wait_for_quiet(0, 30.0, sample=lambda: 100.0, sleep=slept.append) == (100.0, 0.0)
    assert wait_for_quiet(60, 30.0, sample=lambda: 100.0, sleep=slept.append, stop={"stop": True}) == (100.0, 0.0)


def test_each_run_records_the_machines_other_work(tmp_path):
    result = build_kb("tiny", out=tmp_path / "kb", frameworks=["numpy"], configs_per_pair=1,
                      repeats=0, fresh=0)
    entries = RecordStore(tmp_path / "kb").entries()
    assert result.measured == len(entries) > 0
    assert all(e["kb"]["others_cpu_pct"] >= 0 and e["kb"]["waited_s"] == 0 for e in entries)
    # Linux reports steal time (a virtual machine's hypervisor serving other guests).
    assert all(0 <= e["kb"]["steal_pct"] <= 100 for e in entries)
    with pytest.raises(ParameterError, match="quiet_wait_s"):
        build_kb("tiny", out=tmp_path / "kb2", frameworks=["numpy"], quiet_wait_s=-1)


def test_cli_build_and_calibrate_wait_for_a_quiet_machine_by_default(monkeypatch, capsys):
    import dltune.kb
    from dltune.cli import main

    calls = []
    monkeypatch.setattr(dltune.kb, "build_kb", lambda *a, **kw: calls.append(kw) or _Result())
    monkeypatch.setattr(dltune.kb, "calibrate_machine", lambda *a, **kw: calls.append(kw) or _Result())
    assert main(["kb", "build", "--suite", "tiny", "--frameworks", "numpy", "--json"]) == 0
    assert main(["kb", "calibrate", "--frameworks", "numpy", "--quiet-wait", "0", "--json"]) == 0
    assert [c["quiet_wait_s"] for c in calls] == [300.0, 0.0]
    from dltune.kb._build import QUIET_CPU_PCT

    with pytest.raises(SystemExit):
        main(["kb", "build", "--help"])
    assert f"than {QUIET_CPU_PCT:g}% of a core" in " ".join(capsys.readouterr().out.split())


class _Result:
    measured = failed = done_before = 0
    planned, stopped_by, folder, machines = 15, "complete", "/tmp/calibration-x", 1

    def to_dict(self):
        return {"measured": 0}


def test_calibrate_on_more_than_two_cores_runs_all_cores_too_and_says_so(monkeypatch, capsys):
    import dltune.config
    import dltune.kb
    import dltune.kb._calibrate
    from dltune.cli import main

    monkeypatch.setattr(dltune.kb, "calibrate_machine", lambda *a, **kw: _Result())
    for cores, said in ((16, True), (2, False)):
        monkeypatch.setattr(dltune.config, "usable_cores", lambda n=cores: n)
        assert main(["kb", "calibrate", "--full", "--frameworks", "numpy", "--quiet-wait", "0"]) == 0
        out = capsys.readouterr().out
        assert "recommend now includes these runs" in out
        assert ("they ran 1, 2 and 16 threads: times at 16 threads are scaled by what 16 threads "
                "gained here" in out) == said
        # --plan lists the all-cores runs where there are more than 2 cores.
        assert main(["kb", "calibrate", "--full", "--frameworks", "numpy", "--plan", "--json"]) == 0
        kinds = [r["kind"] for r in json.loads(capsys.readouterr().out)]
        assert ("all-cores" in kinds) == said
    # calibrate_machine asks build_kb for them (build_kb adds them on more than 2 cores).
    seen = {}
    monkeypatch.setattr(dltune.kb._calibrate, "build_kb", lambda *a, **kw: seen.update(kw))
    dltune.kb._calibrate.calibrate_machine(["numpy"], out="unused", full=True)
    assert seen["all_cores"] is True


def test_a_folder_resumed_on_another_machine_keeps_both_machines(tmp_path, monkeypatch):
    from dltune.hardware import Hardware

    folder = tmp_path / "kb"
    folder.mkdir()
    # A folder written before builds named their machines: one "machine" for every session.
    first = Hardware.detect()
    old_machine = {**first.to_dict(), "fingerprint": "0123456789ab", "target": "old-box"}
    (folder / "provenance.json").write_text(json.dumps({
        "machine": old_machine, "sessions": [{"command": "dltune kb build", "started_at": "x"}]}))
    result = build_kb("tiny", out=folder, frameworks=["numpy"], time_budget_s=1e-6)
    assert result.machines == 2
    provenance = json.loads((folder / "provenance.json").read_text())
    assert [m["fingerprint"] for m in provenance["machines"]] == ["0123456789ab", first.fingerprint]
    assert [s["machine"] for s in provenance["sessions"]] == ["0123456789ab", first.fingerprint]
    assert "machine" not in provenance
    # Resumed on the same machine again: no third entry.
    build_kb("tiny", out=folder, frameworks=["numpy"], time_budget_s=1e-6)
    provenance = json.loads((folder / "provenance.json").read_text())
    assert len(provenance["machines"]) == 2 and len(provenance["sessions"]) == 3


def test_a_session_measuring_some_frameworks_keeps_the_folders_others_in_the_provenance(tmp_path):
    """``--frameworks tensorflow`` on a folder of four frameworks (TensorFlow's fresh runs
    measured again) must not make the provenance say the folder holds TensorFlow alone."""
    from dltune.kb._build import machine_plan

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "provenance.json").write_text(json.dumps({"frameworks": ["pytensor", "numpy"], "sessions": []}))
    build_kb("tiny", out=folder, frameworks=["numpy"], time_budget_s=1e-6)
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["frameworks"] == ["pytensor", "numpy"]
    assert provenance["planned_runs"] == len(machine_plan("tiny", ["pytensor", "numpy"], 24, 3, 3))
    assert provenance["planned_runs"] > len(machine_plan("tiny", ["numpy"], 24, 3, 3))
    assert provenance["sessions"][-1]["command"]


def test_steal_share_of_the_cpu_time_between_two_readings():
    from collections import namedtuple

    from dltune.kb._build import cpu_steal_pct

    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    before = Times(100, 0, 20, 500, 0, 0, 0, 10, 5, 0)
    # 40 s of CPU time passed (guest time is inside user time, not counted twice), 4 of it stolen.
    after = Times(120, 0, 25, 511, 0, 0, 0, 14, 9, 0)
    assert cpu_steal_pct(before, after) == pytest.approx(10.0)
    assert cpu_steal_pct(before, before) is None
    NoSteal = namedtuple("NoSteal", "user system idle")
    assert cpu_steal_pct(NoSteal(1, 1, 1), NoSteal(2, 2, 2)) is None


@pytest.mark.parametrize(("command", "says"), [
    (["calibrate", "--frameworks", ""], "The 'frameworks' parameter must name at least one value. Got ''."),
    (["build", "--suite", "tiny", "--frameworks", ""], "The 'frameworks' parameter must name at least one value. Got ''."),
    (["build", "--suite", "tiny", "--quiet-wait", "-1"],
     "The 'quiet_wait_s' parameter must be a float in [0.0, inf). Got -1.0 instead."),
    (["calibrate", "--frameworks", "numpy", "--quiet-wait", "-5"],
     "The 'quiet_wait_s' parameter must be a float in [0.0, inf). Got -5.0 instead."),
    (["build", "--suite", "tiny", "--frameworks", "numpy", "--out", "{file}"],
     "The 'out' parameter must be a folder. Got the file '{file}' instead."),
    (["calibrate", "--frameworks", "numpy", "--out", "{file}/sub"],
     "The 'out' parameter must be a folder that can be made. Got '{file}/sub': '{file}' is a file."),
])
def test_plan_refuses_what_the_build_refuses(tmp_path, monkeypatch, capsys, command, says):
    """`--plan` printed a plan (exit 0) for arguments the real run refuses: it now makes the
    build's own checks (plan_build), and so does the real run, in the same words."""
    from dltune.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "taken").write_text("a file")
    args = [a.replace("{file}", str(tmp_path / "taken")) for a in command]
    says = says.replace("{file}", str(tmp_path / "taken"))
    for plan in (["--plan"], ["--quiet-wait", "0"] if "--quiet-wait" not in args else []):
        assert main(["kb", *args, *plan]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"dltune kb {args[0]}: error: {says}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing made


def test_plan_makes_nothing_and_lists_what_the_build_measures(tmp_path, monkeypatch, capsys):
    from dltune.cli import main
    from dltune.kb._build import plan_build

    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "new" / "kb"
    assert main(["kb", "build", "--suite", "tiny", "--frameworks", "numpy", "--out", str(out),
                 "--configs-per-pair", "2", "--repeats", "0", "--fresh", "0", "--plan", "--json"]) == 0
    keys = [r["key"] for r in json.loads(capsys.readouterr().out)]
    assert not (tmp_path / "new").exists()
    planned = plan_build("tiny", out, ["numpy"], configs_per_pair=2, repeats=0, fresh=0)
    assert keys == [p.key for p in planned.runs] and planned.folder == out
    result = build_kb("tiny", out, ["numpy"], configs_per_pair=2, repeats=0, fresh=0)
    assert result.planned == len(keys) and {e["kb"]["key"] for e in RecordStore(out).entries()} == set(keys)
    with pytest.raises(ParameterError, match="The 'frameworks' parameter must name at least one backend"):
        build_kb("tiny", tmp_path / "other", [])  # measured torch and tensorflow unasked
    assert not (tmp_path / "other").exists()


def test_a_build_of_some_models_measures_the_whole_suites_runs_of_those_and_keeps_the_rest_planned(
        tmp_path, monkeypatch, capsys):
    """``--models text_lstm`` thickens one family: its runs are the whole suite's (same keys, so
    either build resumes the other), and the provenance still plans and lists every workload."""
    from dltune.cli import main
    from dltune.kb._build import machine_plan, plan_build

    whole = plan_build("families", tmp_path / "kb", ["numpy"], configs_per_pair=3, repeats=1, fresh=1)
    some = plan_build("families", tmp_path / "kb", ["numpy"], configs_per_pair=3, repeats=1, fresh=1,
                      models=["text_lstm", "resnet8"])
    assert {p.workload.model for p in some.runs} == {"text_lstm", "resnet8"}
    assert [p.key for p in some.runs] == [p.key for p in whole.runs if p.workload.model in ("text_lstm", "resnet8")]
    build_kb("families", tmp_path / "kb", ["numpy"], time_budget_s=1e-6, configs_per_pair=3, repeats=1, fresh=1,
             models=["text_lstm"])
    provenance = json.loads((tmp_path / "kb" / "provenance.json").read_text())
    assert provenance["planned_runs"] == len(machine_plan("families", ["numpy"], 3, 1, 1)) == len(whole.runs)
    assert {w["model"] for w in provenance["workloads"]} == {w.model for w in SUITES["families"]}
    monkeypatch.setenv("DLTUNE_CACHE", str(tmp_path / "cache"))
    for given, says in (("text_lsm", "The 'models' parameter must be one of {'tabular_mlp', 'mlp', 'text_conv', "
                                     "'text_lstm', 'resnet8', 'lenet', 'cifar_quick'}. Got 'text_lsm' instead."),
                        (",", "The 'models' parameter must name at least one model of the 'families' suite. Got none.")):
        assert main(["kb", "build", "--suite", "families", "--frameworks", "numpy", "--models", given,
                     "--out", str(tmp_path / "other"), "--plan"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"dltune kb build: error: {says}"]
    assert not (tmp_path / "other").exists()
