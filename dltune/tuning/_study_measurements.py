"""The measurements a study holds besides its trials (``measure._codec``'s study-level records):
the framework's own default preset, for ``tune``'s comparison, and the most accurate trials
measured again with another seed. Each is stored on the study, so a resumed call reuses it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dltune.config import TrainConfig, default_preset
from dltune.data import dataset_kind
from dltune.measure import Measurement
from dltune.measure._codec import PRESET_PREFIX, REPEAT_PREFIX, decode_record, set_record
from dltune.tuning._result import StudyResult

__all__ = ["preset_for"]


def preset_for(framework: str, workload: Any, max_epochs: int | None = None) -> tuple[TrainConfig, str]:
    """The framework's own default preset (:func:`dltune.config.default_preset`) on this
    workload, and a label that says what was borrowed and what was capped."""
    dataset = dataset_kind(workload.dataset.input_shape)
    name = default_preset(framework, dataset)
    config = TrainConfig.preset(name, dataset, framework=framework)
    label = f"{name}/{dataset}"
    if name != framework:
        label += f" (no {framework} preset)"
    if max_epochs is not None and config.epochs > max_epochs:
        label += f", epochs capped {config.epochs}->{max_epochs}"
        config = config.replace(epochs=max_epochs)
    return config, label


def _stored_measurement(study: Any, key: str, workload: Any, config: TrainConfig, pool: Any,
                        env: Mapping[str, str] | None = None) -> Measurement:
    """The measurement stored on the study under ``key``, else ``config`` measured now (in
    start-up environment ``env``) and, if it ran, stored there, so a resumed run reuses it."""
    from dltune._bench import measure
    from dltune.tuning._objective import _startup_environment

    stored = decode_record(study.user_attrs, key)
    if stored is not None:
        return stored
    with _startup_environment(env or {}):
        record = measure(workload, config, pool=pool)
    if record.ok:
        set_record(study, record, key)
    return record


def _measure_preset(study: Any, workload: Any, preset: tuple[TrainConfig, str], base: TrainConfig,
                    pool: Any) -> tuple[Measurement, str]:
    """The preset's measurement (``preset_for``'s config and label), stored on the study so that
    a resumed run reuses it."""
    config, label = preset
    config = config.replace(seed=base.seed, threads=base.threads, timeout_s=base.timeout_s,
                            device=base.device)
    return _stored_measurement(study, f"{PRESET_PREFIX}{label}", workload, config, pool), label


def _compare(result: StudyResult, preset: Measurement, label: str) -> dict[str, Any] | None:
    acc = preset.metrics.get("test_accuracy") if preset.ok else None
    secs = preset.metrics.get("train_time_s") if preset.ok else None
    front = [t for t in result.pareto if t.accuracy is not None and t.train_time_s is not None]
    if not front:
        return None
    good = [t for t in front if acc is not None and t.accuracy >= acc]
    chosen = min(good, key=lambda t: t.train_time_s) if good else max(front, key=lambda t: t.accuracy)
    return {
        "preset_label": label,
        "preset_status": preset.status,
        "preset_accuracy": acc,
        "preset_train_time_s": secs,
        "preset_epochs": preset.config.get("epochs"),
        "trial": chosen.number,
        "accuracy": chosen.accuracy,
        "train_time_s": chosen.train_time_s,
        "speedup": (secs / chosen.train_time_s) if secs and chosen.train_time_s else None,
        "accuracy_gain_pts": None if acc is None else 100 * (chosen.accuracy - acc),
        "matches_preset": bool(good),
    }


def _most_accurate(study: Any, k: int) -> list[Any]:
    """The ``k`` most accurate COMPLETE trials that meet the study's constraints."""
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("test_accuracy") is not None and t.user_attrs.get("config")
            and all(v <= 0 for v in t.constraints.values())]
    return sorted(done, key=lambda t: (-float(t.user_attrs["test_accuracy"]),
                                       float(t.user_attrs.get("train_time_s") or 0.0), t.number))[:k]


def _repeat_best(study: Any, workload: Any, k: int, pool: Any, seeds: int = 1) -> list[dict[str, Any]]:
    """Measure the ``k`` most accurate trials again with ``seeds`` other seeds (theirs + 1, + 2, ...).

    A search's best trial is partly luck: the most accurate of many noisy runs. Measured again,
    its accuracy says how much; the pairs give the workload's own seed noise, which
    :func:`dltune.recommend` uses for the configurations measured on it. With several seeds a
    row also has their mean, spread and interval (``seeds``), the trial's own run left out as
    the winner of a selection. Each repeat is stored on the study
    (``repeat_measurement:<trial>``, then ``:<k>`` for the k-th further seed), so a resumed call
    measures only new ones.
    """
    from dltune._bench import mean_interval

    rows = []
    for trial in _most_accurate(study, k):
        config = TrainConfig.from_dict(trial.user_attrs["config"])
        records = [_stored_measurement(study, f"{REPEAT_PREFIX}{trial.number}" + (f":{i}" if i else ""),
                                       workload, config.replace(seed=config.seed + 1 + i), pool,
                                       trial.user_attrs.get("startup_env"))
                   for i in range(seeds)]
        record = records[0]
        metrics = record.metrics if record.ok else {}
        ok = [r.metrics for r in records if r.ok]
        spread = {name: mean_interval([m[name] for m in ok]) for name in ("test_accuracy", "train_time_s")
                  if len(ok) > 1} if seeds > 1 else None
        rows.append({
            "seeds": spread,
            "trial": trial.number,
            "seed": record.config.get("seed"),
            "status": record.status,
            "accuracy": trial.user_attrs["test_accuracy"],
            "accuracy_again": metrics.get("test_accuracy"),
            "train_time_s": trial.user_attrs.get("train_time_s"),
            "train_time_again_s": metrics.get("train_time_s"),
            "peak_rss_mb": trial.user_attrs.get("peak_rss_mb"),
            "peak_rss_again_mb": metrics.get("peak_rss_mb"),
        })
    return rows
