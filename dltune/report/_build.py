"""``build_report`` (records -> Report) and ``write_report`` (source -> HTML or Markdown file)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_out_file
from dltune.backends._registry import is_retired
from dltune.measure._store import StudyRecord
from dltune.report._analysis import Analysis
from dltune.report._data import load_study_records, records_frame
from dltune.report._figures import make_figures
from dltune.report._model import Figure, Finding, Report, Section, Table, names
from dltune.report._runs import (
    bench_findings,
    bench_table,
    kb_table,
    load_note,
    repeat_findings,
    repeat_table,
)

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
    lines.append(f"{len(ms)} run{'s' if len(ms) != 1 else ''} ({ok} ok, {len(ms) - ok} failed)" + (
        "; by phase: " + ", ".join(f"{k} {v}" for k, v in phases.items()) if phases else "") + ".")
    starts = sorted(m.started_at for m in ms if m.started_at)
    if starts:
        lines.append(f"Measured between {starts[0][:16].replace('T', ' ')} and "
                     f"{starts[-1][:16].replace('T', ' ')} UTC.")
    return lines


def _cap_notes(a: Analysis) -> list[str]:
    from dltune.study import preset_config

    capped: dict[int, list[str]] = {}
    for fw, r in a.defaults().iterrows():
        try:
            full = preset_config(r["preset"], fw, a.dataset_kind).epochs
        except Exception:  # noqa: BLE001 - unknown preset: nothing to compare with
            continue
        if full > r["epochs"]:
            capped.setdefault(int(r["epochs"]), []).append(f"{fw} {full}")
    notes = [f"Epochs capped at {n}: the own presets ask for more ({', '.join(asked)})."
             for n, asked in sorted(capped.items())]
    if "mxnet" in set(a.ok["preset"].dropna()):
        notes.append("The 'mxnet' preset is MXNet's Gluon MNIST example defaults (SGD momentum 0.9, "
                     "lr 0.1, batch 100, 10 epochs); the original study published none for MXNet.")
    return notes


# Each section the data may hold, by what it shows when it is missing ("Not measured: ...").
_MISSING = {
    "Framework comparison": "each framework with its own defaults",
    "Benchmark runs": "benchmark runs ('dltune bench')",
    "Every framework with every framework's defaults": "every framework with every framework's "
                                                        "defaults",
    "Hyper-parameter sweeps": "hyper-parameter sweeps",
    "Threads and parallel libraries": "thread settings",
    "Resource use": "resource use against hyper-parameters",
    "Tuning": "tuning",
}


def _sections(a: Analysis, kb: list[dict[str, Any]]) -> list[Section]:
    """The sections of one workload, each with what the data allows (perhaps nothing)."""
    figs = make_figures(a)

    def items(*things):
        return [t for t in things if t is not None]

    d = a.defaults()
    return [
        Section("Framework comparison", items(
            a.comparison_table(), *_cap_notes(a), figs.get("train_time"), figs.get("test_time"),
            figs.get("accuracy")) if not d.empty else []),
        Section("Benchmark runs", items(bench_table(a))),
        Section("Every framework with every framework's defaults", items(
            a.cross_table(), figs.get("cross_defaults"))),
        Section("Hyper-parameter sweeps", items(
            a.sweep_points_table("batch_size"), figs.get("sweep_batch_size"),
            a.sweep_points_table("learning_rate"), figs.get("sweep_learning_rate"),
            a.sweep_points_table("epochs"), figs.get("sweep_epochs"))),
        Section("Threads and parallel libraries", items(a.threads_table(), figs.get("threads"))),
        Section("Resource use", items(figs.get("resources_batch_size"), a.correlation_table())),
        Section("Tuning", items(a.tuning_table(), figs.get("tuning"), repeat_table(a))),
        Section("Knowledge base", items(kb_table(kb))),
        Section("Accuracy / training-time trade-off", items(figs.get("pareto"), a.pareto_table())),
    ]


# The tables with a row per framework, by why one may lack a framework measured here; the
# lacking frameworks are named under the table, so a missing row is never silent.
_PER_FRAMEWORK = {**dict.fromkeys(("comparison", "cross_defaults", "sweep_batch_size",
                                   "sweep_learning_rate", "sweep_epochs", "threads", "correlation",
                                   "tuning"), "no successful run of this view"),
                  "kb": "the shipped knowledge base has no run of it"}


def _name_absent(a: Analysis, sections: list[Section]) -> None:
    for table in (i for s in sections for i in s.items if isinstance(i, Table)):
        absent = [fw for fw in a.frameworks if fw not in {row[0] for row in table.rows}]
        if table.name in _PER_FRAMEWORK and absent:
            line = f"Not in this table: {names(absent)} ({_PER_FRAMEWORK[table.name]})."
            table.note = f"{table.note} {line}" if table.note else line


def _analysis(records: list[StudyRecord]) -> Analysis:
    from dltune.data import dataset_kind

    w = records[0].measurement.workload
    spec = w.get("model_spec") or {}
    return Analysis(records_frame(records), dataset_kind(spec.get("input_shape", [1])),
                    w.get("dataset"))


def _workload_part(records: list[StudyRecord], kb: list[dict[str, Any]]):
    """One workload's meta lines, findings, sections (those with data) and what was not measured."""
    a = _analysis(records)
    sections, missing = [], []
    if not a.ok.empty:
        sections = [s for s in _sections(a, kb) if any(isinstance(i, (Table, Figure)) for i in s.items)]
        _name_absent(a, sections)
        shown = {s.title for s in sections}
        missing = [what for title, what in _MISSING.items() if title not in shown]
    failed = a.df[~a.df["ok"]]
    if not failed.empty:
        sections.append(Section("Failed runs", [Table(
            "failed", "Runs that did not finish (kept, never hidden)",
            ["framework", "configuration", "reason"],
            [[r["framework"], r["label"] or "", (r["error"] or r["status"])[:160]]
             for _, r in failed.iterrows()])]))
    meta = _meta(records)
    note = load_note(a)
    if note:
        meta.append(note)
    findings = a.findings() + bench_findings(a) + repeat_findings(a) if not a.ok.empty else []
    return meta, findings, sections, missing


