"""The recommendation's reason: one paragraph on the pick, what it was measured or predicted
from, and how it was ranked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dltune.config import TrainConfig
from dltune.measure._noise import MIN_NOISE_PAIRS
from dltune.recommend._format import framework_label
from dltune.recommend._pipeline import Measured, ScoredCandidates
from dltune.recommend._result import Candidate

__all__ = ["explain", "threads_note"]


def explain(chosen: Candidate, objective: str, configs: Sequence[TrainConfig], scored: ScoredCandidates,
            idx: np.ndarray, frameworks: Sequence[str], perf: Any, nearest: list[tuple[str, float]],
            ood: bool, model_name: str, hardware: dict[str, Any], threads: int | None,
            evidence: dict[str, Any], note: str | None) -> str:
    """The recommendation's reason: why ``chosen`` (of the candidates ``idx`` meeting the
    constraints), what was measured of it, how it was ranked, and where its training times come
    from; ``evidence`` and ``note`` are the threads' (``threads_evidence``, :func:`threads_note`)."""
    from dltune.surrogate._machines import machine_factor

    measured, share = scored.measured, scored.own_share
    reason = _choice(chosen, objective, configs, scored, idx, frameworks, perf, nearest, ood)
    if measured is not None and chosen.measured_runs:
        reason += (f" This configuration was measured on this workload ({chosen.measured_runs} "
                   f"run{'s' if chosen.measured_runs > 1 else ''}): its accuracy is the measured mean, "
                   f"and its interval that of one more run, given seed noise of "
                   f"{100 * float(measured.noise.at(chosen.accuracy[0])):.2f} points per run "
                   f"at that accuracy{_noise_source(measured)}.")
    elif measured is not None:
        reason += (f" The {measured.configs} configurations measured on this workload were "
                   f"candidates too, with the accuracy they measured and the interval of one more run "
                   f"(seed noise of {100 * float(measured.noise.at(measured.accuracy.max())):.2f} points per "
                   f"run at the best of them, {100 * measured.accuracy.max():.1f}%{_noise_source(measured)}).")
    if share < 1.0:
        of_model = model_name if perf.model_measured(model_name) else None
        reason += (f" Its own predictions are extrapolated: candidates are ranked {100 * share:.0f}% by the "
                   f"accuracy predicted at least for it and {100 * (1 - share):.0f}% by the accuracy each "
                   f"configuration is predicted to reach at least across the measured "
                   + (f"{of_model} workloads" if of_model else "workloads (of every model)")
                   + " (the ranked at figures), and its accuracy intervals reach what it reached across them.")
    # A description that cannot tell apart the measured machines of its CPU: its times span
    # them (hedge_machines' note), not one machine's model or speed.
    spanned = len(perf.machines_alike(hardware)) >= 2
    machine = perf.machine_of(hardware)
    speed = None if spanned else perf.machine_speed_.get(machine)
    own = None if spanned else perf.time_source(hardware, chosen.config.framework)
    if own:
        reason += (f" Training times come from a cost model fitted on this machine's own runs "
                   f"({own['records']} runs of {own['workloads']} workloads, "
                   f"{' and '.join(own['frameworks'])}).")
    elif speed and perf.reference_frameworks_ is not None and chosen.config.framework not in perf.reference_frameworks_:
        # No speed to compare with: the reference machine never ran the framework (a model saved
        # before reference_frameworks_ was kept, None, reads every factor as a speed).
        fw = chosen.config.framework
        reason += (f" The machine most of the knowledge base was measured on never ran {fw}, so "
                   f"there is no speed to compare with: {fw}'s training times are "
                   + ("the cost model's, scaled to this machine's own runs of it." if fw in speed
                      else "extrapolated by the cost model, and this machine has too few runs of it "
                      "to scale them (more `dltune bench` or `tune` runs of it would)."))
    elif speed:
        factor = math.exp(machine_factor(speed, chosen.config.framework, model_name, threads))
        reason += (f" Training times are scaled to this machine's measured speed: its runs took "
                   f"{factor:.2g}x as long as those of the machine most of the knowledge base was "
                   f"measured on, {_for_framework(speed, chosen.config.framework)}"
                   f"{_threads_gain(speed, chosen.config.framework, threads)}.")
    now = None if spanned else perf.machine_now_.get(machine)
    if now:
        info = perf.machine_now_info_[machine]
        if info.get("here", True):
            factor = math.exp(machine_factor(now, chosen.config.framework, model_name, threads))
            reason += (f" This machine's calibration ({info['runs']} runs, {info['measured_to']}) ran "
                       f"{factor:.2g}x as long as this machine ran them for the knowledge base, "
                       f"{_for_framework(now, chosen.config.framework)}"
                       f"{_threads_gain(now, chosen.config.framework, threads)}:"
                       f" training times are scaled to it.")
        else:
            ratio = machine_factor(info["ratio"], chosen.config.framework, model_name)
            factor = math.exp(machine_factor(now, chosen.config.framework, model_name))
            reason += (f" A machine of this kind ran the shipped calibration ({info['runs']} runs, "
                       f"{info['measured_to']}) {ratio:.2g}x as long as the knowledge base's runs, "
                       f"{_for_framework(info['ratio'], chosen.config.framework)}: its speed varies from day to day, so training "
                       f"times are scaled {factor:.2g}x and their interval reaches both speeds "
                       f"(`dltune kb calibrate` measures this machine's speed now).")
    if note:
        reason += f" Threads: {note}" + (
            "; `python scripts/kb_many_cores.py` measures a knowledge-base slice there." if not evidence["runs"]
            else ": training times there are scaled by what those runs gained."
            if threads and threads > evidence["measured"] else ".")
    return reason


