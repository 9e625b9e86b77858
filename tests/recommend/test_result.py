"""How a recommendation reads: the short summary, ``--explain``, ``repr`` and ``_repr_html_``,
the ``Interval`` type, and the retired frameworks kept out of the default candidates."""

from __future__ import annotations

import json

import pytest

from dltune import Interval
from dltune.backends._registry import is_retired
from dltune.config import ThreadConfig, TrainConfig
from dltune.recommend import Candidate, Recommendation, recommend
from dltune.recommend._candidates import default_frameworks, retired_frameworks
from dltune.recommend._format import MAX_LINES, MAX_WIDTH

ALIEN = {"cpu_model": "Neoverse-V2 (ARM)", "logical_cores": 72, "memory_gb": 480.0}


def _config(framework: str, lr: float = 0.00123456, preset: str | None = None) -> TrainConfig:
    if preset:
        return TrainConfig.preset(preset, "mnist", framework=framework)
    return TrainConfig(framework=framework, optimizer="momentum", learning_rate=lr, momentum=0.9,
                       batch_size=128, epochs=12, threads=ThreadConfig.uniform(64))


def _candidate(framework: str, **kw) -> Candidate:
    return Candidate(_config(framework, **kw), (0.9512345, 0.9323456, 0.9798765),
                     (1234.5678, 456.789, 98765.4321), (3456.7, 1234.5, 9876.5), measured_runs=2)


def _recommendation(alternatives: int = 2, **fields) -> Recommendation:
    best = _candidate("tensorflow")
    values = dict(
        workload="synthetic[n=100000,64x64x3,k=1000,d=0.5]", model="cifar_quick", framework="tensorflow",
        config=best.config, predicted={"accuracy": best.accuracy, "train_time_s": best.train_time_s,
                                       "peak_rss_mb": best.peak_rss_mb},
        objective="balanced", alternatives=[_candidate("tensorflow", lr=0.1 * i) for i in range(1, alternatives + 1)],
        reason="Because. " * 200, out_of_distribution=True, ood_reasons=["a reason " * 30] * 4,
        nearest_workloads=[("digits-lenet", 0.5)] * 3, hardware_target="neoverse-v2-(arm)-72of72c",
        n_candidates=1656, kb_records=6524, constraints={"max_train_time_s": 3600.0, "min_accuracy": 0.9},
        interval_notes=["a note " * 30], measured_runs=2,
        defaults=[_candidate(f, preset=p) for f, p in (("tensorflow", "tensorflow"), ("torch", "torch"),
                                                       ("mxnet", "caffe"), ("theano", "theano"))],
        frameworks=["tensorflow", "torch"], retired=_candidate("theano"),
        storage="postgresql://me:***@db.example.org:5432/dltune",
        caveat="times estimated from AMD EPYC [avx2] (2 cores): `dltune kb calibrate` (about 5 min) measures this one",
    )
    values.update(fields)
    return Recommendation(**values)


def test_interval_is_a_named_tuple_with_a_short_repr():
    interval = Interval(0.962, 0.9514, 0.97)
    point, low, high = interval
    assert (point, low, high) == (interval.point, interval.low, interval.high) == (0.962, 0.9514, 0.97)
    assert repr(interval) == str(interval) == "0.962 [0.951, 0.970]"
    assert repr(Interval(327.44, 314.0, 1424.3)) == "327.4 [314, 1424]"
    assert json.dumps(interval) == "[0.962, 0.9514, 0.97]"


def test_every_interval_a_recommendation_returns_is_an_interval():
    rec = _recommendation()
    for c in [rec, *rec.alternatives, *rec.defaults, rec.retired]:
        metrics = c.predicted.values() if c is rec else (c.accuracy, c.train_time_s, c.peak_rss_mb)
        assert all(type(v) is Interval for v in metrics)
    # JSON as before: lists.
    assert rec.to_dict()["predicted"]["accuracy"] == [0.9512345, 0.9323456, 0.9798765]
    assert rec.to_dict()["alternatives"][0]["train_time_s"] == [1234.5678, 456.789, 98765.4321]


