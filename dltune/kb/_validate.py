"""Leave-one-workload-out validation of the surrogates and of the recommendation."""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_int

__all__ = ["ValidationReport", "validate_calibrations", "validate_kb"]

BARS = {"train_time_mape": 0.15, "accuracy_spearman_min": 0.8, "regret_points_max": 2.0}


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
                "calibrations": self.calibrations, "own_runs": self.own_runs, "seed": self.seed}

    def table(self) -> str:
        from dltune.cli._common import format_table

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


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    ra = np.argsort(np.argsort(a, kind="stable"), kind="stable").astype(float)
    rb = np.argsort(np.argsort(b, kind="stable"), kind="stable").astype(float)
    # Average ranks for ties, as scipy.stats.spearmanr does.
    for r, v in ((ra, a), (rb, b)):
        for value in np.unique(v):
            tied = v == value
            if tied.sum() > 1:
                r[tied] = r[tied].mean()
    return float(np.corrcoef(ra, rb)[0, 1])


def _repeat_pairs(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of records of one configuration that differ only in the seed (the build's repeats)."""
    pairs = []
    for indices in _by_config(records).values():
        group = [records[i] for i in indices]
        # Of runs with the same seed, the one in a warm worker (a fresh process also imports
        # its framework and warms its caches: not the seed's noise).
        group = sorted(group, key=lambda d: -((d.get("metrics") or {}).get("import_time_s") or 0))
        seeds = {d["config"].get("seed"): d for d in group}
        if len(seeds) >= 2:
            first, second = list(seeds.values())[:2]
            pairs.append((first, second))
    return pairs


def _config_key(config: dict[str, Any]) -> str:
    """A run's configuration but for its seed: what tells a repeat pair's runs apart."""
    return json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True, default=str)


def _by_config(records: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], str] = _config_key,
               ) -> dict[str, list[int]]:
    """Indices of the records of each configuration (as ``key`` of a record's configuration
    tells them apart), in the records' order."""
    out: dict[str, list[int]] = {}
    for i, d in enumerate(records):
        out.setdefault(key(d["config"]), []).append(i)
    return out


def _own_runs(held: list[dict[str, Any]], k: int, seed: int, label: str) -> tuple[list[dict[str, Any]], np.ndarray]:
    """``k`` of ``held``'s configurations drawn at random, one run of each (its first on
    record), as a short tune of the workload would have measured them; and which of ``held``'s
    runs are of other configurations (those scored). The draw depends on ``seed`` and the
    workload alone, not on which other workloads are held out."""
    from dltune.surrogate._model import measured_key

    scored = np.ones(len(held), dtype=bool)
    if k == 0:
        return [], scored
    # Configurations as recommend's measured candidates tell them apart (threads aside): a run
    # of a drawn configuration at another thread count would be scored on what was measured.
    groups = list(_by_config(held, measured_key).values())
    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    drawn = sorted(rng.choice(len(groups), size=k, replace=False))
    for g in drawn:
        scored[groups[g]] = False
    return [held[groups[g][0]] for g in drawn], scored


def _measured(model: Any, held: list[dict[str, Any]]) -> Any:
    """The runs of ``held`` whose configuration the model measured on their workload, as
    ``recommend``'s measured candidates (:class:`~dltune.recommend._recommend.Measured`), or None."""
    from dltune.recommend._recommend import Measured
    from dltune.surrogate._model import measured_key

    w = held[0]["workload"]
    runs, noise = model.measured_runs(w.get("fingerprint"), w.get("model") or w["meta"].get("model"))
    by_key = {measured_key(m["config"]): m for m in runs}
    hits = [(i, by_key[k]) for i, d in enumerate(held) if (k := measured_key(d["config"])) in by_key]
    if not hits:
        return None
    return Measured.of(model, [i for i, _ in hits], [m for _, m in hits], noise)