def threads_note(perf: Any, hardware: dict[str, Any], threads: int | None, framework: str,
                 evidence: dict[str, Any] | None = None) -> str | None:
    """One line (of at most about 110 characters) on what the pick's ``threads`` on ``hardware``
    rest on, where it has more usable cores than the reference machine's runs used: the runs with
    more threads measured on its machine (``PerformanceModel.threads_evidence``), or that there
    are none and how to measure them. None where every usable core count was measured.
    ``evidence``: ``perf.threads_evidence(hardware)``, where the caller has it already."""
    evidence = evidence or perf.threads_evidence(hardware)
    top, usable = evidence["measured"], hardware.get("usable_cores") or hardware.get("logical_cores")
    if usable is None or usable <= top:
        return None
    runs = evidence["runs"]
    if not runs:
        how = "were never measured on such a machine (`dltune kb calibrate` there measures them)"
        if threads is not None and threads > top:
            return f"{threads} threads extrapolated: more than {top} {how}"
        return f"at most {top} of {usable} cores: more {how}"
    mine = sum(evidence["frameworks"].get(framework, {}).values())
    at = ", ".join(f"{k} at {n}" for n, k in runs.items())
    measured = f"{sum(runs.values())} runs of {evidence['machine']} with more than {top} ({at}; {mine} {framework})"
    if threads is not None and threads > top:
        return f"{threads} threads, from {measured}"
    return f"{threads or 'default'} threads: by {measured}, more do not pay"


