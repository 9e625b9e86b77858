"""The findings on each framework with its own defaults: fastest, most accurate, whether one
dominates, least memory and CPU. What the report's precision cannot tell apart is a tie: tied
frameworks are named together, never ranked, and a view where all tie says so."""

from __future__ import annotations

from typing import Any

from dltune.report._data import load_tag
from dltune.report._model import (
    Finding,
    fmt_mb,
    fmt_num,
    fmt_pct,
    fmt_s,
    fmt_span,
    fmt_x,
    names,
    same_time,
)

__all__ = ["defaults_findings"]


def _each(items: list[str], values, fmt) -> str:
    return ", ".join(fmt(values[fw]) for fw in items)


def _was(items: list[str]) -> str:
    return "was" if len(items) == 1 else "were"


def _borrowed(d) -> str:
    """`` (for jax, which has none published: the caffe preset)`` for frameworks whose own
    defaults are another framework's preset (``default_preset``)."""
    by_preset: dict[str, list[str]] = {}
    for fw, preset in d["preset"].items():
        if isinstance(preset, str) and preset != fw:
            by_preset.setdefault(preset, []).append(fw)
    return "".join(f" (for {names(fws)}, which {'has' if len(fws) == 1 else 'have'} none published: "
                   f"the {p} preset)" for p, fws in sorted(by_preset.items()))


def _at_epochs(d) -> str:
    """`` at 5 epochs each`` where every framework ran as many (capped presets ask for more)."""
    epochs = d["epochs"].dropna().unique()
    return f" at {fmt_num(epochs[0])} epoch{'' if epochs[0] == 1 else 's'} each" if len(epochs) == 1 else ""


def _fastest(d, load: str) -> Finding:
    times = d["train_time_s"]
    tf, ts = float(times.min()), float(times.max())
    own = f"With their own defaults{_at_epochs(d)}{_borrowed(d)}"
    if same_time(tf, ts):
        text = f"{own}, {names(list(d.index))} trained in the same time ({fmt_span(tf, ts, fmt_s)} s){load}."
    else:
        fast = [fw for fw in d.index if same_time(times[fw], tf)]
        slow = [fw for fw in d.index if same_time(times[fw], ts)]
        text = (f"{own}, {names(fast)} trained fastest ({_each(fast, times, fmt_s)} s) and {names(slow)} "
                f"slowest ({_each(slow, times, fmt_s)} s), {fmt_x(ts / tf)} longer{load}.")
    return Finding("fastest", text, {"fastest_train_s": tf, "slowest_train_s": ts})


def _accuracy(d, load: str) -> list[Finding]:
    times, accs = d["train_time_s"], d["accuracy_pct"]
    ab, aw = float(accs.max()), float(accs.min())
    values = {"best_accuracy_pct": ab, "worst_accuracy_pct": aw}
    if fmt_pct(ab) == fmt_pct(aw):
        return [Finding("most_accurate", f"All frameworks reached the same accuracy with their own "
                        f"defaults{_at_epochs(d)} ({fmt_pct(ab)} %).", values)]
    best = [fw for fw in d.index if fmt_pct(accs[fw]) == fmt_pct(ab)]
    worst = [fw for fw in d.index if fmt_pct(accs[fw]) == fmt_pct(aw)]
    out = [Finding("most_accurate", f"{names(best)} {_was(best)} the most accurate with "
                   f"{'its' if len(best) == 1 else 'their'} own defaults{_at_epochs(d)} ({fmt_pct(ab)} %), "
                   f"{names(worst)} the least ({fmt_pct(aw)} %).", values)]
    tf, ts = times.min(), times.max()
    if same_time(tf, ts):
        return out  # no fastest, so no trade-off to state
    fast = [fw for fw in d.index if same_time(times[fw], tf)]
    both = [fw for fw in fast if fw in best]
    if both:
        text = (f"{names(both)} {_was(both)} both {'among ' * (len(fast) > 1)}the fastest and "
                f"{'among ' * (len(best) > 1)}the most accurate here "
                f"({_each(both, times, fmt_s)} s, {fmt_pct(ab)} %){load}.")
        values = {"fastest_accuracy_pct": ab, "best_train_s": times[both[0]]}
    else:
        f = max(fast, key=lambda fw: accs[fw])
        b = min(best, key=lambda fw: times[fw])
        text = (f"No single framework dominated: the fastest ({f}, {fmt_s(times[f])} s) reached "
                f"{fmt_pct(accs[f])} %, the most accurate ({b}, {fmt_pct(ab)} %) took "
                f"{fmt_s(times[b])} s{load}.")
        values = {"fastest_accuracy_pct": accs[f], "best_train_s": times[b]}
    return out + [Finding("dominance", text, values)]


def _frugal(d, load: str) -> list[Finding]:
    parts: list[str] = []
    values: dict[str, Any] = {}
    for col, fmt, what, unit, short in (("peak_mb", fmt_mb, "memory", " MB peak", " MB"),
                                        ("cpu_pct", fmt_pct, "CPU", " % of one core", " %")):
        v = d[col].dropna()
        if len(v) < 2 or fmt(v.min()) == fmt(v.max()):
            continue
        lo = [fw for fw in v.index if fmt(v[fw]) == fmt(v.min())]
        hi = [fw for fw in v.index if fmt(v[fw]) == fmt(v.max())]
        parts.append(f"{names(lo)}{'' if parts else ' used'} the least {what} ({fmt(v.min())}{unit}, "
                     f"against {fmt(v.max())}{short} for {names(hi)})")
        values.update({f"min_{col}": v.min(), f"max_{col}": v.max()})
    if not parts:
        return []
    # CPU use shares the machine with its load; peak memory does not.
    return [Finding("frugal", "; ".join(parts) + (load if "min_cpu_pct" in values else "") + ".",
                    values)]


def defaults_findings(d) -> list[Finding]:
    """Findings from ``d``, one row per framework (the index) with its own defaults
    (``Analysis.defaults``); none from fewer than two frameworks."""
    d = d[d["train_time_s"].notna() & d["accuracy_pct"].notna()]
    if len(d) < 2:
        return []
    load = load_tag(d)
    return [_fastest(d, load)] + _accuracy(d, load) + _frugal(d, load)
