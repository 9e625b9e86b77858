"""The views of records measured outside a study: ``dltune bench``'s runs, tune's best trials
measured again, the shipped knowledge base's runs of the workload, and the load they ran under."""

from __future__ import annotations

import json
import statistics
from typing import Any

from dltune.report._analysis import Analysis, _describe
from dltune.report._data import BENCH_PHASE, REPEAT_PHASE, TUNE_PHASE, load_1m, load_tag
from dltune.report._model import (
    Finding,
    Table,
    fmt_mb,
    fmt_pct,
    fmt_s,
    fmt_span,
    fmt_x,
    names,
    same_time,
)

__all__ = ["bench_findings", "bench_table", "kb_table", "load_note", "repeat_findings", "repeat_table"]


def _bench(a: Analysis):
    return a.ok[a.ok["phases"].map(lambda p: BENCH_PHASE in p)]


def _train_cell(row) -> str:
    cell = fmt_s(row["train_time_s"])
    if row["repeats"] > 1 and row["train_time_min_s"] == row["train_time_min_s"]:
        cell += f" ({fmt_s(row['train_time_min_s'])}–{fmt_s(row['train_time_max_s'])})"
    return cell


def bench_table(a: Analysis) -> Table | None:
    """Every successful ``dltune bench`` run, configuration by configuration."""
    data = _bench(a)
    if data.empty:
        return None
    data = data.assign(_conf=data.apply(_describe, axis=1)).sort_values(["_conf", "train_time_s"])
    rows = [[r["framework"], r["_conf"], str(r["repeats"]), _train_cell(r), fmt_s(r["test_time_s"]),
             fmt_pct(r["accuracy_pct"]), fmt_pct(r["cpu_pct"]), fmt_mb(r["peak_mb"])]
            for _, r in data.iterrows()]
    return Table("bench", "Benchmark runs (dltune bench)",
                 ["framework", "configuration", "runs", "train s", "test s", "accuracy %", "CPU %",
                  "peak MB"], rows,
                 note="With several runs of a configuration: their median, and min–max in brackets. "
                      "CPU % is the mean over training, in % of one core.")


def _same_settings(a: Analysis):
    """The largest group of bench runs that differ only in their framework (one run each, the
    latest), or None when no two frameworks ran the same settings."""
    data = _bench(a).sort_values("started_at")
    groups: dict[str, Any] = {}
    for idx, setting in data["setting"].items():
        config = json.loads(setting)
        config.pop("framework", None)
        groups.setdefault(json.dumps(config, sort_keys=True), []).append(idx)
    best = None
    for idxs in groups.values():
        group = data.loc[idxs].groupby("framework").tail(1).set_index("framework")
        if len(group) >= 2 and (best is None or len(group) > len(best)):
            best = group
    return best


def bench_findings(a: Analysis) -> list[Finding]:
    g = _same_settings(a)
    if g is None:
        return []
    times, accs = g["train_time_s"], g["accuracy_pct"]
    tf, ts, ab, aw = times.min(), times.max(), accs.max(), accs.min()
    text = f"With the same settings ({_describe(g.iloc[0])}), "
    if same_time(tf, ts):
        text += f"{names(list(g.index))} trained in the same time ({fmt_span(tf, ts, fmt_s)} s){load_tag(g)}; "
    else:
        fast = [fw for fw in g.index if same_time(times[fw], tf)]
        slow = [fw for fw in g.index if same_time(times[fw], ts)]
        text += (f"{names(fast)} trained fastest ({fmt_s(tf)} s) and {names(slow)} slowest "
                 f"({fmt_s(ts)} s), {fmt_x(ts / tf)} longer{load_tag(g)}; ")
    best = [fw for fw in g.index if fmt_pct(accs[fw]) == fmt_pct(ab)]
    worst = [fw for fw in g.index if fmt_pct(accs[fw]) == fmt_pct(aw)]
    text += (f"all reached {fmt_pct(ab)} %." if fmt_pct(ab) == fmt_pct(aw) else
             f"{names(best)} {'was' if len(best) == 1 else 'were'} the most accurate ({fmt_pct(ab)} %), "
             f"{names(worst)} the least ({fmt_pct(aw)} %).")
    return [Finding("bench", text, {"bench_fastest_s": tf, "bench_slowest_s": ts,
                                    "bench_best_pct": ab, "bench_worst_pct": aw})]