def _prefixed(name: str, part):
    """``part``'s titles, names and findings led by the workload's name (a report of several)."""
    meta, findings, sections, missing = part
    for section in sections:
        section.title = f"{name}: {section.title}"
        for item in section.items:
            if isinstance(item, (Table, Figure)):
                item.name = f"{name}-{item.name}"
    for finding in findings:
        finding.text = f"{name}: {finding.text}"
    return meta, findings, sections, missing


def build_report(records: list[StudyRecord], knowledge_base: bool = True) -> Report:
    """Tables, figures and findings from ``records``, workload by workload; a section without
    data is left out, and one line says what was not measured.

    With ``knowledge_base``, the shipped knowledge base's runs of each workload are shown beside
    (in a section of their own, named as measured elsewhere).
    """
    from dltune.report._data import kb_entries

    if not records:
        raise ParameterError("The 'records' parameter must hold at least one record. Got none.")
    by_workload: dict[str, list[StudyRecord]] = {}
    for r in sorted(records, key=lambda r: str(r.measurement.workload.get("name"))):
        by_workload.setdefault(str(r.measurement.workload.get("name")), []).append(r)
    if not any(r.measurement.ok for r in records):
        raise ParameterError(f"None of the {len(records)} records is a successful run; nothing to report.")
    usable = by_workload  # a workload whose runs all failed still lists them
    kb = kb_entries([recs[0].measurement.workload for recs in usable.values()]) if knowledge_base else {}
    meta: list[str] = []
    findings: list[Finding] = []
    sections: list[Section] = []
    missing: list[str] = []
    study_missing = False
    for name, recs in usable.items():
        part = _workload_part(recs, kb.get(name, []))
        if len(usable) > 1:
            part = _prefixed(name, part)
        meta += part[0]
        findings += part[1]
        sections += part[2]
        study_missing |= any(what != _MISSING["Benchmark runs"] for what in part[3])
        if part[3]:
            missing.append(("" if len(usable) == 1 else f"for {name}, ") + ", ".join(part[3]))
    listed = {r.measurement.framework for r in records} | {
        e["config"]["framework"] for entries in kb.values() for e in entries}
    retired = sorted(fw for fw in listed if is_retired(fw))
    if retired:
        meta.append(f"Retired (no longer maintained), shown for comparison: {', '.join(retired)}.")
    if missing:
        # 'dltune study' measures every view but benchmark runs, which name their own command.
        meta.append("Not measured: " + "; ".join(missing)
                    + (" ('dltune study' measures the study's views)." if study_missing else "."))
    return Report(f"dltune report: {', '.join(usable)}", meta, findings, sections)


def write_report(
    storage: str | None = None,
    records: str | Path | None = None,
    out: str | Path | None = None,
    format: str | None = None,
    workload: str | None = None,
) -> Path:
    """Load records (:func:`load_study_records`: every workload, or ``workload`` only), build
    the report and write it; returns the file written.

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
