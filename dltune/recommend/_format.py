"""How a recommendation reads: the short summary (at most :data:`MAX_LINES` lines of at most
:data:`MAX_WIDTH` characters), the full details, a short ``repr`` and a small HTML table."""

from __future__ import annotations

import html
import textwrap
from typing import TYPE_CHECKING

from dltune.backends._registry import framework_label, is_retired
from dltune.config import TrainConfig
from dltune.recommend._candidates import describe
from dltune.recommend._result import is_memory_unmeasured

if TYPE_CHECKING:
    from dltune.recommend._result import Candidate, Recommendation

__all__ = ["MAX_LINES", "MAX_WIDTH", "candidate_html", "candidate_repr", "config_text", "details",
           "framework_label", "repr_html", "short_repr", "summary"]

# What a terminal shows without wrapping or scrolling the answer away.
MAX_LINES = 12
MAX_WIDTH = 120


def _fit(line: str) -> str:
    return line if len(line) <= MAX_WIDTH else line[:MAX_WIDTH - 3] + "..."


def config_text(config: TrainConfig) -> str:
    """The fields that tell configurations apart, on one line."""
    d = describe(config)
    return (f"{d['optimizer']} lr={d['lr']:.3g} batch={d['batch']} epochs={d['epochs']} "
            f"threads={d['threads']}" + (f" (preset {d['preset']})" if d["preset"] else ""))


def _pct(interval: tuple[float, float, float]) -> str:
    point, low, high = interval
    return f"{100 * point:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"


def _s(seconds: float) -> str:
    return f"{seconds:,.0f}" if seconds >= 1000 else f"{seconds:.3g}"


def _seconds(interval: tuple[float, float, float]) -> str:
    point, low, high = interval
    return f"{_s(point)} s [{_s(low)}, {_s(high)}]"


def _mb(interval: tuple[float, float, float]) -> str:
    point, low, high = interval
    if is_memory_unmeasured(interval):
        return f"at least {low:.0f} MB"
    return f"{point:.0f} MB [{low:.0f}, {high:.0f}]"


def memory_note(rec: Recommendation) -> str | None:
    """What the memory of the shown frameworks seldom measured in a fresh process
    (:attr:`Recommendation.memory_unmeasured`; shown as at least what their process held)
    means, with a memory limit; else None."""
    names = rec.memory_unmeasured
    if not names:
        return None
    limit = rec.constraints.get("max_memory_mb")
    return (f"memory of {', '.join(map(framework_label, names))} seldom measured in a fresh process: "
            "no upper bound" + (f", so max_memory_mb {limit:g} may not hold" if limit is not None else ""))


def _outcome(c: Candidate, interval: bool = True) -> str:
    accuracy = _pct(c.accuracy) if interval else f"{100 * c.accuracy[0]:.1f}%"
    return f"{accuracy}{' measured' if c.measured_runs else ''} in {_s(c.train_time_s[0])} s"


def _config_line(prefix: str, c: Candidate) -> str:
    """``prefix``, the candidate's framework, configuration and outcome on one line; its
    accuracy without the interval where the line would be too long with it."""
    start = f"{prefix}{framework_label(c.config.framework)}: {config_text(c.config)} -> "
    line = start + _outcome(c)
    return line if len(line) <= MAX_WIDTH else start + _outcome(c, interval=False)


def _joined(prefix: str, items: list[str], more: str | None) -> str:
    """``prefix`` and as many of ``items`` as fit on one line, then how many did not."""
    line = prefix
    for shown in range(len(items), 0, -1):
        rest = len(items) - shown
        line = prefix + "; ".join(items[:shown]) + (
            f"; {rest} more" + (f" ({more})" if more else "") if rest else "")
        if len(line) <= MAX_WIDTH:
            return line
    return line


def _default_text(c: Candidate) -> str:
    preset = c.config.preset_name
    name = c.config.framework
    notes = [*(["retired"] if is_retired(name) else []),
             *([] if preset == name else [f"{preset}'s"])]
    label = f"{name} ({', '.join(notes)})" if notes else name
    return f"{label} {100 * c.accuracy[0]:.1f}% in {_s(c.train_time_s[0])} s"


def summary(rec: Recommendation, more: str | None = None) -> str:
    """The answer in at most :data:`MAX_LINES` lines: the pick and its predictions, one line per
    alternative, the frameworks' own defaults, the best retired configuration, a caveat where
    there is one, and the records it learnt from. ``more`` names where the reasoning is."""
    c = rec.config
    head = f"{rec.workload} ({rec.model}) on {rec.hardware_target}, objective {rec.objective}"
    measured = (f" (measured, {rec.measured_runs} run{'s' if rec.measured_runs > 1 else ''})"
                if rec.measured_runs else "")
    lines = [head + ":",
             f"  pick: {framework_label(c.framework)}: {config_text(c)}" + (f" ({more}: why)" if more else ""),
             f"  predicted accuracy {_pct(rec.predicted['accuracy'])}{measured}, "
             f"time {_seconds(rec.predicted['train_time_s'])}, memory {_mb(rec.predicted['peak_rss_mb'])}"]
    if rec.constraints:
        lines.append("  constraints: " + ", ".join(f"{k} {v:g}" for k, v in rec.constraints.items()))
    tail = []
    if rec.defaults:
        tail.append(_joined("  own default presets: ", [_default_text(d) for d in rec.defaults], more))
    if rec.retired is not None:
        tail.append(_config_line("  for comparison: ", rec.retired))
    memory = memory_note(rec)
    if memory:
        tail.append(f"  note: {memory}")
    if rec.caveat:
        tail.append(f"  note: {rec.caveat}")
    if rec.threads_note:
        tail.append(f"  threads: {rec.threads_note}")
    tail.append(f"  {storage_text(rec)}")
    room = MAX_LINES - len(lines) - len(tail)
    alternatives = [_config_line("  or ", a) for a in rec.alternatives]
    if len(alternatives) > room:
        hidden = len(alternatives) - room + 1
        alternatives = alternatives[:room - 1] + [f"  and {hidden} more alternatives"
                                                  + (f" ({more})" if more else "")]
    return "\n".join(_fit(line) for line in lines + alternatives + tail)


