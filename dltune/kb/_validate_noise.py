"""What repeats say is reachable: a run's seed noise, and the accuracy rank correlation and
regret that a predictor of every configuration's expected accuracy would score (the ceilings
and floors of ``kb validate``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dltune.measure._noise import seed_noise

__all__ = ["by_config", "noise_scores", "overall_noise", "regret_floor", "repeat_pairs", "spearman"]


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
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


def repeat_pairs(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of records of one configuration that differ only in the seed (the build's repeats)."""
    pairs = []
    for indices in by_config(records).values():
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


def by_config(records: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], str] = _config_key,
               ) -> dict[str, list[int]]:
    """Indices of the records of each configuration (as ``key`` of a record's configuration
    tells them apart), in the records' order."""
    out: dict[str, list[int]] = {}
    for i, d in enumerate(records):
        out.setdefault(key(d["config"]), []).append(i)
    return out


def noise_scores(records: Sequence[dict[str, Any]], accuracy: np.ndarray, seed: int = 0,
           scored: np.ndarray | None = None) -> dict[str, Any]:
    """What repeats say is reachable: the time error of a perfect predictor of the mean of two
    runs, the accuracy rank correlation left once each run carries the seed noise, and the
    regret left (:func:`regret_floor`).

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
    pairs = repeat_pairs(records)
    if not pairs:
        return {"repeats": 0, "repeat_time_ape_pct": None, "accuracy_noise_points": None,
                "accuracy_tied_top_pct": None, "accuracy_spearman_ceiling": None,
                "regret_floor_points": None}
    t = np.array([[a["metrics"]["train_time_s"], b["metrics"]["train_time_s"]] for a, b in pairs])
    ape = np.abs(t - t.mean(axis=1, keepdims=True)) / t
    diff = np.array([a["metrics"]["test_accuracy"] - b["metrics"]["test_accuracy"] for a, b in pairs])
    sigma = seed_noise(diff)
    rng = np.random.default_rng(seed)
    ranked = accuracy if scored is None else accuracy[scored]
    # A jitter far below one test sample breaks the ties that noise 0 would leave.
    draws = [spearman(ranked, ranked + rng.normal(0.0, sigma, len(ranked))
                       + rng.uniform(0.0, 1e-9, len(ranked))) for _ in range(50)]
    draws = [d for d in draws if d is not None]
    return {"repeats": len(pairs), "repeat_time_ape_pct": 100 * float(ape.mean()),
            "accuracy_noise_points": 100 * sigma,
            "accuracy_tied_top_pct": 100 * float(np.mean(ranked == ranked.max())),
            "accuracy_spearman_ceiling": float(np.mean(draws)) if draws else None,
            "regret_floor_points": regret_floor(accuracy, sigma, seed)}


def regret_floor(accuracy: np.ndarray, sigma: float, seed: int = 0, draws: int = 200) -> float:
    """The regret, in points, of a predictor that knew every configuration's expected accuracy
    exactly, given seed noise ``sigma``: the measured accuracies taken as the expected ones, each
    run measured again with that Gaussian noise (``draws`` times), the best of those runs minus
    the run of the configuration expected best (of tied ones, any: each is as good a pick).

    The same model of the noise as the Spearman ceiling's (:func:`noise_scores`). Measured accuracies
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


def overall_noise(rows: list[dict[str, Any]]) -> dict[str, Any]:
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