def _repeat_pairs(a: Analysis) -> list[tuple[Any, Any]]:
    """(trial, the same trial measured again with the next seed), as tune's ``repeat_best``
    measured them."""
    again = a.ok[a.ok["phases"].map(lambda p: REPEAT_PHASE in p)]
    trials = a.ok[a.ok["phases"].map(lambda p: TUNE_PHASE in p)]
    pairs = []
    for _, r in again.iterrows():
        match = trials[(trials["source"] == r["source"]) & (trials["setting"] == r["setting"])
                       & (trials["seed"] == r["seed"] - 1)]
        if not match.empty:
            pairs.append((match.iloc[-1], r))
    return pairs


def repeat_table(a: Analysis) -> Table | None:
    pairs = _repeat_pairs(a)
    if not pairs:
        return None
    rows = [[t["framework"], _describe(t), fmt_pct(t["accuracy_pct"]), fmt_pct(r["accuracy_pct"]),
             f"{r['accuracy_pct'] - t['accuracy_pct']:+.1f}", fmt_s(t["train_time_s"]),
             fmt_s(r["train_time_s"])] for t, r in pairs]
    return Table("repeats", "The most accurate tuning trials measured again with another seed",
                 ["framework", "configuration", "trial acc %", "again acc %", "change (points)",
                  "trial train s", "again train s"], rows,
                 note="A search's best trial is partly luck; the change is what a new seed alone "
                      "moves its accuracy.")


def repeat_findings(a: Analysis) -> list[Finding]:
    pairs = _repeat_pairs(a)
    if not pairs:
        return []
    t, r = max(pairs, key=lambda p: abs(p[1]["accuracy_pct"] - p[0]["accuracy_pct"]))
    return [Finding("repeats", f"Measured again with another seed, the best tuning trials moved by "
                    f"at most {abs(r['accuracy_pct'] - t['accuracy_pct']):.1f} points ({t['framework']}: "
                    f"{fmt_pct(t['accuracy_pct'])} % then {fmt_pct(r['accuracy_pct'])} %).",
                    {"trial_pct": t["accuracy_pct"], "again_pct": r["accuracy_pct"]})]


def _over(entry: dict[str, Any]) -> bool:
    load, cores = load_1m(entry), (entry.get("hardware") or {}).get("usable_cores")
    return load is not None and cores is not None and load > cores


def kb_table(entries: list[dict[str, Any]]) -> Table | None:
    """Per framework, the shipped knowledge base's runs of this workload: its own preset's run
    and the most accurate run, with where and under what load they were measured."""
    ok = [e for e in entries if e.get("status") == "ok"
          and (e.get("metrics") or {}).get("test_accuracy") is not None]
    if not ok:
        return None
    rows = []
    for fw in sorted({e["config"]["framework"] for e in ok}):
        runs = [e for e in ok if e["config"]["framework"] == fw]
        preset = [e for e in runs if (e.get("kb") or {}).get("kind") == "preset"]
        best = max(runs, key=lambda e: e["metrics"]["test_accuracy"])
        own = preset[-1]["metrics"] if preset else {}
        rows.append([fw, str(len(runs)),
                     fmt_pct(None if not own else 100 * own["test_accuracy"]),
                     fmt_s(own.get("train_time_s")), fmt_pct(100 * best["metrics"]["test_accuracy"]),
                     fmt_s(best["metrics"].get("train_time_s")),
                     fmt_s(statistics.median(e["metrics"]["train_time_s"] for e in runs))])
    machines = sorted({str((e.get("hardware") or {}).get("cpu_model") or "?") for e in ok})
    loaded = sum(_over(e) for e in ok)
    note = (f"Measured by the knowledge base's build on {', '.join(machines)}, not on this machine: "
            "its times are that machine's.")
    if loaded:
        note += (f" {loaded} of its {len(ok)} runs ran under a 1-minute load average above the "
                 "usable cores, so their times are slower than that machine is.")
    return Table("kb", "The shipped knowledge base's runs of this workload",
                 ["framework", "runs", "own preset acc %", "its train s", "best acc %", "its train s",
                  "median train s"], rows, note=note)


def load_note(a: Analysis) -> str | None:
    """The load the runs started under, and how many started above the usable cores (their
    times then measure the other work too); None when no run recorded its load."""
    known = a.df[a.df["load_1m"].notna() & a.df["usable_cores"].notna()]
    if known.empty:
        return None
    load = known["load_1m"]
    cores = int(known["usable_cores"].max())
    line = (f"Load: the 1-minute load average was {load.min():.1f}–{load.max():.1f} (median "
            f"{load.median():.1f}) as the {len(known)} runs that recorded it started, on {cores} usable "
            f"cores; the runs before each count in it. Findings on time name their runs' load.")
    over = known[load > known["usable_cores"]]
    if not over.empty:
        line += (f" {len(over)} started above the usable cores (up to {over['load_1m'].max():.1f}): "
                 f"where that was other work, their times are slower than this machine is.")
    return line
