"""``dltune.recommend``: the framework and configuration to use, predicted in well under a second."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dltune._errors import DltuneError, FrameworkNotPredictedError, ParameterError
from dltune._interval import Interval
from dltune._validation import check_choice, check_int
from dltune.config import (
    CONSTRAINTS,
    OBJECTIVES,
    TrainConfig,
    check_constraints,
    check_objective,
    default_preset,
)
from dltune.data import dataset_kind
from dltune.models import ModelSpec
from dltune.recommend._candidates import (
    candidate_configs,
    default_frameworks,
    measured_candidates,
    retired_frameworks,
)
from dltune.recommend._explain import explain, threads_note
from dltune.recommend._pipeline import Measured, ScoredCandidates, score_candidates
from dltune.recommend._policy import RecommendPolicy, check_policy
from dltune.recommend._result import Candidate, Recommendation

__all__ = ["RECOMMEND_CONSTRAINTS", "RECOMMEND_OBJECTIVES", "default_candidates", "recommend"]

# What ``recommend`` ranks by, and the bounds it filters its predictions with: the one
# vocabulary (dltune.config.OBJECTIVES, CONSTRAINTS), as tune's.
RECOMMEND_OBJECTIVES = OBJECTIVES
RECOMMEND_CONSTRAINTS = tuple(CONSTRAINTS)

# About how long `dltune kb calibrate` runs on a 2-core machine (the shipped calibrations took
# 3 to 6 minutes), for the caveat that suggests it.
CALIBRATE_MINUTES = 5

_hardware_cache: dict[str, Any] = {}


class _Predicted(NamedTuple):
    """What the memo keeps per question: the candidates, each framework's own defaults among
    them (:func:`default_candidates`) and the candidates as scored (:func:`score_candidates`)."""

    perf: Any  # the fitted model, kept alive so that its id in the key cannot be reused
    configs: list[TrainConfig]
    scored: ScoredCandidates
    defaults_at: list[int]


# Scored candidates per (fitted model, workload, hardware, frameworks, policy): objectives and
# constraints only re-rank them, so a repeated question costs milliseconds.
_predictions: dict[str, _Predicted] = {}


def _resolve_hardware(hardware: Any):
    from dltune.hardware import Hardware

    if hardware is None:
        if "local" not in _hardware_cache:
            _hardware_cache["local"] = Hardware.detect()
        return _hardware_cache["local"], True
    if isinstance(hardware, Hardware):
        return hardware, False
    if isinstance(hardware, dict):
        return Hardware.from_dict(hardware), False
    if isinstance(hardware, (str, Path)):
        return Hardware.from_json(hardware), False
    raise ParameterError(
        "The 'hardware' parameter must be None (this machine), a Hardware, a dict or a JSON "
        f"file path. Got {type(hardware).__name__} instead."
    )


def _check_knowledge_base(path: str | Path) -> None:
    """Refuse a knowledge-base file that is missing, a folder or not records, by the reader and
    the rule of the ``records`` files. Its first record only: the fit reads the rest when it is
    not cached, and reading a whole knowledge base takes a second."""
    from dltune.measure import load_records

    if not load_records(path, "knowledge_base", limit=1):
        raise ParameterError(f"The 'knowledge_base' file {str(path)!r} holds no records.")


def _resolve_workload(workload: Any, model: str | ModelSpec | None, perf) -> tuple[str, Any, dict[str, Any], str | None]:
    """Data set name, model spec, meta-features and data set fingerprint of the workload.

    A data set named with its default parameters that the knowledge base measured is not
    loaded at all: its recorded meta-features (landmarks included) are reused, which keeps a
    fresh ``recommend('digits')`` fast.
    """
    from dltune._workload import as_workload, model_takes
    from dltune.models import build_model, model_features

    if isinstance(workload, str):
        meta = perf.named_dataset_meta(workload)
        # Images only: their recorded (channels, height, width) rebuild a model that takes images.
        takes = model_takes(model or "lenet")
        if meta is not None and meta.get("modality", "image") == "image" and (not takes or "image" in takes):
            spec = build_model(model or "lenet", (int(meta["channels"]), int(meta["height"]),
                                                  int(meta["width"])), int(meta["num_classes"]))
            meta.update(model_features(spec))
            return workload, spec, meta, perf.named_dataset_fingerprint(workload)
    wl = as_workload(workload, model)
    fingerprint = wl.dataset.fingerprint()
    meta = perf.workload_meta(fingerprint)
    if meta is None:
        meta = wl.meta_features()
    meta.update(model_features(wl.model))
    return wl.dataset.name, wl.model, meta, fingerprint


def recommend(
    workload: Any,
    hardware: Any = None,
    objective: str = "balanced",
    constraints: dict[str, float] | None = None,
    frameworks: list[str] | None = None,
    top_k: int = 3,
    *,
    model: str | ModelSpec | None = None,
    records: list[Any] | None = None,
    storage: str | None = "default",
    knowledge_base: str | Path | None = None,
    policy: RecommendPolicy | None = None,
    include_legacy: bool = False,
) -> Recommendation:
    """The framework and configuration to use for ``workload`` on ``hardware``, predicted.

    Args:
        workload: a data set name, a :class:`~dltune.Workload`, ``(x_train, y_train,
            x_test, y_test)`` or ``(x, y)`` (a stratified 20 % held out:
            :func:`~dltune.data.holdout_split`).
        hardware: None (this machine), a :class:`~dltune.Hardware`, a dict or a JSON file.
        objective: ``accuracy`` (the surest; among those within ``policy.accuracy_tie`` of it,
            the highest predicted accuracy),
            ``time`` (fastest within ``policy.time_objective_slack`` of the most accurate) or
            ``balanced`` (accuracy points minus ``policy.balanced_points_per_halving`` per
            doubling of training time). Each ranks the accuracy a candidate is predicted to
            reach at least, the low end of its interval, not the point; ``time`` and
            ``balanced`` weigh the point too (``policy.point_share``): where every low end sits
            at chance, the low ends alone would favour the fastest.
        constraints: ``max_train_time_s``, ``max_memory_mb``, ``min_accuracy`` (0..1)
            (:data:`dltune.config.CONSTRAINTS`), applied to the predicted values.
        frameworks: candidate frameworks (default: the maintained default frameworks the
            knowledge base measured enough, installed here when recommending for this machine:
            :func:`~dltune.recommend._candidates.default_frameworks`). Naming a retired one
            (``mxnet``, ``theano``) makes it a candidate.
        top_k: how many configurations to return: the best plus up to ``top_k - 1``
            alternatives on the Pareto front (:func:`alternatives_of`).
        model: model preset, or a :class:`~dltune.models.ModelSpec` (e.g. from
            :func:`~dltune.models.load_spec`), when ``workload`` is a name or arrays (default ``lenet``).
        records: extra measurement records (or record files) to fit on.
        storage: Optuna storage whose records are added (``"default"``: ``./dltune.db`` or
            ``$DLTUNE_STORAGE`` when present; None: none).
        knowledge_base: a knowledge-base records file to use instead of the shipped one.
        policy: the decision's knobs (:class:`RecommendPolicy`; default: its defaults), which
            ``kb validate`` scores with too.
        include_legacy: make the retired frameworks (MXNet, Theano) candidates too. Without
            it, and without ``frameworks``, they are scored for comparison only: their best is
            :attr:`Recommendation.retired`, never the pick.

    Raises:
        ParameterError: bad arguments. DltuneError: no candidate meets the constraints.
    """
    from dltune._storage_url import mask_url
    from dltune.surrogate import default_storage, fitted_model
    from dltune.surrogate._records import intra_threads

    check_objective(objective)
    top_k = check_int("top_k", top_k, 1, 100)
    limits = check_constraints(constraints)
    policy = check_policy(policy)
    if not isinstance(include_legacy, bool):
        raise ParameterError(f"The 'include_legacy' parameter must be a bool. Got {include_legacy!r} instead.")
    if frameworks is not None and not frameworks:
        raise ParameterError(f"The 'frameworks' parameter must name at least one framework. "
                             f"Got {frameworks!r} instead.")
    if knowledge_base is not None:
        _check_knowledge_base(knowledge_base)
    hw, local = _resolve_hardware(hardware)
    storage = default_storage() if storage == "default" else storage
    perf = fitted_model(records=records, storage=storage, kb_path=knowledge_base)
    frameworks, compared = _frameworks(frameworks, perf, local, policy, include_legacy)
    scored_frameworks = frameworks + compared
    dataset_name, spec, meta, fingerprint = _resolve_workload(workload, model, perf)
    hw_dict = hw.to_dict()
    evidence = perf.threads_evidence(hw_dict)
    low_e, high_e = perf.config_ranges_["epochs"]
    kind = dataset_kind(spec.input_shape)
    memo_key = json.dumps([id(perf), meta, hw_dict, frameworks, compared, kind, fingerprint, spec.name, repr(policy)],
                          sort_keys=True, default=str)
    # The entry keeps its model alive, so a model's id cannot be reused while it is cached.
    if memo_key in _predictions and _predictions[memo_key].perf is perf:
        _, configs, scored, defaults_at = _predictions[memo_key]
    else:
        # No more threads than runs on a machine like this one measured (threads_note says so).
        most = evidence["most"]
        configs = candidate_configs(scored_frameworks, hw.usable_cores, (int(low_e), int(high_e)),
                                    dataset_kind=kind, policy=policy, most_threads=most)
        # The configurations measured on this workload (a `tune`'s or `bench`'s runs, or the
        # knowledge base's) are candidates too, with the accuracy they measured.
        runs, noise = perf.measured_runs(fingerprint, spec.name)
        extra, which = measured_candidates(runs, scored_frameworks, hw.usable_cores, policy, most)
        measured = Measured.of(perf, np.arange(len(configs), len(configs) + len(extra)),
                               [runs[i] for i in which], noise,
                               perf.has_own_seed_noise(fingerprint, spec.name)) if extra else None
        configs = configs + extra
        targets: dict[int | None, dict[str, Any]] = {}
        rows = []
        for config in configs:
            cores = config.threads.cores
            if cores not in targets:
                targets[cores] = dict(hw_dict, usable_cores=cores or hw_dict["usable_cores"])
            rows.append({"meta": meta, "hardware": targets[cores], "config": _config_features(config)})
        scored = score_candidates(meta, hw_dict, rows, perf, policy, measured=measured)
        defaults_at = default_candidates(configs, frameworks, kind, scored.runs)
        if len(_predictions) >= 32:
            _predictions.pop(next(iter(_predictions)))
        _predictions[memo_key] = _Predicted(perf, configs, scored, defaults_at)
    pred, sure, share, runs_of = scored.predicted, scored.ranked_by, scored.own_share, scored.runs
    acc, time = pred["accuracy"], pred["train_time_s"]
    # The retired frameworks' configurations scored for comparison only are never picked.
    candidates = np.array([c.framework in frameworks for c in configs])
    meets = np.ones(len(configs), dtype=bool)
    if "max_train_time_s" in limits:
        meets &= time <= limits["max_train_time_s"]
    if "max_memory_mb" in limits:
        meets &= pred["peak_rss_mb"] <= limits["max_memory_mb"]
    if "min_accuracy" in limits:
        meets &= acc >= limits["min_accuracy"]
    idx = np.flatnonzero(meets & candidates)
    if len(idx) == 0:
        raise DltuneError(
            f"No candidate meets the constraints {limits}: the fastest is predicted at "
            f"{time[candidates].min():.3g} s, the most accurate at {100 * acc[candidates].max():.1f}%, "
            f"the smallest at {pred['peak_rss_mb'][candidates].min():.0f} MB."
        )
    best = scored.pick(objective, idx)

    def candidate(i: int) -> Candidate:
        return Candidate(configs[i], *[Interval(float(pred[k][i]), float(pred[f"{k}_low"][i]),
                                                float(pred[f"{k}_high"][i]))
                                       for k in ("accuracy", "train_time_s", "peak_rss_mb")],
                         ranked_accuracy=float(sure[i]) if share < 1.0 else None,
                         measured_runs=int(runs_of[i]))

    alternatives = [candidate(i) for i in scored.alternatives(best, top_k - 1, idx)]
    ood, reasons, nearest = perf.novelty(meta, hw_dict, policy)
    threads = intra_threads(_config_features(configs[best]), hw_dict)
    beyond = perf.threads_reason(threads, hw_dict)
    if beyond:
        ood, reasons = True, [*reasons, beyond]
    chosen = candidate(best)
    defaults = [candidate(i) for i in defaults_at]
    note = threads_note(perf, hw_dict, threads, chosen.config.framework, evidence)
    reason = explain(chosen, objective, configs, scored, idx, frameworks, perf, nearest, ood,
                     spec.name, hw_dict, threads, evidence, note)
    among_retired = np.flatnonzero(meets & ~candidates)
    best_retired = candidate(scored.pick(objective, among_retired)) if len(among_retired) else None
    return Recommendation(
        workload=dataset_name, model=spec.name, framework=chosen.config.framework,
        config=chosen.config,
        predicted={"accuracy": chosen.accuracy, "train_time_s": chosen.train_time_s,
                   "peak_rss_mb": chosen.peak_rss_mb},
        objective=objective, alternatives=alternatives, reason=reason,
        out_of_distribution=ood, ood_reasons=reasons, nearest_workloads=nearest,
        hardware_target=hw.target, n_candidates=int(candidates.sum()), kb_records=perf.n_records_,
        constraints=limits, interval_notes=list(scored.notes), ranked_own_share=share,
        measured_runs=chosen.measured_runs, defaults=defaults, frameworks=list(frameworks),
        retired=best_retired, storage=mask_url(storage) if storage else None,
        caveat=_caveat(perf, hw_dict, reasons, meta) if ood else None,
        threads_note=note,
    )


def default_candidates(configs: list[TrainConfig], frameworks: list[str], dataset_kind: str,
                       runs: np.ndarray | None = None) -> list[int]:
    """Per framework, in ``frameworks``' order, the index of a candidate among ``configs`` that is
    its own default preset (:func:`dltune.config.default_preset`): the one measured on the
    workload in the most runs (``runs``, per candidate) where it was measured, else the first;
    frameworks without one are left out."""
    out = []
    for framework in frameworks:
        name = default_preset(framework, dataset_kind)
        found = [i for i, c in enumerate(configs) if c.framework == framework and c.preset_name == name]
        if found:
            out.append(max(found, key=lambda i: (0 if runs is None else runs[i], -i)))
    return out


def _config_features(config: TrainConfig) -> dict[str, Any]:
    """What the surrogates read of a configuration (``to_dict`` is too slow for 1000 candidates)."""
    t = config.threads
    return {"framework": config.framework, "optimizer": config.optimizer,
            "learning_rate": config.learning_rate, "momentum": config.momentum,
            "weight_decay": config.weight_decay, "batch_size": config.batch_size,
            "epochs": config.epochs, "lr_schedule": config.lr_schedule,
            "threads": {"intra_op": t.intra_op, "inter_op": t.inter_op, "blas": t.blas, "cores": t.cores}}


def _frameworks(requested: list[str] | None, perf, local: bool, policy: RecommendPolicy,
                include_legacy: bool = False) -> tuple[list[str], list[str]]:
    """The candidate frameworks, and the retired ones scored for comparison only.

    The candidates: those requested (with ``include_legacy``, and the retired ones), else
    :func:`default_frameworks` of those measured enough for their training time to be
    predicted (``PerformanceModel.predictable_frameworks``), with ``include_legacy`` the retired
    ones too; installed here when recommending for this machine. Compared: without
    ``requested`` or ``include_legacy``, the retired frameworks that can be predicted."""
    predictable = perf.predictable_frameworks(policy.min_framework_runs, policy.min_framework_workloads)
    legacy = retired_frameworks(predictable) if include_legacy else []
    if requested is not None:
        if isinstance(requested, str):
            requested = [requested]
        for name in requested:
            if name not in perf.frameworks_:
                try:
                    check_choice("frameworks", name, perf.frameworks_)
                except ParameterError as exc:
                    raise FrameworkNotPredictedError(str(exc)) from None
            if name not in predictable:
                runs = perf.framework_runs_[name]
                raise FrameworkNotPredictedError(
                    f"The 'frameworks' parameter names {name}, of which the surrogates have "
                    f"{runs['runs']} run{'s' if runs['runs'] != 1 else ''} on {runs['workloads']} "
                    f"workload{'s' if runs['workloads'] != 1 else ''}: too few to predict its training "
                    f"time (at least {policy.min_framework_runs} runs on {policy.min_framework_workloads} workloads, or "
                    f"half the workloads and a tenth of the runs of the most measured framework). "
                    f"More `dltune bench` or `dltune tune` runs of it would make it a candidate."
                )
        return list(dict.fromkeys([*requested, *legacy])), []
    chosen = default_frameworks(predictable, here=local) + legacy
    compared = [] if include_legacy else retired_frameworks(predictable)
    if not chosen:
        raise DltuneError(
            f"The knowledge base predicts only retired frameworks ({', '.join(compared)}): name one "
            "with 'frameworks' (--frameworks) or pass include_legacy=True (--include-legacy)."
        )
    if not local:
        return chosen, compared
    from dltune._bench import interpreter_for

    available = []
    for name in chosen:
        try:
            interpreter_for(name)
            available.append(name)
        except DltuneError:
            continue
    if not available:
        raise DltuneError(
            f"None of the candidate frameworks the knowledge base measured ({', '.join(chosen)}) is "
            "installed here; install one (e.g. pip install 'dltune[torch]') or pass 'hardware' "
            "to recommend for another machine."
        )
    return available, compared


def _caveat(perf, hardware: dict[str, Any], reasons: list[str], meta: dict[str, Any]) -> str:
    """One calm line on what an out-of-distribution recommendation rests on: for a workload
    outside the measured range, the first way it is (the accuracy is a guess there); for a
    machine the knowledge base never measured, whose times are estimated from and how to
    measure this one; else the first reason (``Recommendation.details`` lists them all)."""
    outside = perf.outside_reasons(meta)
    if outside:
        return f"{outside[0].split(' (')[0]}: the figures are rough"
    if perf.machine_of(hardware) not in perf.calibrated_machines() and not perf.machines_alike(hardware):
        cpu, cores = perf.reference_machine_.split("|")[:2]
        return (f"times estimated from {cpu} ({cores} cores): `dltune kb calibrate` "
                f"(about {CALIBRATE_MINUTES} min) measures this one")
    first = reasons[0] if reasons else "outside what the knowledge base measured"
    return f"{first.split(' (')[0]}: the figures are rough"
