"""``kb validate``'s report: the scores per held-out workload and overall, as a table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dltune._table import format_table

__all__ = ["BARS", "ValidationReport", "by_family", "by_modality"]

BARS = {"train_time_mape": 0.15, "accuracy_spearman_min": 0.8, "regret_points_max": 2.0}


def _weighted(rows: list[dict[str, Any]], key: str, weight: str) -> float | None:
    """``key`` over the runs of ``rows`` (a mean per workload, weighted by its ``weight`` runs):
    what the overall scores are, over every run."""
    on = [r for r in rows if r.get(key) is not None and r.get(weight)]
    return sum(r[key] * r[weight] for r in on) / sum(r[weight] for r in on) if on else None


def by_family(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model family (``dltune.models.model_family``) of the held-out workloads, the overall
    scores over its workloads alone: a family the knowledge base holds few of shows here."""
    return _by(rows, "model_family")


def by_modality(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per data modality (image, tabular, tokens, sequence) of the held-out workloads, as
    :func:`by_family`."""
    return _by(rows, "modality")


def _by(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for value in sorted({r.get(key) or "unknown" for r in rows}):
        on = [r for r in rows if (r.get(key) or "unknown") == value]
        spearmans = [r["accuracy_spearman"] for r in on if r.get("accuracy_spearman") is not None]
        out[value] = {
            "workloads": len(on), "n": sum(r["n"] for r in on),
            "train_time_mape_pct": _weighted(on, "train_time_mape_pct", "n"),
            "train_time_coverage_pct": _weighted(on, "train_time_coverage_pct", "n"),
            "accuracy_mae_points": _weighted(on, "accuracy_mae_points", "n"),
            "accuracy_coverage_pct": _weighted(on, "accuracy_coverage_pct", "n"),
            "memory_coverage_pct": _weighted(on, "memory_coverage_pct", "memory_runs"),
            "accuracy_spearman": float(np.mean(spearmans)) if spearmans else None,
            "accuracy_spearman_min": float(min(spearmans)) if spearmans else None,
            "regret_points": float(np.mean([r["regret_points"] for r in on])),
            "regret_points_max": float(max(r["regret_points"] for r in on)),
            "picked_time_ratio": float(np.median([r["picked_time_ratio"] for r in on])),
            "out_of_distribution": sum(bool(r.get("out_of_distribution")) for r in on),
        }
    return out


def _group_table(title: str, scores_of: dict[str, dict[str, Any]]) -> str:
    rows = [{"group": name, **scores} for name, scores in scores_of.items()]
    return f"\n\nPer {title} of the held-out workloads\n" + format_table(rows, [
        ("group", title, ""), ("workloads", "workloads", ""), ("n", "runs", ""),
        ("out_of_distribution", "OOD", ""),
        ("train_time_mape_pct", "time MAPE %", ".1f"),
        ("train_time_coverage_pct", "time in interval %", ".0f"),
        ("accuracy_mae_points", "acc MAE pts", ".2f"),
        ("accuracy_coverage_pct", "acc in interval %", ".0f"),
        ("accuracy_spearman_min", "min acc Spearman", ".2f"),
        ("regret_points", "regret pts", ".2f"), ("regret_points_max", "max regret", ".2f"),
        ("picked_time_ratio", "picked/best time", ".2f"),
        ("memory_coverage_pct", "mem in interval %", ".0f"),
    ])


@dataclass
class ValidationReport:
    """Per held-out workload and overall scores (see :func:`validate_kb`)."""

    workloads: list[dict[str, Any]]
    overall: dict[str, Any]
    objective: str
    n_records: int
    seconds: float
    bars: dict[str, float] = field(default_factory=lambda: dict(BARS))
    calibrations: list[dict[str, Any]] = field(default_factory=list)
    own_runs: int = 0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"workloads": self.workloads, "overall": self.overall, "objective": self.objective,
                "n_records": self.n_records, "seconds": round(self.seconds, 1), "bars": self.bars,
                "calibrations": self.calibrations, "own_runs": self.own_runs, "seed": self.seed,
                "families": by_family(self.workloads), "modalities": by_modality(self.workloads)}

    def table(self) -> str:
        rows = [dict(r, ood="yes" if r.get("out_of_distribution") else "") for r in self.workloads]
        rows += [{"workload": "OVERALL", **self.overall, "ood": self.overall.get("out_of_distribution")}]
        columns = [
            ("workload", "held-out workload", ""), ("machine", "measured on", ""), ("n", "runs", ""),
            ("ood", "OOD", ""), ("nearest_distance", "nearest", ".2f"),
            ("train_time_mape_pct", "time MAPE %", ".1f"),
            ("train_time_mape_as_configured_pct", "as configured %", ".1f"),
            ("repeat_time_ape_pct", "repeat APE %", ".1f"),
            ("train_time_coverage_pct", "time in interval %", ".0f"),
            ("accuracy_mae_points", "acc MAE pts", ".2f"),
            ("accuracy_coverage_pct", "acc in interval %", ".0f"),
            ("accuracy_spearman", "acc Spearman", ".2f"),
            ("accuracy_tied_top_pct", "tied at best %", ".0f"),
            ("accuracy_spearman_ceiling", "ceiling", ".2f"),
            ("regret_points", "regret pts", ".2f"),
            ("regret_floor_points", "floor", ".2f"),
            ("picked_place", "pick's place", ""),
            ("picked_time_ratio", "picked/best time", ".2f"),
            ("memory_mape_pct", "mem MAPE %", ".1f"),
            ("memory_coverage_pct", "mem in interval %", ".0f"),
        ]
        text = format_table(rows, columns)
        o = self.overall
        verdicts = [
            f"train-time MAPE {o['train_time_mape_pct']:.1f}% (bar <= {100 * self.bars['train_time_mape']:.0f}%; "
            f"a perfect predictor of two repeats' mean scores {_fmt(o.get('repeat_time_ape_pct'))}%; "
            f"{_fmt(o.get('train_time_mape_as_configured_pct'))}% predicting the {o.get('stopped_early', 0)} "
            f"runs stopped early at their configured epochs)",
            f"min accuracy Spearman {_fmt(o['accuracy_spearman_min'])} (bar >= {self.bars['accuracy_spearman_min']}; "
            f"at least {self.bars['accuracy_spearman_min']} on {_count(self.workloads, 'accuracy_spearman', self.bars['accuracy_spearman_min'])} "
            f"of {len(self.workloads)} workloads; ceilings (seed noise, ties) {_fmt(o.get('accuracy_spearman_ceiling_min'))}.."
            f"{_fmt(max((r['accuracy_spearman_ceiling'] for r in self.workloads if r.get('accuracy_spearman_ceiling') is not None), default=None))}, "
            f"at least {self.bars['accuracy_spearman_min']} on {_count(self.workloads, 'accuracy_spearman_ceiling', self.bars['accuracy_spearman_min'])})",
            f"max regret {_fmt(o['regret_points_max'])} points (bar <= {self.bars['regret_points_max']}; "
            f"within it on {_at_most(self.workloads, 'regret_points', self.bars['regret_points_max'])} "
            f"of {len(self.workloads)} workloads; the pick's place among its workload's runs "
            f"{_fmt_place(o.get('picked_place_median'))} in the median, "
            f"{_fmt_place(o.get('picked_place_max'))} at worst, 1 the best measured; "
            f"floors (seed noise: a predictor of each configuration's expected accuracy) "
            f"{_fmt(o.get('regret_floor_points'))} on average, {_fmt(o.get('regret_floor_points_max'))} at "
            f"worst, within the bar on {_at_most(self.workloads, 'regret_floor_points', self.bars['regret_points_max'])}; "
            f"the regret at or below its floor on {_at_floor(self.workloads)})",
        ]
        presets = o.get("presets") or {}
        if presets:
            n, bar = len(self.workloads), self.bars["regret_points_max"]

            def _scores(regret: float, within: int, of: int, ratio: float) -> str:
                return f"{regret:.2f} / {within} of {of} / {ratio:.2f}x"

            verdicts.append(
                "for comparison, the runs of each framework's default preset on the held-out "
                "workloads (epochs capped as the knowledge-base build capped them; MXNet runs "
                "Caffe's, and so does Theano on 3-channel data, for which it has none), as points "
                f"below the best run on average / within {bar} of it / time over the best run's in "
                "the median: " + ", ".join(
                    f"{name} " + _scores(p["regret_points"], p["within_bar"], p["workloads"], p["time_ratio"])
                    + ("" if p["workloads"] == n else " (the pick on those workloads: " + _scores(
                        p["picked_regret_points"], p["picked_within_bar"], p["workloads"],
                        p["picked_time_ratio"]) + ")")
                    for name, p in sorted(presets.items(), key=lambda item: item[1]["regret_points"]))
                + "; the pick " + _scores(o["regret_points"], _at_most(self.workloads, "regret_points", bar), n,
                                          o["picked_time_ratio"])
                + f"; a run drawn at random {_fmt(o.get('random_run_regret_points'))} points below")
        flagged = [r for r in self.workloads if r.get("out_of_distribution")]
        if flagged:
            others = [r for r in self.workloads if not r.get("out_of_distribution")]
            verdicts.append(
                f"held out, {len(flagged)} of {len(self.workloads)} workloads were flagged out of "
                f"distribution (their intervals widened, as recommend's): regret "
                f"{np.mean([r['regret_points'] for r in flagged]):.2f} points on average there, "
                f"{_fmt(np.mean([r['regret_points'] for r in others]) if others else None)} on the others")
        by_machine = o.get("train_time_mape_pct_by_machine") or {}
        if len(by_machine) > 1:
            verdicts.append("train-time MAPE by machine: " + ", ".join(
                f"{m} {v:.1f}%" for m, v in sorted(by_machine.items())))
        if self.own_runs:
            verdicts.append(
                f"{self.own_runs} runs of each held-out workload (configurations drawn with seed "
                f"{self.seed}) fitted on with the other workloads, its other runs scored; the pick "
                f"was one of those {self.own_runs} on {sum(r['picked_own_run'] for r in self.workloads)} "
                f"of {len(self.workloads)} workloads")
        text += "\n" + "; ".join(verdicts) + f"\n({self.n_records} records, objective {self.objective})"
        groups = [("model family", by_family(self.workloads))]
        modalities = by_modality(self.workloads)
        if len(modalities) > 1:  # one modality's scores are the overall scores
            groups.append(("data modality", modalities))
        for title, scores_of in groups:
            text += _group_table(title, scores_of)
        if self.calibrations:
            text += ("\n\nCalibrations, leave one calibration workload out: the held-out workload's "
                     "calibration runs predicted from the knowledge base alone, and with the machine's "
                     "other calibration runs\n")
            text += format_table(self.calibrations, [
                ("machine", "calibrated machine", ""), ("workload", "held-out workload", ""),
                ("n", "runs", ""),
                ("uncalibrated_mape_pct", "uncalibrated MAPE %", ".1f"),
                ("uncalibrated_coverage_pct", "in interval %", ".0f"),
                ("uncalibrated_median_ratio", "measured/predicted", ".2f"),
                ("calibrated_mape_pct", "calibrated MAPE %", ".1f"),
                ("calibrated_coverage_pct", "in interval %", ".0f"),
                ("calibrated_median_ratio", "measured/predicted", ".2f"),
            ])
        return text


def _fmt_place(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def _count(rows: list[dict[str, Any]], key: str, at_least: float) -> int:
    return sum(1 for r in rows if r.get(key) is not None and r[key] >= at_least)


def _at_most(rows: list[dict[str, Any]], key: str, most: float) -> int:
    return sum(1 for r in rows if r.get(key) is not None and r[key] <= most)


def _at_floor(rows: list[dict[str, Any]]) -> int:
    return sum(1 for r in rows if r.get("regret_floor_points") is not None
               and r["regret_points"] <= r["regret_floor_points"])


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"
