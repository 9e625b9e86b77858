"""Findings say only what the tables support: ties are named together, never ranked; a finding
about "every framework" takes two; times name the load they were measured under; a framework a
view lacks is named under its table."""

from __future__ import annotations

from dltune.config import ThreadConfig, default_preset
from dltune.measure import Measurement
from dltune.report import Analysis, records_frame
from dltune.report._build import _name_absent
from dltune.report._model import Section
from dltune.study import StudyRecord, preset_config

DIGITS = {"name": "digits-lenet", "dataset": "digits", "model": "lenet",
          "meta": {"n_train": 300, "n_test": 360, "param_count": 131080},
          "model_spec": {"input_shape": [1, 8, 8], "num_classes": 10}}


def _run(fw, preset, phases, acc, time, *, load=None, cpu=150.0, mem=300.0, **change) -> StudyRecord:
    config = preset_config(preset, fw).replace(epochs=1, **change)
    metrics = {"train_time_s": time, "test_time_s": 0.01, "test_accuracy": acc / 100,
               "cpu_percent_mean": cpu, "peak_rss_mb": mem, "epochs_run": 1, "load_1m": load}
    m = Measurement(status="ok", workload=DIGITS, config=config.to_dict(),
                    hardware={"cpu_model": "Test CPU", "logical_cores": 2, "usable_cores": 2},
                    versions={fw: "1.0"}, metrics=metrics)
    return StudyRecord(m, list(phases), key=f"{fw}-{preset}-{change}", label=f"{fw} with {preset}",
                       source="test")


def _findings(records) -> dict[str, str]:
    return {f.topic: f.text for f in Analysis(records_frame(records), "mnist", "digits").findings()}


def _defaults(times, accs, **kw) -> list[StudyRecord]:
    return [_run(fw, default_preset(fw), ["defaults"], accs[fw], times[fw], **kw) for fw in times]


def test_same_accuracy_under_every_preset_names_each_framework_once():
    """'differ by at most 0.0 points (the torch preset: 53.3 % for jax, 53.3 % for jax)'."""
    acc = {"caffe": 26.9, "tensorflow": 26.1, "theano": 21.7, "torch": 53.3}
    recs = [_run(fw, p, ["cross_defaults"] + (["defaults"] if p == fw else []), a, 0.1)
            for fw in ("tensorflow", "torch") for p, a in acc.items()]
    text = _findings(recs)["same_settings"]
    assert "reached the same accuracy under every preset" in text, text
    assert "53.3 % for tensorflow and torch" in text and "0.0 points" not in text, text
    assert "against 27.2 points between the frameworks' own defaults" in text, text


def test_a_small_same_settings_spread_names_no_cause_unless_the_defaults_differ_twice_as_much():
    recs = [_run("tensorflow", "tensorflow", ["cross_defaults", "defaults"], 90.0, 1.0),
            _run("torch", "tensorflow", ["cross_defaults"], 80.0, 1.0),
            _run("torch", "torch", ["cross_defaults", "defaults"], 97.0, 1.0),
            _run("tensorflow", "torch", ["cross_defaults"], 93.0, 1.0)]
    text = _findings(recs)["same_settings"]
    assert "nearly agree" not in text and "come from the default settings" not in text, text
    assert text.endswith("(the tensorflow preset: 80.0 % for torch, 90.0 % for tensorflow), "
                         "and by 7.0 points with their own defaults."), text


def test_times_a_ratio_of_1_0x_apart_are_a_tie_not_a_ranking():
    """'jax trained fastest (0.075 s) and torch slowest (0.076 s), 1.0x longer'."""
    found = _findings(_defaults({"tensorflow": 0.075, "torch": 0.076},
                                {"tensorflow": 26.9, "torch": 53.3}))
    assert "tensorflow and torch trained in the same time (0.075–0.076 s)" in found["fastest"]
    assert "fastest" not in found["fastest"] and "1.0x" not in found["fastest"]
    assert "dominance" not in found  # no fastest, so no trade-off between fastest and most accurate


def test_tied_frameworks_are_named_together():
    found = _findings(_defaults({"tensorflow": 1.0, "theano": 1.01, "torch": 5.0},
                                {"tensorflow": 90.04, "theano": 80.0, "torch": 89.96}))
    assert "tensorflow and theano trained fastest (1.00, 1.01 s) and torch slowest (5.00 s)" \
        in found["fastest"], found["fastest"]
    assert found["most_accurate"].startswith("tensorflow and torch were the most accurate with their "
                                             "own defaults at 1 epoch each (90.0 %), theano the least "
                                             "(80.0 %)"), found["most_accurate"]
    assert found["dominance"].startswith("tensorflow was both among the fastest and among the most "
                                         "accurate here (1.00 s, 90.0 %)"), found["dominance"]


