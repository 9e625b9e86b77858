"""What the study measures: its phases, their runs, and how they are sized to a time budget."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from dltune.config import ThreadConfig, TrainConfig, default_preset
from dltune.study._cost import CostModel
from dltune.study._defaults import preset_config, study_presets

__all__ = [
    "PHASES",
    "PHASE_SHARES",
    "StudyPlan",
    "StudyRun",
    "config_key",
    "plan_study",
    "thread_variants",
]

# Phase names, in the order they run; the sweeps are one phase per swept parameter.
PHASES = (
    "defaults",
    "cross_defaults",
    "sweep:batch_size",
    "sweep:learning_rate",
    "sweep:epochs",
    "threads",
    "tune",
)
# Share of the budget of each group of phases; what a group leaves unused passes to the next.
PHASE_SHARES = {"defaults": 0.35, "sweeps": 0.30, "threads": 0.15, "tune": 0.20}
_EPOCH_CAPS = (200, 100, 50, 30, 20, 10, 5, 3, 2, 1)
_BATCH_GRID = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
_LR_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
_EPOCH_GRID = (1, 2, 3, 5, 10, 20, 50, 100, 200)


def config_key(workload_fingerprint: str, model: str, config: TrainConfig) -> str:
    """A stable name for "this configuration on this workload", used to resume."""
    data = config.to_dict()
    data.pop("timeout_s", None)
    text = json.dumps({"w": workload_fingerprint, "m": model, "c": data}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass
class StudyRun:
    """One configuration to measure and the phases (and labels) it belongs to."""

    key: str
    config: TrainConfig
    phases: list[str]
    label: str

    @property
    def group(self) -> str:
        return _group(self.phases[0])


def _group(phase: str) -> str:
    if phase in ("defaults", "cross_defaults"):
        return "defaults"
    return "sweeps" if phase.startswith("sweep:") else phase


@dataclass
class StudyPlan:
    """The runs of a study in execution order, the epoch cap and notes for the report."""

    frameworks: list[str]
    dataset_kind: str
    epoch_cap: int
    runs: list[StudyRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tune_trials: int = 0

    def add(self, key: str, config: TrainConfig, phase: str, label: str) -> None:
        for run in self.runs:
            if run.key == key:
                if phase not in run.phases:
                    run.phases.append(phase)
                return
        self.runs.append(StudyRun(key, config, [phase], label))

    def membership(self) -> dict[str, list[str]]:
        return {run.key: list(run.phases) for run in self.runs}

    def in_phase(self, phase: str) -> list[StudyRun]:
        return [run for run in self.runs if phase in run.phases]


def thread_variants(max_cores: int) -> list[tuple[str, ThreadConfig]]:
    """The thread / parallel-library settings the study compares, valid on ``max_cores``.

    Ordered by priority (a budget cut drops the last): the defaults, one core, one thread,
    two threads, two cores, then the mixed intra-op / BLAS settings.
    """
    two = max_cores >= 2
    variants = [
        ("default", ThreadConfig()),
        ("1 core", ThreadConfig(intra_op=1, inter_op=1, blas=1, cores=1)),
        ("intra 1, blas 1", ThreadConfig(intra_op=1, inter_op=1, blas=1)),
    ]
    if two:
        variants += [
            ("intra 2, blas 2", ThreadConfig(intra_op=2, inter_op=1, blas=2)),
            ("2 cores", ThreadConfig(intra_op=2, inter_op=1, blas=2, cores=2)),
            ("intra 2, blas 1", ThreadConfig(intra_op=2, inter_op=1, blas=1)),
            ("intra 1, blas 2", ThreadConfig(intra_op=1, inter_op=1, blas=2)),
            ("inter 2", ThreadConfig(intra_op=1, inter_op=2, blas=1)),
        ]
    return variants


def _spread(values: list, base, count: int) -> list:
    """Up to ``count`` values of a grid, evenly spread in order, always including ``base``."""
    values = sorted(set(values) | {base})
    if len(values) <= count:
        return values
    picked = sorted({values[round(i * (len(values) - 1) / (count - 1))] for i in range(count)})
    if base not in picked:
        nearest = min(picked, key=lambda v: abs(values.index(v) - values.index(base)))
        picked[picked.index(nearest)] = base
    return sorted(picked)


def _capped(config: TrainConfig, cap: int) -> TrainConfig:
    return config.replace(epochs=min(config.epochs, cap))


def plan_study(
    frameworks: Iterable[str],
    *,
    workload_fingerprint: str,
    model: str,
    n_train: int,
    cost: CostModel,
    budget_s: float,
    dataset_kind: str = "mnist",
    max_cores: int = 2,
    epoch_cap: int | None = None,
    with_tune: bool = True,
    seeds: int = 1,
) -> StudyPlan:
    """Lay out every phase for ``frameworks``, sized so the predicted cost fits ``budget_s``.

    The epoch cap is the largest of 200, 100, 50, ... for which the defaults and cross-defaults
    runs are predicted to fit their share of the budget (unless ``epoch_cap`` is given); the
    sweeps use 5 points per parameter, or fewer when 5 would not fit theirs. With ``seeds``
    K > 1 each run is K runs (seeds), sized to a K-th of the budget, and keyed apart from
    single-seed runs.
    """
    frameworks = list(frameworks)
    presets = study_presets(dataset_kind)
    shares = dict(PHASE_SHARES)
    if not with_tune:
        shares.pop("tune")
    total = sum(shares.values())
    allot = {k: budget_s / seeds * v / total for k, v in shares.items()}

    def key(config: TrainConfig) -> str:
        base = config_key(workload_fingerprint, model, config)
        return base if seeds == 1 else f"{base}:seeds={seeds}"

    def cross(cap: int) -> list[tuple[str, TrainConfig, str]]:
        out = []
        for fw in frameworks:
            own = preset_config(default_preset(fw, dataset_kind), fw, dataset_kind)
            out.append(("defaults", _capped(own, cap), fw))
        for fw in frameworks:
            for preset in presets:
                config = _capped(preset_config(preset, fw, dataset_kind), cap)
                out.append(("cross_defaults", config, f"{fw} with {preset} defaults"))
        return out

    def cost_of(items: list[tuple[str, TrainConfig, str]]) -> float:
        unique = {key(c): c for _, c, _ in items}
        starts = {(c.framework, c.threads): cost.startup_s(c) for c in unique.values()}
        return sum(cost.predict(c, include_start=False) for c in unique.values()) + sum(starts.values())

    if epoch_cap is None:
        epoch_cap = _EPOCH_CAPS[-1]
        for cap in _EPOCH_CAPS:
            if cost_of(cross(cap)) <= allot["defaults"]:
                epoch_cap = cap
                break
    plan = StudyPlan(frameworks, dataset_kind, epoch_cap)
    for phase, config, label in cross(epoch_cap):
        plan.add(key(config), config, phase, label)
    for preset in presets:
        longest = max(preset_config(preset, "torch", dataset_kind).epochs, 1)
        if longest > epoch_cap:
            plan.notes.append(
                f"The {preset} preset's {longest} epochs are capped at {epoch_cap} to fit the budget."
            )

    bases = {fw: _capped(preset_config(default_preset(fw, dataset_kind), fw, dataset_kind), epoch_cap)
             for fw in frameworks}

    def sweeps(points: int) -> list[tuple[str, TrainConfig, str]]:
        out = []
        grids = {}
        for fw, base in bases.items():
            batches = [b for b in _BATCH_GRID if b <= max(n_train, 1)]
            lrs = [round(base.learning_rate * f, 10) for f in _LR_FACTORS if base.learning_rate * f <= 10]
            epochs = [e for e in _EPOCH_GRID if e <= epoch_cap]
            grids[fw] = {
                "batch_size": _spread(batches, base.batch_size, points),
                "learning_rate": _spread(lrs, base.learning_rate, points),
                "epochs": _spread(epochs, base.epochs, points),
            }
        # Round-robin over frameworks so that a budget cut leaves every framework covered.
        for param in ("batch_size", "learning_rate", "epochs"):
            for i in range(points):
                for fw, base in bases.items():
                    grid = grids[fw][param]
                    if i < len(grid):
                        config = base.replace(**{param: grid[i]})
                        out.append((f"sweep:{param}", config, f"{fw} {param}={grid[i]:g}"))
        return out

    chosen = sweeps(2)
    for points in (5, 4, 3):
        candidate = sweeps(points)
        new = [item for item in candidate if key(item[1]) not in {r.key for r in plan.runs}]
        if cost_of(new) <= allot["sweeps"]:
            chosen = candidate
            break
    for phase, config, label in chosen:
        plan.add(key(config), config, phase, label)

    for name, threads in thread_variants(max_cores):
        for fw, base in bases.items():
            config = base.replace(threads=threads)
            plan.add(key(config), config, "threads", f"{fw} {name}")

    if with_tune:
        typical = sorted(cost.predict(b) for b in bases.values())[len(bases) // 2] if bases else 1.0
        per_fw = allot["tune"] / max(len(frameworks), 1)
        plan.tune_trials = int(max(2, min(20, per_fw // max(typical, 1e-3))))
    return plan