def _noise(records: Sequence[dict[str, Any]], accuracy: np.ndarray, seed: int = 0,
           scored: np.ndarray | None = None) -> dict[str, Any]:
    """What repeats say is reachable: the time error of a perfect predictor of the mean of two
    runs, the accuracy rank correlation left once each run carries the seed noise, and the
    regret left (:func:`_regret_floor`).

    The accuracy noise of one run is estimated robustly from the repeat pairs (median absolute
    difference / 0.6745 / sqrt 2); the ceiling is the mean Spearman correlation between the
    measured accuracies and the same plus that Gaussian noise (50 draws): a model that knew
    every configuration's expected accuracy exactly would score about this. Expected
    accuracies differ from one configuration to the next, while measured ones tie (a test set
    of n samples measures in steps of 1/n, and an easy workload puts many runs at exactly
    100 %): the draws break every tie, so where the noise is 0 the ceiling is the most that
    any predictor without ties can reach (``accuracy_tied_top_pct`` says how many runs share
    the best measured accuracy). With ``scored`` (a mask of ``records``), the ceiling and the
    ties are those of the scored runs; the noise and the regret floor are of them all.
    """
    pairs = _repeat_pairs(records)
    if not pairs:
        return {"repeats": 0, "repeat_time_ape_pct": None, "accuracy_noise_points": None,
                "accuracy_tied_top_pct": None, "accuracy_spearman_ceiling": None,
                "regret_floor_points": None}
    t = np.array([[a["metrics"]["train_time_s"], b["metrics"]["train_time_s"]] for a, b in pairs])
    ape = np.abs(t - t.mean(axis=1, keepdims=True)) / t
    diff = np.array([a["metrics"]["test_accuracy"] - b["metrics"]["test_accuracy"] for a, b in pairs])
    from dltune.measure._noise import seed_noise

    sigma = seed_noise(diff)
    rng = np.random.default_rng(seed)
    ranked = accuracy if scored is None else accuracy[scored]
    # A jitter far below one test sample breaks the ties that noise 0 would leave.
    draws = [_spearman(ranked, ranked + rng.normal(0.0, sigma, len(ranked))
                       + rng.uniform(0.0, 1e-9, len(ranked))) for _ in range(50)]
    draws = [d for d in draws if d is not None]
    return {"repeats": len(pairs), "repeat_time_ape_pct": 100 * float(ape.mean()),
            "accuracy_noise_points": 100 * sigma,
            "accuracy_tied_top_pct": 100 * float(np.mean(ranked == ranked.max())),
            "accuracy_spearman_ceiling": float(np.mean(draws)) if draws else None,
            "regret_floor_points": _regret_floor(accuracy, sigma, seed)}


def _regret_floor(accuracy: np.ndarray, sigma: float, seed: int = 0, draws: int = 200) -> float:
    """The regret, in points, of a predictor that knew every configuration's expected accuracy
    exactly, given seed noise ``sigma``: the measured accuracies taken as the expected ones, each
    run measured again with that Gaussian noise (``draws`` times), the best of those runs minus
    the run of the configuration expected best (of tied ones, any: each is as good a pick).

    The same model of the noise as the Spearman ceiling's (:func:`_noise`). Measured accuracies
    already carry one draw of the noise, so the expected ones spread less than they do: a
    configuration that measured lucky stands further ahead of the rest than it is, and the floor
    is, if anything, an underestimate.
    """
    if sigma == 0:
        return 0.0
    rng = np.random.default_rng(seed + 1)
    top = np.flatnonzero(accuracy == accuracy.max())
    again = accuracy + rng.normal(0.0, sigma, (draws, len(accuracy)))
    picked = again[np.arange(draws), rng.choice(top, draws)]
    return 100 * float(np.mean(again.max(axis=1) - picked))


def _presets(held: Sequence[dict[str, Any]], accuracy: np.ndarray, seconds: np.ndarray,
             best: int) -> dict[str, dict[str, Any]]:
    """What each framework's default preset (``TrainConfig.preset``, as the knowledge-base build
    runs it: MXNet and other frameworks without one run Caffe's) measured on the held-out
    workload, as a baseline for the pick: per framework, the best run's accuracy minus the mean
    of its preset runs, in points, and their mean training time over the best run's."""
    out: dict[str, dict[str, Any]] = {}
    for framework in sorted({d["config"]["framework"] for d in held if d["config"].get("preset_name")}):
        runs = np.array([bool(d["config"].get("preset_name")) and d["config"]["framework"] == framework
                         for d in held])
        out[framework] = {"regret_points": round(100 * float(accuracy[best] - accuracy[runs].mean()), 9),
                          "time_ratio": float(seconds[runs].mean() / seconds[best]), "runs": int(runs.sum()),
                          "preset": sorted({d["config"]["preset_name"] for d, r in zip(held, runs, strict=True) if r})[0]}
    return out