@pytest.mark.parametrize("alternatives", [0, 2, 99])
def test_the_summary_fits_a_screen(alternatives):
    rec = _recommendation(alternatives)
    lines = rec.summary(more="--explain").splitlines()
    assert len(lines) <= MAX_LINES and max(map(len, lines)) <= MAX_WIDTH, "\n".join(lines)
    text = "\n".join(lines)
    assert "pick: tensorflow:" in lines[1] and "predicted accuracy 95.1% [93.2, 98.0]" in lines[2]
    assert "note: times estimated from AMD EPYC" in text and "OUT OF" not in text
    assert "storage: postgresql://me:***@db.example.org:5432/dltune" in text
    assert "for comparison: theano (retired):" in text and "  constraints: max_train_time_s 3600," in text
    assert "own default presets: tensorflow 95.1% in 1,235 s; torch 95.1% in 1,235 s; 2 more (--explain)" in text
    assert "own defaults of mxnet (retired) (caffe's):" in rec.details()
    if alternatives == 99:
        assert text.count("\n  or tensorflow:") < 99 and "more alternatives (--explain)" in text
    assert str(rec) == rec.summary()
    assert len(rec.details()) > len(text) and rec.reason.split()[0] in rec.details()


def test_repr_is_short_and_html_is_a_table():
    rec = _recommendation(99)
    assert len(repr(rec)) < 600 and repr(rec).startswith("Recommendation(")
    assert "accuracy=0.951 [0.932, 0.980]" in repr(rec)
    assert len(repr(rec.alternatives[0])) < 600 and repr(rec.alternatives[0]).startswith("Candidate(")
    html = rec._repr_html_()
    assert html.startswith("<table>") and html.endswith("</table>")
    assert html.count("<tr>") == 1 + 1 + 99 + 4 + 1  # header, pick, alternatives, defaults, retired
    assert "theano (retired)" in html
    assert rec.alternatives[0]._repr_html_().startswith("<table>")


def test_retired_frameworks_are_never_default_candidates():
    predictable = ["mxnet", "numpy", "pytensor", "tensorflow", "theano", "torch"]
    assert default_frameworks(predictable, here=False) == ["tensorflow", "torch"]
    assert retired_frameworks(predictable) == ["mxnet", "theano"]
    # A knowledge base of one's own that measured none of the defaults: its maintained frameworks.
    assert default_frameworks(["numpy", "theano"], here=False) == ["numpy"]
    assert default_frameworks(["theano"], here=False) == []


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A working folder without a storage: the shipped knowledge base (and this machine's
    calibration where the cache holds one)."""
    from dltune.surrogate import clear_memory_cache

    folder = tmp_path_factory.mktemp("fresh")
    patch = pytest.MonkeyPatch()
    patch.delenv("DLTUNE_STORAGE", raising=False)
    patch.chdir(folder)
    clear_memory_cache()
    yield folder
    clear_memory_cache()
    patch.undo()


@pytest.mark.parametrize("model, hardware", [("lenet", None), ("mlp", None), ("mlp", ALIEN)])
def test_the_default_pick_is_never_retired(fresh, model, hardware):
    rec = recommend("digits", hardware, model=model)
    assert rec.frameworks and not any(map(is_retired, rec.frameworks))
    shown = [rec, *rec.alternatives, *rec.defaults]
    assert not any(is_retired(c.config.framework) for c in shown)
    # The retired frameworks' best is still shown, for comparison, labelled so.
    assert rec.retired is not None and is_retired(rec.retired.config.framework)
    assert f"for comparison: {rec.retired.config.framework} (retired):" in str(rec)
    if hardware is not None:  # another machine's: candidates whether or not installed here
        legacy = recommend("digits", hardware, model=model, include_legacy=True)
        assert {"mxnet", "theano"} <= set(legacy.frameworks) and legacy.retired is None
        assert {d.config.framework for d in legacy.defaults} == set(legacy.frameworks)


def test_cli_answers_in_a_screen_and_explains_on_request(fresh, capsys):
    from dltune.cli import main

    assert main(["recommend", "--workload", "digits"]) == 0
    out = capsys.readouterr().out
    lines = out.rstrip("\n").splitlines()
    assert len(lines) <= MAX_LINES and max(map(len, lines)) <= MAX_WIDTH, out
    assert lines[-1].startswith("  storage: none read") and lines[1].endswith(" (--explain: why)")
    assert main(["recommend", "--workload", "digits", "--explain"]) == 0
    explained = capsys.readouterr().out
    assert len(explained) > 2 * len(out) and "Accuracy is ranked by the low end" in explained
    assert main(["recommend", "--workload", "digits", "--model", "mlp", "--frameworks", "theano"]) == 0
    theano = capsys.readouterr().out
    assert "pick: theano (retired):" in theano


def test_old_constraint_flags_are_refused_with_the_new_name(capsys):
    from dltune.cli import main

    with pytest.raises(SystemExit) as info:
        main(["recommend", "--max-memory", "100"])
    assert info.value.code == 2 and "'--max-memory-mb'" in capsys.readouterr().err