def storage_text(rec: Recommendation) -> str:
    """Which records the surrogates learnt from: the knowledge base, and the storage read."""
    if rec.storage:
        return f"storage: {rec.storage} (its runs added to the knowledge base's: {rec.kb_records:,} records)"
    return (f"storage: none read (a ./dltune.db here or --storage adds your runs to the knowledge "
            f"base's {rec.kb_records:,} records)")


def details(rec: Recommendation) -> str:
    """Everything: the pick, each alternative, default and the best retired configuration with
    their figures, the caveats in full, and the reasoning."""
    a, t, m = (rec.predicted[k] for k in ("accuracy", "train_time_s", "peak_rss_mb"))
    c = rec.config
    lines = [
        f"Recommendation for {rec.workload} ({rec.model}) on {rec.hardware_target}, "
        f"objective {rec.objective}:",
        f"  framework {framework_label(c.framework)}: {config_text(c)}",
        f"  predicted accuracy {_pct(a)}, training time {_seconds(t)}, peak memory {_mb(m)}",
    ]
    if rec.measured_runs:
        lines.append(f"  accuracy as measured on this workload ({rec.measured_runs} "
                     f"run{'s' if rec.measured_runs > 1 else ''}), with the interval of one more run")
    if rec.out_of_distribution:
        lines.append("  out of distribution: " + "; ".join(rec.ood_reasons))
    if rec.interval_notes:
        lines.append("  " + "; ".join(rec.interval_notes))
    if rec.threads_note:
        lines.append(f"  threads: {rec.threads_note}")
    memory = memory_note(rec)
    if memory:
        lines.append(f"  {memory}")
    for alt in rec.alternatives:
        lines.append(f"  alternative {framework_label(alt.config.framework)}: {config_text(alt.config)} "
                     f"-> {alt.outcome()}")
    for d in rec.defaults:
        lines.append(f"  own defaults of {framework_label(d.config.framework)} ({d.config.preset_name}'s): "
                     f"{config_text(d.config)} -> {d.outcome(ranked=False)}")
    if rec.retired is not None:
        r = rec.retired
        lines.append(f"  best retired (--include-legacy or --frameworks makes it a candidate): "
                     f"{framework_label(r.config.framework)}: {config_text(r.config)} -> {r.outcome(ranked=False)}")
    lines.append(f"  {storage_text(rec)}")
    lines.append("  " + rec.reason)
    return "\n".join(textwrap.fill(line, MAX_WIDTH, subsequent_indent="    ", break_on_hyphens=False,
                                   break_long_words=False) for line in lines)


def short_repr(rec: Recommendation) -> str:
    """``Recommendation(...)`` in a few hundred characters: the pick and its predictions."""
    c = rec.config
    return (f"Recommendation(workload={rec.workload!r}, model={rec.model!r}, objective={rec.objective!r}, "
            f"framework={framework_label(c.framework)!r}, config={config_text(c)!r}, "
            f"accuracy={rec.predicted['accuracy']!r}, train_time_s={rec.predicted['train_time_s']!r}, "
            f"peak_rss_mb={rec.predicted['peak_rss_mb']!r}, alternatives={len(rec.alternatives)}, "
            f"out_of_distribution={rec.out_of_distribution})")


def candidate_repr(c: Candidate) -> str:
    """``Candidate(...)``: its configuration on one line and its predictions."""
    return (f"Candidate({framework_label(c.config.framework)}: {config_text(c.config)}, "
            f"accuracy={c.accuracy!r}, train_time_s={c.train_time_s!r}, peak_rss_mb={c.peak_rss_mb!r}"
            + (f", measured_runs={c.measured_runs}" if c.measured_runs else "") + ")")


def _row(role: str, config: TrainConfig, a, t, m) -> str:
    cells = [role, framework_label(config.framework), config_text(config), _pct(a), _seconds(t), _mb(m)]
    return "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"


def repr_html(rec: Recommendation) -> str:
    """A small HTML table for notebooks: the pick, the alternatives, the frameworks' own
    defaults and the best retired configuration, each with its predictions."""
    p = rec.predicted
    rows = [_row("pick", rec.config, p["accuracy"], p["train_time_s"], p["peak_rss_mb"])]
    others = ([("alternative", a) for a in rec.alternatives] + [("own defaults", d) for d in rec.defaults]
              + ([("retired", rec.retired)] if rec.retired is not None else []))
    rows += [_row(role, c.config, c.accuracy, c.train_time_s, c.peak_rss_mb) for role, c in others]
    head = "".join(f"<th>{h}</th>" for h in ("", "framework", "configuration", "accuracy",
                                             "training time", "peak memory"))
    caption = html.escape(f"{rec.workload} ({rec.model}) on {rec.hardware_target}, objective {rec.objective}"
                          + (f" - {rec.caveat}" if rec.caveat else ""))
    return (f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def candidate_html(c: Candidate) -> str:
    """One candidate as a one-row HTML table."""
    head = "".join(f"<th>{h}</th>" for h in ("framework", "configuration", "accuracy",
                                             "training time", "peak memory"))
    row = _row("", c.config, c.accuracy, c.train_time_s, c.peak_rss_mb).replace("<td></td>", "", 1)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{row}</tbody></table>"