def _overall_presets(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per framework's preset, over the workloads that measured it: the mean regret, how many
    workloads it was within the regret bar on, and the median time ratio; and the same for the
    pick on those workloads, so that each comparison is made on the same workloads."""
    out: dict[str, dict[str, float]] = {}
    for name in sorted({n for r in rows for n in r["presets"]}):
        on = [r for r in rows if name in r["presets"]]
        regrets = np.array([r["presets"][name]["regret_points"] for r in on])
        picked = np.array([r["regret_points"] for r in on])
        out[name] = {
            "workloads": len(on),
            "regret_points": float(regrets.mean()),
            "within_bar": int((regrets <= BARS["regret_points_max"]).sum()),
            "time_ratio": float(np.median([r["presets"][name]["time_ratio"] for r in on])),
            "picked_regret_points": float(picked.mean()),
            "picked_within_bar": int((picked <= BARS["regret_points_max"]).sum()),
            "picked_time_ratio": float(np.median([r["picked_time_ratio"] for r in on])),
        }
    return out


def _overall_noise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    with_repeats = [r for r in rows if r["repeats"]]
    if not with_repeats:
        return {"repeats": 0, "repeat_time_ape_pct": None, "accuracy_spearman_ceiling": None,
                "accuracy_spearman_ceiling_min": None, "regret_floor_points": None,
                "regret_floor_points_max": None}
    weights = np.array([r["repeats"] for r in with_repeats], dtype=float)
    ceilings = [r["accuracy_spearman_ceiling"] for r in with_repeats]
    return {
        "repeats": int(weights.sum()),
        "repeat_time_ape_pct": float(np.average([r["repeat_time_ape_pct"] for r in with_repeats],
                                                weights=weights)),
        "accuracy_spearman_ceiling": float(np.mean(ceilings)),
        "accuracy_spearman_ceiling_min": float(min(ceilings)),
        "regret_floor_points": float(np.mean([r["regret_floor_points"] for r in with_repeats])),
        "regret_floor_points_max": float(max(r["regret_floor_points"] for r in with_repeats)),
    }


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _load(items: Sequence[Any]) -> list[Any]:
    from dltune.measure import load_records

    out: list[Any] = []
    for item in items:
        out.extend(load_records(item) if isinstance(item, str) else [item])
    return out


def _time_scores(model: Any, held: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Each run's measured over predicted training time (at the epochs it ran), and whether
    the measured time lies in the interval, widened for its hardware as ``recommend`` widens."""
    from dltune.surrogate import record_row
    from dltune.surrogate._model import epochs_ran

    ratio, inside = np.empty(len(held)), np.empty(len(held), dtype=bool)
    for i, d in enumerate(held):
        row = epochs_ran(d, record_row(d))
        pred, _ = model.widen(model.predict([row]), row["meta"], row["hardware"])
        t = d["metrics"]["train_time_s"]
        ratio[i] = t / float(pred["train_time_s"][0])
        inside[i] = float(pred["train_time_s_low"][0]) <= t <= float(pred["train_time_s_high"][0])
    return ratio, inside


def validate_calibrations(
    records: Sequence[Any] | None = None,
    calibrations: Sequence[Any] | None = None,
    calibrate: bool = True,
) -> list[dict[str, Any]]:
    """How well a machine's calibration predicts a workload it did not run.

    For each calibrated machine and each of its calibration workloads: that workload's
    calibration runs predicted by the surrogates fitted on the knowledge base alone
    (uncalibrated) and on the knowledge base plus the machine's calibration runs of its other
    workloads (calibrated). A shipped calibration is scored as made on its own day
    (``kb.shipped`` dropped): the question is what a calibration says, not how far another day
    of the same kind of machine strays (``benchmarks/kb_speed_drift.py``).

    Args:
        records: the knowledge base (default: the shipped one).
        calibrations: calibration records or files (default: the cache's and the shipped ones).
    """
    from dltune.hardware import cpu_identity
    from dltune.kb._calibrate import calibration_records
    from dltune.kb._store import load_shipped_records
    from dltune.surrogate import PerformanceModel, usable_records
    from dltune.surrogate._model import display_name, machine_key, workload_label

    kb = usable_records(load_shipped_records() if records is None else _load(records))
    runs = usable_records(calibration_records() if calibrations is None else _load(calibrations))
    runs = [dict(d, kb={k: v for k, v in (d.get("kb") or {}).items() if k != "shipped"}) for d in runs]
    machines: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for d in runs:
        machines.setdefault(machine_key(d.get("hardware") or {}), {}).setdefault(
            workload_label(d), []).append(d)
    rows: list[dict[str, Any]] = []
    base = None
    for machine, workloads in sorted(machines.items()):
        if len(workloads) < 2:
            continue
        for label, held in sorted(workloads.items()):
            if base is None:
                base = PerformanceModel(calibrate=calibrate).fit(kb)
            others = [d for other, ds in workloads.items() if other != label for d in ds]
            model = PerformanceModel(calibrate=calibrate).fit(kb + others)
            plain, plain_in = _time_scores(base, held)
            ratio, inside = _time_scores(model, held)
            hardware = held[0].get("hardware") or {}
            rows.append(_clean_row({
                "machine": f"{cpu_identity(hardware)}, {hardware.get('logical_cores')} cores",
                "machine_key": machine, "workload": display_name(held[0]["workload"]),
                "n": len(held), "frameworks": sorted({d["config"]["framework"] for d in held}),
                "uncalibrated_mape_pct": 100 * float(np.mean(np.abs(1 / plain - 1))),
                "uncalibrated_coverage_pct": 100 * float(plain_in.mean()),
                "uncalibrated_median_ratio": float(np.median(plain)),
                "calibrated_mape_pct": 100 * float(np.mean(np.abs(1 / ratio - 1))),
                "calibrated_coverage_pct": 100 * float(inside.mean()),
                "calibrated_median_ratio": float(np.median(ratio)),
            }))
    return rows


def _clean_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _clean(v) for k, v in row.items()}


