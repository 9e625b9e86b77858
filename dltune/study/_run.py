"""``run_study``: measure every phase of the plan within the budget, storing as it goes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltune._errors import BackendUnavailableError, ParameterError
from dltune._log import logger, quiet_optuna
from dltune._storage_url import DEFAULT_STORAGE, mask_url, resolve_storage
from dltune._validation import check_float, check_int, check_out_dir
from dltune.config import TrainConfig, usable_cores
from dltune.config._goals import refuse_renamed
from dltune.data import dataset_kind
from dltune.measure._codec import decode_record
from dltune.measure._store import STUDY_PREFIX, StudyRecord, StudyStore, load_storage_records
from dltune.study._cost import CostModel
from dltune.study._defaults import STUDY_FRAMEWORKS
from dltune.study._plan import PHASE_SHARES, StudyPlan, StudyRun, plan_study

__all__ = ["ComparativeStudyResult", "run_study"]

_GROUP_ORDER = ("defaults", "sweeps", "threads")


@dataclass
class ComparativeStudyResult:
    """What one ``run_study`` call did, and every record the study now holds."""

    workload: str
    storage: str
    plan: StudyPlan
    records: list[StudyRecord]
    ran: int = 0
    resumed: int = 0
    failed: int = 0
    skipped: list[str] = field(default_factory=list)
    tune_note: str | None = None
    elapsed_s: float = 0.0
    out: str | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "storage": mask_url(self.storage),
            "frameworks": self.plan.frameworks,
            "epoch_cap": self.plan.epoch_cap,
            "planned": len(self.plan.runs),
            "ran": self.ran,
            "resumed": self.resumed,
            "failed": self.failed,
            "skipped_for_budget": self.skipped,
            "tune_trials_per_framework": self.plan.tune_trials,
            "tune_note": self.tune_note,
            "notes": self.plan.notes,
            "records": len(self.records),
            "elapsed_s": round(self.elapsed_s, 1),
        }

    def summary_text(self) -> str:
        s = self.summary()
        lines = [
            f"study {s['workload']}: {s['ran']} runs measured, {s['resumed']} already stored, "
            f"{s['failed']} failed, {len(s['skipped_for_budget'])} skipped for the budget "
            f"({s['elapsed_s']:.0f} s); {s['records']} records",
            f"storage: {s['storage']}",
            f"frameworks: {', '.join(s['frameworks'])}; epochs capped at {s['epoch_cap']}",
        ]
        lines += [f"note: {n}" for n in s["notes"]]
        if s["tune_note"]:
            lines.append(f"tune: {s['tune_note']}")
        if self.out:
            lines.append(f"records and summary in {self.out}")
        lines.append("render it with: dltune report" + (
            f" --storage {s['storage']}" if self.storage != DEFAULT_STORAGE else ""))
        return "\n".join(lines)


def resolve_frameworks(frameworks: str | list[str]) -> tuple[list[str], list[str]]:
    """The frameworks to study and notes about those left out as unavailable."""
    from dltune._bench import interpreter_for
    from dltune.backends._registry import BACKENDS

    if isinstance(frameworks, str):
        names = list(STUDY_FRAMEWORKS) if frameworks == "all" else [
            f.strip() for f in frameworks.split(",") if f.strip()]
        implicit = frameworks == "all"
    else:
        names, implicit = list(frameworks), False
    if not names:
        raise ParameterError("The 'frameworks' parameter must name at least one backend. Got none.")
    chosen, notes = [], []
    for name in names:
        if name not in BACKENDS:
            raise ParameterError(
                f"The 'frameworks' parameter must be 'all' or a subset of "
                f"{{{', '.join(BACKENDS)}}}. Got {name!r} instead."
            )
        try:
            interpreter_for(name)
        except BackendUnavailableError as exc:
            if not implicit:
                raise
            notes.append(f"{name} left out: {exc}")
            continue
        chosen.append(name)
    if not chosen:
        raise BackendUnavailableError("No framework of the study is available here. " + " ".join(notes))
    return chosen, notes


def _log(progress: bool, text: str) -> None:
    if progress:
        logger.info(text)


def run_study(
    workload: Any = "digits",
    *,
    model: str = "lenet",
    frameworks: str | list[str] = "all",
    time_budget_s: float = 1200.0,
    storage: str | None = "default",
    out: str | Path | None = None,
    epoch_cap: int | None = None,
    tune: Callable[..., Any] | None = None,
    trials: int | None = None,
    seeds: int = 1,
    progress: bool = True,
    dataset_params: dict[str, Any] | None = None,
    pool=None,
    **renamed: Any,
) -> ComparativeStudyResult:
    """Run the comparative study on ``workload``; records already stored are not measured again.

    Phases: each framework with its own defaults; every framework with every preset; one-at-a-time
    sweeps of batch size, learning rate and epochs; thread settings; a short tune per framework
    (``trials`` trials each; by default as many as its budget share allows, 2 to 20).
    Each group of phases gets a share of the budget (see ``PHASE_SHARES``) and runs whose
    predicted time does not fit what is left are skipped and listed.

    Args:
        time_budget_s: the time budget the phases are sized to, in seconds.
        seeds: K > 1 measures every planned run with K seeds (its seed, +1, ...); each record
            holds their mean, spread and interval (:func:`dltune._bench.measure_cell`).
        storage: where the study's records are stored (and resumed from): ``"default"`` is
            ``$DLTUNE_STORAGE``, else ``sqlite:///dltune.db`` in the working folder.
        tune: the function that runs each framework's short tune, called as
            :func:`dltune.tuning.tune` (pass that one); None (or False) skips the tuning phase.
        out: a folder to write ``records.jsonl`` and ``summary.json`` to; the report is
            :func:`dltune.report.write_report` on those records (``dltune study --out`` writes
            it there as ``report.html``).
    """
    from dltune._workload import Workload, as_workload
    from dltune.runtime import WorkerPool

    refuse_renamed("run_study", renamed)
    quiet_optuna()
    t_start = time.perf_counter()
    budget_s = check_float("time_budget_s", time_budget_s, 0.0, 7 * 86400.0, low_open=True)
    budget_minutes = budget_s / 60.0
    if epoch_cap is not None:
        epoch_cap = check_int("max_epochs", epoch_cap, 1, 10000)
    if trials is not None:
        trials = check_int("trials", trials, 1, 10000)
    seeds = check_int("seeds", seeds, 1, 100)
    tune_fn = tune or None
    if tune_fn is not None and not callable(tune_fn):
        raise ParameterError(f"The 'tune' parameter must be a tune function such as "
                             f"dltune.tuning.tune, or None. Got {tune!r} instead.")
    # Nothing is written before every argument is checked: ``out`` is checked now and made
    # only once the storage is open (opening it makes its SQLite file), which comes last.
    if out is not None:
        check_out_dir("out", out, make=False)
    chosen, notes = resolve_frameworks(frameworks)
    storage = resolve_storage(storage)
    if storage is None:
        raise ParameterError("The 'storage' parameter of run_study() must be a database URL or "
                             "'default': the study stores its runs there. Got None instead.")
    if isinstance(workload, str):
        wl = Workload.from_name(workload, model, **(dataset_params or {}))
    else:
        wl = as_workload(workload, model)
    store = StudyStore(storage, wl.name)
    if out is not None:
        check_out_dir("out", out)  # now, not after the runs
    data = wl.dataset
    cost = CostModel(len(data.y_train), len(data.y_test), wl.model.flops_per_sample)
    stored = store.stored()
    for trial in stored.values():
        record = decode_record(trial.user_attrs)
        wall = trial.user_attrs.get("wall_s")
        if record is not None and wall:
            cost.observe(TrainConfig.from_dict(record.config), float(wall), record.metrics, warm=False)
    plan = plan_study(
        chosen,
        workload_fingerprint=data.fingerprint(),
        model=wl.model.name,
        n_train=len(data.y_train),
        cost=cost,
        budget_s=budget_s,
        dataset_kind=dataset_kind(data.input_shape),
        max_cores=usable_cores(),
        epoch_cap=epoch_cap,
        with_tune=tune_fn is not None,
        seeds=seeds,
    )
    plan.notes = notes + plan.notes
    if trials is not None and tune_fn is not None:
        plan.tune_trials = trials
    if plan.dataset_kind == "mnist":
        plan.notes.append("The 'mxnet' preset is MXNet's Gluon MNIST example defaults (the study "
                          "published none): SGD momentum 0.9, lr 0.1, batch 100, 10 epochs.")
    store.merge_membership(plan.membership())
    store.set_attr("plan", {"frameworks": chosen, "epoch_cap": plan.epoch_cap,
                            "budget_minutes": budget_minutes, "notes": plan.notes,
                            "dataset_kind": plan.dataset_kind})
    result = ComparativeStudyResult(wl.name, store.storage_url, plan, [], out=str(out) if out else None)
    _log(progress, f"study {wl.name}: {len(plan.runs)} planned runs over {', '.join(chosen)}, "
                   f"epochs capped at {plan.epoch_cap}, budget {budget_minutes:.3g} min")

    shares = {g: PHASE_SHARES[g] for g in _GROUP_ORDER}
    if tune_fn is not None:
        shares["tune"] = PHASE_SHARES["tune"]
    total_share = sum(shares.values())
    # One warm worker per framework, so the round-robin order does not restart them.
    own_pool = pool is None
    pool = pool or WorkerPool(max_workers=len(chosen) + 1)
    carry = 0.0
    try:
        for group in _GROUP_ORDER:
            allot = budget_s * shares[group] / total_share + carry
            spent = 0.0
            runs = [r for r in plan.runs if r.group == group]
            for i, run in enumerate(runs, 1):
                if run.key in stored:
                    result.resumed += 1
                    continue
                predicted = cost.predict(run.config) * seeds
                over_total = time.perf_counter() - t_start + predicted > budget_s
                if spent + predicted > allot or over_total:
                    result.skipped.append(f"{run.label} ({run.phases[0]}, ~{predicted:.0f} s)")
                    continue
                record, wall = _measure_one(wl, run, store, cost, predicted / seeds, pool, seeds)
                spent += wall
                result.ran += 1
                result.failed += 0 if record.ok else 1
                elapsed = (time.perf_counter() - t_start) / 60
                what = (f"acc {100 * record.metrics['test_accuracy']:.1f}%, train "
                        f"{record.metrics['train_time_s']:.1f} s" if record.ok
                        else f"FAILED: {(record.error or {}).get('message', '')[:120]}")
                _log(progress, f"[{group} {i}/{len(runs)}] {run.label}: {what} "
                               f"(wall {wall:.1f} s; {elapsed:.1f}/{budget_minutes:.3g} min)")
            carry = max(allot - spent, 0.0)
        if tune_fn is not None:
            allot = budget_s * shares["tune"] / total_share + carry
            result.tune_note = _tune_phase(tune_fn, wl, chosen, plan, store, allot, progress, pool)
        else:
            result.tune_note = "tuning phase turned off"
    finally:
        if own_pool:
            pool.close()
    result.records = store.records() + _tune_records(store.storage_url, wl.name)
    result.elapsed_s = time.perf_counter() - t_start
    if out is not None:
        _write_out(Path(out), result)
    return result


def _measure_one(wl, run: StudyRun, store: StudyStore, cost: CostModel, predicted: float, pool,
                 seeds: int = 1):
    """``run`` measured (``seeds`` seeds) and stored; returns the record and the wall time."""
    from dltune._bench import measure, measure_cell
    from dltune.backends._registry import BACKENDS

    config = run.config.replace(timeout_s=min(3600.0, max(300.0, 10 * predicted)))
    config.validate(list(BACKENDS))
    t0 = time.perf_counter()
    record = measure_cell(wl, config, seeds=seeds, pool=pool) if seeds > 1 else measure(wl, config, pool=pool)
    wall = time.perf_counter() - t0
    record.config = run.config.to_dict()
    # Stored and learnt per run (one seed), as the cost model predicts them.
    runs = max(len(record.metrics.get("repeats") or ()), 1) if record.ok else seeds
    store.add(record, run.key, run.phases, run.label, wall / runs)
    cost.observe(run.config, wall / runs, record.metrics if record.ok else None)
    return record, wall


def _tune_phase(tune_fn, wl, frameworks, plan, store, allot_s, progress, pool) -> str:
    """A short tune per framework in the same storage; its trials are the ``tune`` phase."""
    done = []
    per_fw = allot_s / max(len(frameworks), 1)
    for fw in frameworks:
        t0 = time.perf_counter()
        try:
            tune_fn(wl, frameworks=[fw], trials=plan.tune_trials, time_budget_s=max(per_fw, 1.0),
                    storage=store.storage_url, seed=0, compare_preset=False, progress=False,
                    pool=pool, thread_configs=0)  # the study measures thread variants itself
        except Exception as exc:  # noqa: BLE001 - a failed tune must not lose the study
            _log(progress, f"[tune] {fw}: failed: {type(exc).__name__}: {exc}")
            done.append(f"{fw} failed ({type(exc).__name__}: {str(exc)[:100]})")
            continue
        _log(progress, f"[tune] {fw}: up to {plan.tune_trials} trials in "
                       f"{time.perf_counter() - t0:.0f} s (limit {per_fw:.0f} s)")
        done.append(f"{fw}: up to {plan.tune_trials} trials, {per_fw:.0f} s limit")
    return "; ".join(done)


def _tune_records(storage: str, workload_name: str) -> list[StudyRecord]:
    return [r for r in load_storage_records(storage, [workload_name])
            if not (r.source or "").startswith(STUDY_PREFIX)]


def _write_out(out: Path, result: ComparativeStudyResult) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "records.jsonl").open("w") as fh:
        for rec in result.records:
            fh.write(json.dumps(rec.to_dict(), sort_keys=True) + "\n")
    (out / "summary.json").write_text(json.dumps(result.summary(), indent=1, sort_keys=True))
