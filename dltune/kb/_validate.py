"""Leave-one-workload-out validation of the surrogates and of the recommendation."""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_int
from dltune.kb._validate_noise import by_config, noise_scores, overall_noise, spearman
from dltune.kb._validate_report import BARS, ValidationReport
from dltune.recommend._pipeline import Measured, score_candidates
from dltune.recommend._policy import DEFAULT_POLICY, RecommendPolicy, check_policy

__all__ = ["ValidationReport", "validate_calibrations", "validate_kb"]


def _own_runs(held: list[dict[str, Any]], k: int, seed: int, label: str) -> tuple[list[dict[str, Any]], np.ndarray]:
    """``k`` of ``held``'s configurations drawn at random, one run of each (its first on
    record), as a short tune of the workload would have measured them; and which of ``held``'s
    runs are of other configurations (those scored). The draw depends on ``seed`` and the
    workload alone, not on which other workloads are held out."""
    from dltune.surrogate._seed_noise import measured_key

    scored = np.ones(len(held), dtype=bool)
    if k == 0:
        return [], scored
    # Configurations as recommend's measured candidates tell them apart (threads aside): a run
    # of a drawn configuration at another thread count would be scored on what was measured.
    groups = list(by_config(held, measured_key).values())
    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    drawn = sorted(rng.choice(len(groups), size=k, replace=False))
    for g in drawn:
        scored[groups[g]] = False
    return [held[groups[g][0]] for g in drawn], scored


def _measured(model: Any, held: list[dict[str, Any]]) -> Measured | None:
    """The runs of ``held`` whose configuration the model measured on their workload, as
    ``recommend``'s measured candidates (:class:`~dltune.recommend._pipeline.Measured`), or None."""
    from dltune.surrogate._seed_noise import measured_key

    w = held[0]["workload"]
    runs, noise = model.measured_runs(w.get("fingerprint"), w.get("model") or w["meta"].get("model"))
    by_key = {measured_key(m["config"]): m for m in runs}
    hits = [(i, by_key[k]) for i, d in enumerate(held) if (k := measured_key(d["config"])) in by_key]
    if not hits:
        return None
    return Measured.of(model, [i for i, _ in hits], [m for _, m in hits], noise)


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


def held_out_workloads(data: Sequence[dict[str, Any]], min_records: int = 3, own_runs: int = 0
                       ) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[str, list[dict[str, Any]]]]]:
    """Usable records by workload label, and the workloads held out in turn (by label): those
    with ``min_records`` runs and ``own_runs + min_records`` configurations or more."""
    from dltune.surrogate._records import workload_label
    from dltune.surrogate._seed_noise import measured_key

    groups: dict[str, list[dict[str, Any]]] = {}
    for d in data:
        groups.setdefault(workload_label(d), []).append(d)
    held_out = [(label, held) for label, held in sorted(groups.items())
                if len(held) >= min_records and len(by_config(held, measured_key)) >= own_runs + min_records]
    return groups, held_out


def recommendable(model: Any, held: Sequence[dict[str, Any]], policy: RecommendPolicy) -> np.ndarray:
    """Which of a held-out workload's runs ``recommend`` would choose among when no framework is
    named: those of its default candidates (never a retired framework), or all where none is."""
    from dltune.recommend._candidates import default_frameworks

    allowed = set(default_frameworks(model.predictable_frameworks(
        policy.min_framework_runs, policy.min_framework_workloads), here=False))
    return np.array([i for i, d in enumerate(held) if d["config"]["framework"] in allowed] or range(len(held)))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _load(items: Sequence[Any], name: str) -> list[Any]:
    """Records given as records, dicts or files; a file's errors name parameter ``name``."""
    from dltune.measure import load_records

    out: list[Any] = []
    for item in items:
        out.extend(load_records(item, name) if isinstance(item, str) else [item])
    return out


