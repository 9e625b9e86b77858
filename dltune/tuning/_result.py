"""What ``tune`` returns: per framework the Pareto front, the best trial, the preset comparison."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dltune.measure import Measurement

__all__ = ["StudyResult", "TrialSummary", "TuneResult", "summarise_trial"]


@dataclass
class TrialSummary:
    """One trial's configuration and headline metrics."""

    number: int
    config: dict[str, Any]
    params: dict[str, Any]
    accuracy: float | None
    train_time_s: float | None
    peak_rss_mb: float | None
    startup_env: dict[str, str] = field(default_factory=dict)


def summarise_trial(trial: Any) -> TrialSummary:
    attrs = trial.user_attrs
    return TrialSummary(
        number=trial.number,
        config=dict(attrs.get("config") or {}),
        params=dict(trial.params),
        accuracy=attrs.get("test_accuracy"),
        train_time_s=attrs.get("train_time_s"),
        peak_rss_mb=attrs.get("peak_rss_mb"),
        startup_env=dict(attrs.get("startup_env") or {}),
    )


@dataclass
class StudyResult:
    """One framework's study after tuning.

    ``comparison`` (when the preset was measured) holds the preset's accuracy and training
    time, the chosen trial (the fastest Pareto trial at least as accurate as the preset, else
    the most accurate one), ``speedup`` (preset time / chosen time), ``accuracy_gain_pts``
    (percentage points) and ``matches_preset`` (chosen accuracy >= preset accuracy).
    """

    framework: str
    study_name: str
    objectives: list[str]
    counts: dict[str, int]
    pareto: list[TrialSummary]
    best: TrialSummary | None
    preset: Measurement | None = None
    comparison: dict[str, Any] | None = None

    @property
    def n_complete(self) -> int:
        return self.counts.get("COMPLETE", 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "study_name": self.study_name,
            "objectives": self.objectives,
            "counts": self.counts,
            "pareto": [asdict(t) for t in self.pareto],
            "best": None if self.best is None else asdict(self.best),
            "preset": None if self.preset is None else self.preset.summary_row(),
            "comparison": self.comparison,
        }


@dataclass
class TuneResult:
    """All studies of one ``tune`` call."""

    storage: str  # masked: no password
    studies: dict[str, StudyResult]

    def __getitem__(self, framework: str) -> StudyResult:
        return self.studies[framework]

    def to_dict(self) -> dict[str, Any]:
        return {"storage": self.storage, "studies": {k: v.to_dict() for k, v in self.studies.items()}}

    def table(self) -> str:
        """The Pareto front per framework, then the comparison with each default preset."""
        from dltune.cli._common import format_table

        rows = []
        for fw, res in self.studies.items():
            for t in res.pareto:
                c = t.config
                th = c.get("threads") or {}
                rows.append({
                    "framework": fw, "trial": t.number,
                    "acc": None if t.accuracy is None else 100 * t.accuracy,
                    "time": t.train_time_s, "opt": c.get("optimizer"), "lr": c.get("learning_rate"),
                    "batch": c.get("batch_size"), "epochs": c.get("epochs"),
                    "threads": f"{th.get('intra_op')}/{th.get('inter_op')}/{th.get('blas')}",
                    "best": "*" if res.best is not None and res.best.number == t.number else "",
                })
        parts = ["Pareto front (accuracy vs training time) per framework; * = most accurate",
                 format_table(rows, [("framework", "framework", ""), ("trial", "trial", "d"),
                                     ("acc", "acc %", ".2f"), ("time", "train s", ".3f"),
                                     ("opt", "optimizer", ""), ("lr", "lr", ".3g"),
                                     ("batch", "batch", "d"), ("epochs", "epochs", "d"),
                                     ("threads", "intra/inter/blas", ""), ("best", "", "")])]
        comp = []
        for fw, res in self.studies.items():
            c = res.comparison
            if not c:
                continue
            comp.append({
                "framework": fw, "preset": c["preset_label"],
                "p_acc": 100 * c["preset_accuracy"] if c["preset_accuracy"] is not None else None,
                "p_time": c["preset_train_time_s"], "trial": c["trial"],
                "t_acc": 100 * c["accuracy"], "t_time": c["train_time_s"],
                "speedup": c["speedup"], "gain": c["accuracy_gain_pts"],
                "verdict": ("as accurate and faster" if c["matches_preset"] and (c["speedup"] or 0) > 1
                            else "as accurate, not faster" if c["matches_preset"]
                            else "less accurate than the preset"),
            })
        if comp:
            parts += ["", "Tuned vs the framework's default preset (same workload, same machine)",
                      format_table(comp, [("framework", "framework", ""), ("preset", "preset", ""),
                                          ("p_acc", "preset acc %", ".2f"),
                                          ("p_time", "preset s", ".3f"), ("trial", "trial", "d"),
                                          ("t_acc", "tuned acc %", ".2f"),
                                          ("t_time", "tuned s", ".3f"), ("speedup", "speed-up", ".2f"),
                                          ("gain", "acc +pts", "+.2f"), ("verdict", "verdict", "")])]
        return "\n".join(parts)