def _choice(chosen: Candidate, objective: str, configs: Sequence[TrainConfig], scored: ScoredCandidates,
            idx: np.ndarray, frameworks: Sequence[str], perf: Any, nearest: list[tuple[str, float]],
            ood: bool) -> str:
    """The paragraph's start: the pick, each other framework's best and the nearest workloads.
    The candidates were ranked by ``scored.ranked_by``; what is shown is ``scored.predicted``
    (widened out of distribution). Where the ranking is not the shown low end but its mix with
    the consensus (an unlike workload: ``chosen.ranked_accuracy`` is set), each figure names it too."""
    c = chosen.config
    pred, sure, runs_of, policy = scored.predicted, scored.ranked_by, scored.runs, scored.policy
    time = pred["train_time_s"]
    per_halving = policy.balanced_points_per_halving

    def ranked(value: float) -> str:
        return "" if chosen.ranked_accuracy is None else f" (ranked at {100 * value:.1f}%)"

    goal = {"accuracy": "the highest accuracy it is predicted to reach at least (within "
                        f"{100 * policy.accuracy_tie:.1f} points of it counts as tied, and the highest predicted "
                        "accuracy among those wins)",
            "time": f"the shortest predicted training time within {100 * policy.time_objective_slack:.0f} "
                    "accuracy points of the most accurate candidate",
            "balanced": "the best balance of accuracy and training time ("
                        + ("one accuracy point is" if per_halving == 1 else f"{per_halving:g} accuracy points are")
                        + " worth halving the time)"}[objective]
    # Configurations of frameworks scored for comparison only (retired) are no candidates.
    n_candidates = sum(config.framework in frameworks for config in configs)
    parts = [
        f"Of {n_candidates} candidates ({len(idx)} meeting the constraints) across "
        f"{' and '.join(framework_label(f) for f in frameworks)}, the {framework_label(c.framework)} configuration with {c.optimizer}, learning rate "
        f"{c.learning_rate:g}, batch {c.batch_size} and {c.epochs} epochs has {goal}: "
        f"{100 * chosen.accuracy[0]:.1f}% {'measured' if chosen.measured_runs else 'predicted'}, at least {100 * chosen.accuracy[1]:.1f}%{ranked(chosen.ranked_accuracy)}, "
        f"in {chosen.train_time_s[0]:.3g} s. Accuracy is ranked by the low end of its interval"
        + (f" blended with its point (weight {policy.point_share:g})" if objective != "accuracy" else "")
        + ", what the surrogates are confident of: a configuration predicted a little more "
        "accurate but less surely ranks below."
    ]
    others = []
    for fw in frameworks:
        if fw == c.framework:
            continue
        mine = [i for i in idx if configs[i].framework == fw]
        if mine:
            j = max(mine, key=lambda i: (sure[i], -time[i]))
            others.append(f"{framework_label(fw)}'s best ranked for accuracy: {100 * pred['accuracy'][j]:.1f}% "
                          f"{'measured' if runs_of[j] else 'predicted'}, "
                          f"at least {100 * pred['accuracy_low'][j]:.1f}%{ranked(sure[j])}, in {time[j]:.3g} s")
    if others:
        parts.append("For comparison, " + "; ".join(others) + ".")
    names = ", ".join(f"{n} ({d:.2f})" for n, d in nearest)
    parts.append(
        f"Predictions come from surrogates fitted on {perf.n_records_} measurements of "
        f"{len(perf.workloads_)} workloads; the nearest measured workloads are {names}."
    )
    if ood:
        parts.append("This workload or hardware lies outside what was measured: treat the "
                     "numbers as rough and verify with --verify or dltune.benchmark.")
    return " ".join(parts)


def _noise_source(measured: Measured) -> str:
    """Where a workload's seed noise came from, for the reason."""
    if measured.own_noise:
        return ", from its own repeat pairs"
    return (f", borrowed from its nearest measured workloads: it has fewer than {MIN_NOISE_PAIRS} "
            "configurations measured with two seeds away from 0 and 100% "
            "(`dltune tune --repeat-best 3` measures them)")


def _for_framework(entry: dict[str, float], framework: str) -> str:
    """The reason's words for whose factor a machine's ``entry`` gives ``framework``: its own,
    else the one over the frameworks that machine ran (``machine_factor``'s fallback)."""
    if framework in entry:
        return f"for {framework}"
    # The per-framework keys: not "*", "~..." (spreads), "<framework>/<model>" or "...@<threads>".
    ran = sorted(k for k in entry if k[:1] not in ("*", "~") and "/" not in k and "@" not in k)
    return (f"over {', '.join(ran)} ({framework} was not among its runs)" if ran
            else f"over its runs ({framework} was not among them)")


def _threads_gain(entry: dict[str, float], framework: str, threads: int | None) -> str:
    """The reason's words for a machine factor's thread delta at ``threads`` (empty without one)."""
    from dltune.surrogate._machines import thread_delta

    delta = thread_delta(entry, framework, threads)
    return (f" at {threads} threads (what its runs with more threads than the knowledge base's "
            f"gained: {math.exp(delta):.2g}x the extrapolation from fewer)") if delta else ""