def _time_scores(model: Any, held: list[dict[str, Any]], policy: RecommendPolicy) -> tuple[np.ndarray, np.ndarray]:
    """Each run's measured over predicted training time (at the epochs it ran), and whether
    the measured time lies in the interval; the runs of one workload on one machine, scored as
    ``recommend`` scores candidates (:func:`~dltune.recommend.score_candidates`: hedged and
    widened by ``policy``)."""
    from dltune.surrogate import record_row
    from dltune.surrogate._records import epochs_ran

    rows = [epochs_ran(d, record_row(d)) for d in held]
    point, low, high = (np.empty(len(held)) for _ in range(3))
    # Candidates are scored on one hardware: the runs that recorded the same one together.
    same: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        same.setdefault(json.dumps(row["hardware"], sort_keys=True, default=str), []).append(i)
    for index in same.values():
        pred = score_candidates(rows[index[0]]["meta"], rows[index[0]]["hardware"], [rows[i] for i in index],
                                model, policy).predicted
        point[index], low[index], high[index] = (pred[k] for k in ("train_time_s", "train_time_s_low",
                                                                   "train_time_s_high"))
    t = np.array([d["metrics"]["train_time_s"] for d in held], dtype=float)
    return t / point, (low <= t) & (t <= high)


def validate_calibrations(
    records: Sequence[Any] | None = None,
    calibrations: Sequence[Any] | None = None,
    calibrate: bool = True,
    policy: RecommendPolicy = DEFAULT_POLICY,
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
        policy: what the intervals are widened by (:class:`~dltune.recommend.RecommendPolicy`).
    """
    from dltune.hardware import cpu_identity
    from dltune.kb._calibrate import calibration_records
    from dltune.kb._store import load_shipped_records
    from dltune.surrogate import PerformanceModel, usable_records
    from dltune.surrogate._machines import machine_key
    from dltune.surrogate._records import display_name, workload_label

    kb = usable_records(load_shipped_records() if records is None else _load(records, "records"))
    runs = usable_records(calibration_records() if calibrations is None
                          else _load(calibrations, "calibrations"))
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
            plain, plain_in = _time_scores(base, held, policy)
            ratio, inside = _time_scores(model, held, policy)
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
    policy: RecommendPolicy | None = None,
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
    (:func:`~dltune.kb._validate_noise.regret_floor`). Each held-out workload is also flagged out of
    distribution or not as ``recommend`` would flag it (``out_of_distribution``, with
    ``nearest_distance`` to the nearest other workload of its model), and its configurations
    are scored as ``recommend`` scores candidates, through the same pipeline
    (:func:`~dltune.recommend.score_candidates`): hedged and widened before they are scored,
    and the pick, as ``recommend``'s, ranks the low ends as learnt, mixed with the consensus of
    the other workloads of its model where it is unlike them (``PerformanceModel.ranking_accuracy``,
    whose share of its own low ends is ``ranked_own_share``).

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
        policy: the decision's knobs (:class:`~dltune.recommend.RecommendPolicy`; default: its
            defaults, ``recommend``'s).
    """
    from dltune.hardware import cpu_identity
    from dltune.kb._store import load_shipped_records
    from dltune.recommend._recommend import RECOMMEND_OBJECTIVES
    from dltune.surrogate import PerformanceModel, record_row, usable_records
    from dltune.surrogate._features import memory_as_now, ran_in_new_process, workload_facts
    from dltune.surrogate._machines import blas_kernels
    from dltune.surrogate._records import display_name, epochs_ran

    check_choice("objective", objective, RECOMMEND_OBJECTIVES)
    check_int("own_runs", own_runs, 0)
    check_int("seed", seed, 0)
    policy = check_policy(policy)
    if not isinstance(calibrations, bool):
        # Read before the held-out fits (minutes), not after them: a wrong file fails first.
        calibrations = _load(calibrations, "calibrations")
    started = time.monotonic()
    loaded: list[Any] = load_shipped_records() if records is None else _load(records, "records")
    data = usable_records(loaded)
    groups, held_out = held_out_workloads(data, min_records, own_runs)
    if len(groups) < 2:
        raise ParameterError(
            f"The 'records' parameter must cover at least 2 workloads. Got {len(groups)} instead."
        )
    rows, errors, errors_configured, covered, acc_errors = [], [], [], [], []
    acc_covered: list[bool] = []
    mem_covered: list[bool] = []
    mem_errors: list[float] = []
    machine_errors: dict[str, list[float]] = {}
    from dltune.surrogate._seed_noise import measured_key

    if not held_out:
        raise ParameterError(
            f"No workload has {own_runs + min_records} configurations or more to hold out with "
            f"'own_runs' {own_runs} (the most any has: {max(len(by_config(g, measured_key)) for g in groups.values())}).")
    from dltune._log import Progress

    bar = Progress(len(held_out), "validate", unit="workload") if progress else None
    for label, held in held_out:
        if bar is not None:
            bar.set_postfix_str(display_name(held[0]["workload"]))
        given, scored = _own_runs(held, own_runs, seed, label)
        train = [d for other, ds in groups.items() if other != label for d in ds] + given
        model = PerformanceModel(calibrate=calibrate).fit(train)
        held_rows = [record_row(d) for d in held]
        # As recommend sees it: flagged out of distribution or not, and its configurations the
        # candidates, scored as recommend scores them (what is scored, and what the pick ranks).
        # Those measured on it (its own runs, if any) take the accuracy they measured and the
        # interval of one more run, as recommend's measured candidates do.
        meta, hardware = held_rows[0]["meta"], held_rows[0]["hardware"]
        ood, _, nearest = model.novelty(meta, hardware, policy)
        as_recommended = score_candidates(meta, hardware, held_rows, model, policy,
                                          measured=_measured(model, held))
        pred, share = as_recommended.predicted, as_recommended.own_share
        # The time model is asked about the epochs each run trained: a run stopped early
        # (diverged) took the time of the epochs it ran, which no time model can foresee from
        # the configuration. ``as configured`` scores the configured epochs too.
        ran_rows = [epochs_ran(d, row) for d, row in zip(held, held_rows, strict=True)]
        stopped = np.array([a is not b for a, b in zip(ran_rows, held_rows, strict=True)])
        t_pred = score_candidates(meta, hardware, ran_rows, model, policy).predicted if stopped.any() else pred
        t_true = np.array([d["metrics"]["train_time_s"] for d in held])
        a_true = np.array([d["metrics"]["test_accuracy"] for d in held])
        # The pick is made among all of the workload's configurations (the drawn own runs too);
        # the rest is scored on the runs the fit has not seen (all of them without own runs).
        # Among recommend's default candidates (never a retired framework), the regret against
        # the best of those same candidates: what a user asking for no framework gets.
        among = recommendable(model, held, policy)
        chosen = as_recommended.pick(objective, among)
        best = int(among[np.lexsort((t_true[among], -a_true[among]))[0]])
        regret = round(100 * float(a_true[best] - a_true[chosen]), 9)
        place = 1 + int((a_true[among] > a_true[chosen]).sum())
        time_ratio = float(t_true[chosen] / t_true[best])
        picked = {k: held[chosen]["config"][k] for k in
                  ("framework", "optimizer", "learning_rate", "batch_size", "epochs")}
        noise = noise_scores(held, a_true, scored=scored)
        presets = _presets(held, a_true, t_true, best)
        mean_regret = round(100 * float(a_true[best] - a_true[among].mean()), 9)
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
            **{k: v for k, v in workload_facts(meta, held[0]["workload"].get("model")).items()
               if k in ("model_family", "modality")},
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
            "accuracy_spearman": spearman(pred["accuracy"], a_true),
            "train_time_spearman": spearman(pred["train_time_s"], t_true),
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
        **overall_noise(rows),
    }
    rows = [_clean_row(r) for r in rows]
    overall = _clean_row(overall)
    checked = [] if calibrations is False else validate_calibrations(
        loaded, None if calibrations is True else calibrations, calibrate=calibrate, policy=policy)
    return ValidationReport(rows, overall, objective, len(data), time.monotonic() - started,
                            calibrations=checked, own_runs=own_runs, seed=seed)