def test_a_framework_whose_own_defaults_are_caffes_is_said_to_be():
    found = _findings(_defaults({"jax": 1.0, "torch": 2.0}, {"jax": 80.0, "torch": 90.0}))
    assert found["fastest"].startswith("With their own defaults at 1 epoch each (for jax, which has none "
                                       "published: the caffe preset), jax trained fastest"), found["fastest"]


def test_one_framework_makes_no_finding_about_every_framework():
    """'The mxnet preset was (jointly) the best for every framework here (jax 58.9 %)'."""
    recs = [_run("torch", p, ["cross_defaults"], a, 1.0) for p, a in (("caffe", 50.0), ("torch", 60.0))]
    recs += [_run("torch", "torch", ["sweep:batch_size"], 60.0, t, batch_size=b)
             for b, t in ((10, 4.0), (100, 1.0))]
    found = _findings(recs)
    assert "transfer" not in found and "same_settings" not in found
    assert found["batch_size"].startswith("Batch size moved training time for torch:"), found["batch_size"]


def test_findings_on_time_name_the_load_they_were_measured_under():
    recs = _defaults({"tensorflow": 1.0, "torch": 3.0}, {"tensorflow": 80.0, "torch": 90.0})
    recs[0].measurement.metrics["load_1m"], recs[1].measurement.metrics["load_1m"] = 1.04, 1.83
    found = _findings(recs)
    assert found["fastest"].endswith("3.0x longer, under 1-minute load 1.0–1.8 on 2 cores."), found["fastest"]
    assert "most_accurate" in found and "load" not in found["most_accurate"]


def test_a_framework_a_view_lacks_is_named_under_its_table():
    recs = _defaults({"tensorflow": 1.0, "torch": 3.0}, {"tensorflow": 80.0, "torch": 90.0})
    recs += [_run("torch", "torch", ["threads"], 90.0, t, threads=ThreadConfig(intra_op=n))
             for n, t in ((1, 3.0), (2, 2.0))]
    a = Analysis(records_frame(recs), "mnist", "digits")
    table = a.threads_table()
    _name_absent(a, [Section("Threads", [table])])
    assert [row[0] for row in table.rows] == ["torch"]
    assert table.note.endswith("Not in this table: tensorflow (no successful run of this view)."), table.note


def test_published_figures_say_which_frameworks_have_none():
    recs = _defaults({"jax": 1.0, "torch": 3.0}, {"jax": 80.0, "torch": 90.0})
    note = Analysis(records_frame(recs), "mnist", "mnist").comparison_table().note
    assert "jax: no figures in the original study, so none are shown." in note, note


def test_one_finding_where_tuning_brought_every_framework_to_the_same_accuracy():
    recs = _defaults({"tensorflow": 1.0, "torch": 3.0}, {"tensorflow": 80.0, "torch": 90.0})
    recs += [_run(fw, default_preset(fw), ["tune"], acc, 2.0, learning_rate=lr)
             for fw in ("tensorflow", "torch") for acc, lr in ((95.0, 0.02), (93.0, 0.04))]
    (text,) = [f.text for f in Analysis(records_frame(recs), "mnist", "digits").findings()
               if f.topic == "tuning"]
    assert text.startswith("2 tuning trials per framework brought every framework to 95.0 %"), text
    assert text.endswith("from 80.0–90.0 % with their own defaults: +5.0 points for torch to +15.0 "
                         "for tensorflow."), text


def test_the_knowledge_base_table_names_a_framework_measured_here_that_it_lacks():
    from dltune.report._data import kb_entries
    from dltune.report._runs import kb_table

    recs = _defaults({"numpy": 1.0, "torch": 3.0}, {"numpy": 80.0, "torch": 90.0})
    table = kb_table(kb_entries([DIGITS])["digits-lenet"])
    _name_absent(Analysis(records_frame(recs), "mnist", "digits"), [Section("Knowledge base", [table])])
    assert "torch" in {row[0] for row in table.rows}
    assert table.note.endswith("Not in this table: numpy (the shipped knowledge base has no run of it)."), \
        table.note
