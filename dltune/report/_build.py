"""``build_report`` (records -> Report) and ``write_report`` (source -> HTML or Markdown file)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_out_file
from dltune.measure._store import StudyRecord
from dltune.report._analysis import Analysis
from dltune.report._data import load_study_records, records_frame
from dltune.report._figures import make_figures
from dltune.report._model import Report, Section, Table

__all__ = ["build_report", "write_report"]


def _meta(records: list[StudyRecord]) -> list[str]:
    ms = [r.measurement for r in records]
    first = ms[0]
    w = first.workload
    meta = w.get("meta") or {}
    spec = w.get("model_spec") or {}
    hw = next((m.hardware for m in ms if m.hardware), {})
    lines = [
        f"Workload: {w.get('name')} — data set {w.get('dataset')} "
        f"({meta.get('n_train', '?')} training / {meta.get('n_test', '?')} test samples, input "
        f"{'x'.join(str(s) for s in spec.get('input_shape', [])) or '?'}, "
        f"{spec.get('num_classes', meta.get('num_classes', '?'))} classes), model {w.get('model')} "
        f"({meta.get('param_count', '?')} parameters).",
        "Hardware: " + ", ".join(str(x) for x in (
            hw.get("cpu_model"), f"{hw.get('logical_cores', '?')} logical cores",
            f"{hw.get('usable_cores', '?')} usable", f"target {hw.get('target', '?')}") if x),
    ]
    versions: dict[str, str] = {}
    for m in ms:
        fw = m.framework
        v = (m.versions or {}).get(fw) or (m.versions or {}).get("framework")
        if v and fw not in versions:
            versions[fw] = str(v)
    if versions:
        lines.append("Framework versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    phases = Counter(p for r in records for p in r.phases)
    ok = sum(m.ok for m in ms)
    lines.append(f"{len(ms)} runs ({ok} ok, {len(ms) - ok} failed)" + (
        "; by phase: " + ", ".join(f"{k} {v}" for k, v in phases.items()) if phases else "") + ".")
    starts = sorted(m.started_at for m in ms if m.started_at)
    if starts:
        lines.append(f"Measured between {starts[0][:16].replace('T', ' ')} and "
                     f"{starts[-1][:16].replace('T', ' ')} UTC.")
    return lines


def _cap_notes(a: Analysis) -> list[str]:
    from dltune.study import preset_config

    notes = []
    d = a.defaults()
    for fw, r in d.iterrows():
        try:
            full = preset_config(r["preset"], fw, a.dataset_kind).epochs
        except Exception:  # noqa: BLE001 - unknown preset: nothing to compare with
            continue
        if full > r["epochs"]:
            notes.append(f"{fw}'s own preset ({r['preset']}) asks for {full} epochs; this study capped "
                         f"it at {int(r['epochs'])} to fit its time budget.")
    if "mxnet" in set(a.ok["preset"].dropna()):
        notes.append("The 'mxnet' preset is MXNet's Gluon MNIST example defaults (SGD momentum 0.9, "
                     "lr 0.1, batch 100, 10 epochs); the original study published none for MXNet.")
    return notes


def build_report(records: list[StudyRecord]) -> Report:
    """Tables, figures and findings from ``records`` (one workload)."""
    from dltune.data import dataset_kind

    if not records:
        raise ParameterError("The 'records' parameter must hold at least one record. Got none.")
    frame = records_frame(records)
    spec = records[0].measurement.workload.get("model_spec") or {}
    kind = dataset_kind(spec.get("input_shape", [1])[0])
    a = Analysis(frame, kind)
    if a.ok.empty:
        raise ParameterError(f"None of the {len(records)} records is a successful run; nothing to report.")
    figs = make_figures(a)

    def items(*things):
        return [t for t in things if t is not None]

    def fig(name: str, missing: str):
        return figs.get(name) or missing

    sections = [
        Section("Framework comparison", items(
            a.comparison_table(), *_cap_notes(a),
            fig("train_time", "No defaults records."), fig("test_time", "No defaults records."),
            fig("accuracy", "No defaults records."))),
        Section("Every framework with every framework's defaults", items(
            a.cross_table(), fig("cross_defaults", "No cross-defaults records."))),
        Section("Hyper-parameter sweeps", items(
            a.sweep_table(),
            a.sweep_points_table("batch_size"), fig("sweep_batch_size", "No batch-size sweep."),
            a.sweep_points_table("learning_rate"), fig("sweep_learning_rate", "No learning-rate sweep."),
            a.sweep_points_table("epochs"), fig("sweep_epochs", "No epochs sweep."))),
        Section("Threads and parallel libraries", items(
            a.threads_table(), fig("threads", "No thread-sweep records."))),
        Section("Resource use", items(
            fig("resources_batch_size", "No batch-size sweep."), a.correlation_table())),
        Section("Accuracy / training-time trade-off", items(fig("pareto", "No records."), a.pareto_table())),
        Section("Tuning", items(a.tuning_table(), fig("tuning", "No tuning trials in this source."))),
    ]
    failed = frame[~frame["ok"]]
    if not failed.empty:
        sections.append(Section("Failed runs", [Table(
            "failed", "Runs that did not finish (kept, never hidden)",
            ["framework", "configuration", "reason"],
            [[r["framework"], r["label"] or "", (r["error"] or r["status"])[:160]]
             for _, r in failed.iterrows()])]))
    title = f"dltune study report: {records[0].measurement.workload.get('name')}"
    return Report(title, _meta(records), a.findings(), sections)


def write_report(
    storage: str | None = None,
    records: str | Path | None = None,
    out: str | Path | None = None,
    format: str | None = None,
    workload: str | None = None,
) -> Path:
    """Load records, build the report and write it; returns the file written.

    ``format`` defaults to the suffix of ``out`` (``.md`` -> Markdown, else HTML). Markdown
    writes its PNGs into the same folder.
    """
    from dltune.report._render import render_html, render_markdown

    if format is None:
        format = "md" if out is not None and str(out).endswith(".md") else "html"
    check_choice("format", format, ["html", "md"])
    path = check_out_file("out", out if out is not None else f"report.{format}")
    report = build_report(load_study_records(storage=storage, records=records, workload=workload))
    if format == "html":
        path.write_text(render_html(report), encoding="utf-8")
    else:
        path.write_text(render_markdown(report, path.parent), encoding="utf-8")
    return path