def validate_kb(
    records: Sequence[Any] | None = None,
    objective: str = "accuracy",
    min_records: int = 3,
    calibrate: bool = True,
    calibrations: Sequence[Any] | bool = False,
    progress: bool = False,
    own_runs: int = 0,
    seed: int = 0,
) -> ValidationReport:
    """Leave-one-workload-out: for each workload, fit on the others and score on it.

    Per held-out workload: training-time MAPE and the share of measured times inside the
    predicted interval, each run predicted with the epochs it trained (a run stopped early when
    its loss diverged ran fewer than configured; the MAPE at the configured epochs is kept as
    ``train_time_mape_as_configured_pct``); accuracy MAE (points) and Spearman rank correlation across its
    configurations; the share of measured accuracies inside the predicted interval, and of
    peak memories of the runs made in a new worker process (what the memory surrogate
    predicts; ``memory_runs`` of them), with their MAPE; and the regret of the recommendation: the measured accuracy of the
    configuration the surrogates rank first (among the workload's measured ones, by
    ``objective`` on the low end of the accuracy interval, as ``recommend`` ranks) below the
    best measured accuracy, in points, and its training time over
    the most accurate configuration's; ``regret_floor_points`` is what a predictor of every
    configuration's expected accuracy would miss by, given the seed noise its repeats show
    (:func:`_regret_floor`). Each held-out workload is also flagged out of
    distribution or not as ``recommend`` would flag it (``out_of_distribution``, with
    ``nearest_distance`` to the nearest other workload of its model), and its intervals are
    widened as ``recommend`` widens them before they are scored (the pick, as ``recommend``'s,
    ranks the low ends as learnt, mixed with the consensus of the other workloads of its model
    where it is unlike them: ``PerformanceModel.ranking_accuracy``, whose share of its own low
    ends is ``ranked_own_share``).

    Args:
        records: records, dicts or record files (default: the shipped knowledge base).
        min_records: workloads with fewer successful records are not held out.
        calibrations: also score calibrations (:func:`validate_calibrations`): True for the
            cache's and the shipped ones, or calibration records / files.
        progress: a progress bar on stderr, one step per held-out workload (each a fit of the
            surrogates: about 8 s on 2 cores with the shipped knowledge base).
        own_runs: as after a short ``tune`` of the held-out workload: this many of its
            configurations, drawn at random (``seed``), are measured, one run each, and fitted
            on with the other workloads; every run of those configurations is then left out of
            the scores but the regret's (the pick is made among all of the workload's
            configurations, the drawn ones too, as ``recommend`` would rank them). A workload
            with fewer than ``own_runs + min_records`` configurations is not held out. 0 (the
            default): leave-one-workload-out.
        seed: which configurations ``own_runs`` draws.
    """
    from dltune.hardware import cpu_identity
    from dltune.kb._store import load_shipped_records
    from dltune.recommend._recommend import OBJECTIVES, pick
    from dltune.surrogate import PerformanceModel, record_row, usable_records
    from dltune.surrogate._features import memory_as_now, ran_in_new_process
    from dltune.surrogate._model import blas_kernels, display_name, epochs_ran, workload_label

    check_choice("objective", objective, OBJECTIVES)
    check_int("own_runs", own_runs, 0)
    check_int("seed", seed, 0)
    started = time.monotonic()
    loaded: list[Any] = load_shipped_records() if records is None else _load(records)
    data = usable_records(loaded)
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in data:
        groups.setdefault(workload_label(d), []).append(d)
    if len(groups) < 2:
        raise ParameterError(
            f"The 'records' parameter must cover at least 2 workloads. Got {len(groups)} instead."
        )
    rows, errors, errors_configured, covered, acc_errors = [], [], [], [], []
    acc_covered: list[bool] = []
    mem_covered: list[bool] = []
    mem_errors: list[float] = []
    machine_errors: dict[str, list[float]] = {}
    from dltune.surrogate._model import measured_key

    held_out = [(label, held) for label, held in sorted(groups.items())
                if len(held) >= min_records and len(_by_config(held, measured_key)) >= own_runs + min_records]
    if not held_out:
        raise ParameterError(
            f"No workload has {own_runs + min_records} configurations or more to hold out with "
            f"'own_runs' {own_runs} (the most any has: {max(len(_by_config(g, measured_key)) for g in groups.values())}).")
    bar = None
    if progress:
        import sys

        from tqdm import tqdm

        bar = tqdm(total=len(held_out), desc="validate", unit="workload", file=sys.stderr)
    for label, held in held_out:
        if bar is not None:
            bar.set_postfix_str(display_name(held[0]["workload"]))
        given, scored = _own_runs(held, own_runs, seed, label)
        train = [d for other, ds in groups.items() if other != label for d in ds] + given
        model = PerformanceModel(calibrate=calibrate).fit(train)
        held_rows = [record_row(d) for d in held]
        # As recommend sees it: flagged out of distribution or not, with its intervals widened
        # where it is (what is scored; the pick ranks the learnt low ends, below).
        meta, hardware = held_rows[0]["meta"], held_rows[0]["hardware"]
        ood, _, nearest = model.novelty(meta, hardware)
        learnt = model.predict(held_rows)
        # As recommend picks: by the low end of the accuracy interval as learnt (not widened),
        # with the consensus of the other workloads of its model where it is unlike them.
        sure, share, band = model.ranking_accuracy(held_rows, meta, learnt["accuracy_low"])
        # The configurations measured on it (its own runs, if any) take the accuracy they
        # measured and the interval of one more run, as recommend's measured candidates do.
        measured = _measured(model, held)
        if measured is not None:
            learnt = measured.apply(learnt, sure)
        pred, _ = model.widen(learnt, meta, hardware, consensus=band)
        if measured is not None:
            pred = measured.apply(pred)
        # The time model is asked about the epochs each run trained: a run stopped early
        # (diverged) took the time of the epochs it ran, which no time model can foresee from
        # the configuration. ``as configured`` scores the configured epochs too.
        ran_rows = [epochs_ran(d, row) for d, row in zip(held, held_rows, strict=True)]
        stopped = np.array([a is not b for a, b in zip(ran_rows, held_rows, strict=True)])
        t_pred = model.widen(model.predict(ran_rows), meta, hardware)[0] if stopped.any() else pred
        t_true = np.array([d["metrics"]["train_time_s"] for d in held])
        a_true = np.array([d["metrics"]["test_accuracy"] for d in held])
        # The pick is made among all of the workload's configurations (the drawn own runs too);
        # the rest is scored on the runs the fit has not seen (all of them without own runs).
        chosen = pick(objective, sure, learnt["train_time_s"], pred["accuracy"])
        best = int(np.lexsort((t_true, -a_true))[0])
        regret = round(100 * float(a_true[best] - a_true[chosen]), 9)
        place = 1 + int((a_true > a_true[chosen]).sum())
        time_ratio = float(t_true[chosen] / t_true[best])
        picked = {k: held[chosen]["config"][k] for k in
                  ("framework", "optimizer", "learning_rate", "batch_size", "epochs")}
        noise = _noise(held, a_true, scored=scored)
        presets = _presets(held, a_true, t_true, best)
        mean_regret = round(100 * float(a_true[best] - a_true.mean()), 9)
        held_all, held = held, [d for d, s in zip(held, scored, strict=True) if s]
        pred = {k: v[scored] for k, v in pred.items()}
        t_pred = {k: v[scored] for k, v in t_pred.items()}
        stopped, t_true, a_true = stopped[scored], t_true[scored], a_true[scored]
        rel = np.abs(t_pred["train_time_s"] - t_true) / t_true
        rel_configured = np.abs(pred["train_time_s"] - t_true) / t_true
        inside = (t_true >= t_pred["train_time_s_low"]) & (t_true <= t_pred["train_time_s_high"])
        errors.extend(rel.tolist())
        # Which machine measured the held-out runs (a build resumed on another machine holds
        # two), with the BLAS kernels that tell apart machines of one CPU identity.
        identities = [" ".join(filter(None, (cpu_identity(d.get("hardware") or {}),
                                             blas_kernels(d.get("hardware") or {}))))
                      for d in held]
        for identity, e in zip(identities, rel.tolist(), strict=True):
            machine_errors.setdefault(identity, []).append(e)
        errors_configured.extend(rel_configured.tolist())
        covered.extend(inside.tolist())
        acc_errors.extend(np.abs(pred["accuracy"] - a_true).tolist())
        acc_inside = (a_true >= pred["accuracy_low"]) & (a_true <= pred["accuracy_high"])
        acc_covered.extend(acc_inside.tolist())
        # Peak memory of the runs made in a new worker process: what the memory model predicts
        # (a reused worker's is the high-water mark of the runs before it).
        m_true = np.array([d["metrics"].get("peak_rss_mb") or np.nan for d in held], dtype=float)
        fresh = np.array([ran_in_new_process(d) and memory_as_now(d) for d in held]) & np.isfinite(m_true)
        m_true, m_low, m_high = m_true[fresh], pred["peak_rss_mb_low"][fresh], pred["peak_rss_mb_high"][fresh]
        mem_inside = (m_true >= m_low) & (m_true <= m_high)
        mem_rel = np.abs(pred["peak_rss_mb"][fresh] - m_true) / m_true
        mem_covered.extend(mem_inside.tolist())
        mem_errors.extend(mem_rel.tolist())
        rows.append({
            "workload": display_name(held[0]["workload"]), "label": label, "n": len(held),
            "own_runs": len(given),
            "machine": " + ".join(sorted(set(identities), key=identities.index)),
            "frameworks": sorted({d["config"]["framework"] for d in held}),
            "out_of_distribution": bool(ood),
            "nearest_distance": float(nearest[0][1]) if nearest else None,
            "ranked_own_share": share,
            "train_time_mape_pct": 100 * float(rel.mean()),
            "train_time_median_ape_pct": 100 * float(np.median(rel)),
            "stopped_early": int(stopped.sum()),
            "train_time_mape_as_configured_pct": 100 * float(rel_configured.mean()),
            "train_time_coverage_pct": 100 * float(inside.mean()),
            "accuracy_mae_points": 100 * float(np.abs(pred["accuracy"] - a_true).mean()),
            "accuracy_coverage_pct": 100 * float(acc_inside.mean()),
            "memory_coverage_pct": 100 * float(mem_inside.mean()) if len(mem_inside) else None,
            "memory_mape_pct": 100 * float(mem_rel.mean()) if len(mem_rel) else None,
            "memory_runs": int(len(mem_inside)),
            "accuracy_spearman": _spearman(pred["accuracy"], a_true),
            "train_time_spearman": _spearman(pred["train_time_s"], t_true),
            "best_measured_accuracy": float(held_all[best]["metrics"]["test_accuracy"]),
            "picked_accuracy": float(held_all[chosen]["metrics"]["test_accuracy"]),
            "picked_config": picked,
            "picked_own_run": bool(not scored[chosen]),
            # Rounded: accuracies are steps of 1 / test samples, and 0.98 below 1.0 is 2 points,
            # not 2.0000000000000018.
            "regret_points": regret,
            # 1 + how many of the workload's runs (all of them) measured more accurate than the pick.
            "picked_place": place,
            "picked_time_ratio": time_ratio,
            # Baselines: each framework's default preset as measured here, and a run of the
            # workload's drawn at random (the mean of all, the drawn own runs among them).
            "presets": presets,
            "random_run_regret_points": mean_regret,
            **noise,
        })
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    spearmans = [r["accuracy_spearman"] for r in rows if r["accuracy_spearman"] is not None]
    overall = {
        "n": sum(r["n"] for r in rows), "workloads": len(rows),
        "train_time_mape_pct": 100 * float(np.mean(errors)) if errors else None,
        "train_time_median_ape_pct": 100 * float(np.median(errors)) if errors else None,
        "stopped_early": sum(r["stopped_early"] for r in rows),
        "train_time_mape_as_configured_pct": 100 * float(np.mean(errors_configured)) if errors else None,
        "train_time_mape_pct_by_machine": {m: 100 * float(np.mean(e)) for m, e in machine_errors.items()},
        "train_time_coverage_pct": 100 * float(np.mean(covered)) if covered else None,
        "accuracy_mae_points": 100 * float(np.mean(acc_errors)) if acc_errors else None,
        "accuracy_coverage_pct": 100 * float(np.mean(acc_covered)) if acc_covered else None,
        "memory_coverage_pct": 100 * float(np.mean(mem_covered)) if mem_covered else None,
        "memory_mape_pct": 100 * float(np.mean(mem_errors)) if mem_errors else None,
        "memory_runs": len(mem_covered),
        "accuracy_spearman": float(np.mean(spearmans)) if spearmans else None,
        "accuracy_spearman_min": float(min(spearmans)) if spearmans else None,
        "regret_points": float(np.mean([r["regret_points"] for r in rows])) if rows else None,
        "regret_points_max": float(max(r["regret_points"] for r in rows)) if rows else None,
        "picked_time_ratio": float(np.median([r["picked_time_ratio"] for r in rows])) if rows else None,
        "picked_place_median": float(np.median([r["picked_place"] for r in rows])) if rows else None,
        "picked_place_max": max(r["picked_place"] for r in rows) if rows else None,
        "out_of_distribution": sum(r["out_of_distribution"] for r in rows),
        "presets": _overall_presets(rows),
        "random_run_regret_points": float(np.mean([r["random_run_regret_points"] for r in rows])) if rows else None,
        **_overall_noise(rows),
    }
    rows = [_clean_row(r) for r in rows]
    overall = _clean_row(overall)
    checked = [] if calibrations is False else validate_calibrations(
        loaded, None if calibrations is True else calibrations, calibrate=calibrate)
    return ValidationReport(rows, overall, objective, len(data), time.monotonic() - started,
                            calibrations=checked, own_runs=own_runs, seed=seed)
