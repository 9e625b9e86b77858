"""What ``tune`` returns: per framework the Pareto front, the best trial, the preset comparison."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from dltune._errors import ParameterError
from dltune._table import format_table
from dltune.measure import Measurement
from dltune.measure._record import html_table
from dltune.tuning._study import counts

__all__ = ["StudyResult", "TrialSummary", "TuneResult", "study_result", "summarise_trial",
           "threads_label"]


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

    def __repr__(self) -> str:
        c = self.config
        return (f"TrialSummary({self.number}: accuracy {_fmt(self.accuracy, '.2%')}, train "
                f"{_fmt(self.train_time_s, '.4g')} s, peak {_fmt(self.peak_rss_mb, '.4g')} MB; "
                f"{c.get('optimizer', '-')} lr={_fmt(c.get('learning_rate'), '.4g')} "
                f"batch={c.get('batch_size', '-')} epochs={c.get('epochs', '-')})")


def _fmt(value: Any, spec: str) -> str:
    """``value`` formatted, or ``-`` when there is none."""
    return "-" if value is None else format(value, spec)


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

    ``repeats`` (``tune(..., repeat_best=K)``) holds the K most accurate trials measured again
    with another seed: per trial its ``accuracy`` and ``accuracy_again`` (and the same for
    ``train_time_s`` and ``peak_rss_mb``); :meth:`repeat_summary` sums them up.
    """

    framework: str
    study_name: str
    objectives: list[str]
    counts: dict[str, int]
    pareto: list[TrialSummary]
    best: TrialSummary | None
    preset: Measurement | None = None
    comparison: dict[str, Any] | None = None
    repeats: list[dict[str, Any]] = field(default_factory=list)
    threads: list[dict[str, Any]] = field(default_factory=list)

    @property
    def answer(self) -> dict[str, Any] | None:
        """The configuration to use: the best trial's, with the thread and start-up setting
        the thread phase found fastest for it (``config`` and ``startup_env``)."""
        if self.best is None:
            return None
        tuned = next((t for t in self.threads if t["trial"] == self.best.number), None)
        if tuned is None:
            return {"trial": self.best.number, "config": self.best.config,
                    "startup_env": self.best.startup_env, "threads_speedup": None}
        return {"trial": self.best.number, "config": tuned["config"],
                "startup_env": tuned["startup_env"], "threads_speedup": tuned["speedup"]}

    def repeat_summary(self) -> dict[str, Any] | None:
        """What measuring the most accurate trials again says, or None without such repeats.

        ``pairs``: trials measured again; ``accuracy_change_pts``: the mean change of their
        accuracy, in points (below zero: the search's best runs were partly luck);
        ``seed_noise_pts``: one run's seed noise from these pairs (``dltune.measure``'s robust
        estimate), given from :data:`~dltune.measure._noise.MIN_NOISE_PAIRS` pairs on, else None;
        ``time_ratio``: the mean ratio of the second training time to the first.
        """
        from dltune.measure._noise import MIN_NOISE_PAIRS, seed_noise

        pairs = [r for r in self.repeats if r.get("accuracy_again") is not None]
        if not pairs:
            return None
        diffs = [r["accuracy_again"] - r["accuracy"] for r in pairs]
        times = [r["train_time_again_s"] / r["train_time_s"] for r in pairs
                 if r.get("train_time_s") and r.get("train_time_again_s")]
        return {
            "pairs": len(pairs),
            "accuracy_change_pts": 100 * sum(diffs) / len(diffs),
            "seed_noise_pts": 100 * seed_noise(diffs) if len(diffs) >= MIN_NOISE_PAIRS else None,
            "time_ratio": sum(times) / len(times) if times else None,
        }

    @property
    def n_complete(self) -> int:
        return self.counts.get("COMPLETE", 0)

    def _row(self) -> list[Any]:
        """The figures :meth:`_repr_html_` shows, in :data:`_HTML_COLUMNS`' order."""
        best, c = self.best, self.comparison or {}
        return [self.framework, self.n_complete, self.counts.get("FAIL", 0), len(self.pareto),
                "-" if best is None else best.number,
                _fmt(None if best is None else best.accuracy, ".2%"),
                _fmt(None if best is None else best.train_time_s, ".4g"),
                _fmt(None if best is None else best.peak_rss_mb, ".4g"),
                _fmt(c.get("speedup"), ".2f"), _fmt(c.get("accuracy_gain_pts"), "+.2f")]

    def __repr__(self) -> str:
        c = self.counts
        text = (f"StudyResult({self.framework}: {self.n_complete} complete, {c.get('FAIL', 0)} failed, "
                f"{c.get('PRUNED', 0)} pruned; {len(self.pareto)} on the Pareto front")
        if self.best is not None:
            b = self.best
            text += (f"; best trial {b.number}: accuracy {_fmt(b.accuracy, '.2%')}, train "
                     f"{_fmt(b.train_time_s, '.4g')} s, peak {_fmt(b.peak_rss_mb, '.4g')} MB")
        if self.comparison:
            cmp = self.comparison
            text += (f"; vs preset {str(cmp.get('preset_label'))[:40]!r}: speed-up "
                     f"{_fmt(cmp.get('speedup'), '.2f')}x, {_fmt(cmp.get('accuracy_gain_pts'), '+.2f')} pts")
        return text + ")"

    def _repr_html_(self) -> str:
        return html_table(_HTML_COLUMNS, [self._row()], caption=f"Study {self.study_name}")

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
            "repeats": self.repeats,
            "repeat_summary": self.repeat_summary(),
            "threads": self.threads,
            "answer": self.answer,
        }


def threads_label(threads: Mapping[str, Any], startup_env: Mapping[str, str],
                  speedup: float | None) -> str:
    """``intra/inter/blas`` threads, the start-up environment and the speed-up over the
    framework's default: ``1/2/1 OMP_WAIT_POLICY=active (1.60x)``."""
    env = " ".join(f"{k}={v}" for k, v in startup_env.items())
    numbers = "/".join(_fmt(threads.get(k), "") for k in ("intra_op", "inter_op", "blas"))
    return " ".join(x for x in (numbers, env, "" if speedup is None else f"({speedup:.2f}x)") if x)


def study_result(study: Any, spec: Any) -> StudyResult:
    """The :class:`StudyResult` of ``study`` as it stands (``spec``: its
    :class:`~dltune.tuning._study.StudySpec`); the best trial is the front's most accurate when
    accuracy is the first objective, else its first."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        pareto, best = [], None
    else:
        pareto = sorted((summarise_trial(t) for t in study.best_trials),
                        key=lambda t: (t.train_time_s or 0.0, t.number))
        if spec.objectives[0].name == "accuracy":
            best = max(pareto, key=lambda t: (t.accuracy or 0.0, -(t.train_time_s or 0.0)))
        else:
            best = pareto[0]
    return StudyResult(
        framework=spec.framework,
        study_name=study.study_name,
        objectives=[o.name for o in spec.objectives],
        counts=counts(study),
        pareto=pareto,
        best=best,
    )


_HTML_COLUMNS = ("framework", "complete", "failed", "Pareto", "best trial", "accuracy", "train s",
                 "peak MB", "speed-up vs preset", "acc +pts vs preset")


@dataclass(init=False)
class TuneResult:
    """All studies of one ``tune`` call.

    ``result[framework]`` (also ``result.results[framework]``) is a framework's
    :class:`StudyResult`; ``result.studies[framework]`` its ``optuna.Study``.
    """

    storage: str  # masked: no password
    results: dict[str, StudyResult]

    def __init__(self, storage: str, results: Mapping[str, StudyResult],
                 studies: Mapping[str, Any] | None = None) -> None:
        self.storage = storage
        self.results = dict(results)
        self._studies = dict(studies or {})

    @property
    def studies(self) -> dict[str, Any]:
        """Framework -> its ``optuna.Study``: those ``tune`` handed over, the others loaded from
        :attr:`storage` on first use.

        Raises:
            ParameterError: a study must be loaded and :attr:`storage` hides a password that
                ``$DLTUNE_STORAGE`` does not give.
        """
        missing = [fw for fw in self.results if fw not in self._studies]
        if missing:
            import optuna

            from dltune.measure._storage import open_storage

            storage = open_storage(self._storage_url(), heartbeat=False)
            for fw in missing:
                self._studies[fw] = optuna.load_study(study_name=self.results[fw].study_name,
                                                      storage=storage)
        return {fw: self._studies[fw] for fw in self.results}

    def _storage_url(self) -> str:
        """:attr:`storage` with its password: the same URL, or ``$DLTUNE_STORAGE``'s."""
        from dltune._storage_url import default_storage_url, mask_url

        if ":***@" not in self.storage:
            return self.storage
        if mask_url(default_storage_url()) == self.storage:
            return default_storage_url()
        raise ParameterError(
            f"The 'storage' of this tune result, {self.storage!r}, hides its password: set "
            "$DLTUNE_STORAGE to that URL to load its studies.")

    def __getitem__(self, framework: str) -> StudyResult:
        return self.results[framework]

    def __repr__(self) -> str:
        shown = [repr(r)[len("StudyResult("):-1] for r in list(self.results.values())[:3]]
        more = len(self.results) - len(shown)
        return (f"TuneResult(storage {self.storage!r}; " + "; ".join(s[:140] for s in shown)
                + (f"; and {more} more frameworks" if more > 0 else "") + ")")

    def _repr_html_(self) -> str:
        return html_table(_HTML_COLUMNS, [r._row() for r in self.results.values()],
                          caption=f"Tune result (storage {self.storage})")

    def to_dict(self) -> dict[str, Any]:
        return {"storage": self.storage, "studies": {k: v.to_dict() for k, v in self.results.items()}}

    def summary(self, more: str = "--json") -> str:
        """One row per framework: its best trial, the thread setting the thread phase found for
        it and how it compares with the framework's preset; ``more`` names where the details are."""
        rows = []
        for fw, res in self.results.items():
            c, best, answer = res.counts, res.best, res.answer
            done = f"{c.get('COMPLETE', 0)} complete" + "".join(
                f", {c[k]} {k.lower()}" for k in ("FAIL", "PRUNED") if c.get(k))
            row: dict[str, Any] = {"framework": fw, "trials": done}
            if best is not None:
                cfg = answer["config"] if answer else best.config
                th = cfg.get("threads") or {}
                speedup = answer.get("threads_speedup") if answer else None
                row.update(
                    trial=best.number, acc=None if best.accuracy is None else 100 * best.accuracy,
                    time=best.train_time_s,
                    config=(f"{cfg.get('framework')}: " * ("+" in fw) + f"{cfg.get('optimizer')} lr={_fmt(cfg.get('learning_rate'), '.2g')} "
                            f"batch={cfg.get('batch_size')} epochs={cfg.get('epochs')}"),
                    threads=threads_label(th, (answer or {}).get("startup_env", {}), speedup))
            cmp = res.comparison
            if cmp and cmp.get("speedup") is not None:
                row["preset"] = (f"{cmp['speedup']:.2f}x faster, "
                                 f"{_fmt(cmp.get('accuracy_gain_pts'), '+.2f')} pts")
            rows.append(row)
        table = format_table(rows, [("framework", "framework", ""), ("trials", "trials", ""),
                                    ("trial", "best", "d"), ("acc", "acc %", ".2f"),
                                    ("time", "train s", ".3f"), ("config", "configuration", ""),
                                    ("threads", "intra/inter/blas threads (x default)", ""),
                                    ("preset", "vs preset", "")])
        return table + f"\nthe Pareto fronts, thread phases and preset comparisons: {more}"

    def table(self) -> str:
        """The Pareto front per framework, then the comparison with each default preset."""
        rows = []
        for fw, res in self.results.items():
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
        for fw, res in self.results.items():
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
        phases = [{"framework": fw, **t} for fw, res in self.results.items() for t in res.threads]
        if phases:
            for row in phases:
                th = row["threads"]
                row["setting"] = " ".join(
                    [f"{th.get('intra_op')}/{th.get('inter_op')}/{th.get('blas')}"]
                    + [f"{k}={v}" for k, v in row["startup_env"].items()])
            parts += ["", "Thread phase: the fastest thread / start-up setting per trial (median "
                      "of alternated timed runs)",
                      format_table(phases, [("framework", "framework", ""), ("trial", "trial", "d"),
                                            ("setting", "intra/inter/blas", ""),
                                            ("evaluations", "settings", "d"), ("epochs", "epochs", "d"),
                                            ("train_time_s", "train s", ".3f"),
                                            ("default_train_time_s", "default s", ".3f"),
                                            ("speedup", "speed-up", ".2f"),
                                            ("accuracy_spread_pts", "acc spread pts", ".2f")])]
        again = [(fw, r) for fw, res in self.results.items() for r in res.repeats]
        if again:
            rows = [{"framework": fw, "trial": r["trial"], "seed": r["seed"],
                     "acc": 100 * r["accuracy"],
                     "again": None if r["accuracy_again"] is None else 100 * r["accuracy_again"],
                     "change": None if r["accuracy_again"] is None
                     else 100 * (r["accuracy_again"] - r["accuracy"]),
                     "time": r["train_time_s"], "time_again": r["train_time_again_s"],
                     "status": r["status"]} for fw, r in again]
            parts += ["", "The most accurate trials measured again with another seed",
                      format_table(rows, [("framework", "framework", ""), ("trial", "trial", "d"),
                                          ("seed", "seed", "d"), ("acc", "acc %", ".2f"),
                                          ("again", "again %", ".2f"), ("change", "pts", "+.2f"),
                                          ("time", "train s", ".3f"), ("time_again", "again s", ".3f"),
                                          ("status", "status", "")])]
            for fw, res in self.results.items():
                summary = res.repeat_summary()
                if summary is None:
                    continue
                noise = summary["seed_noise_pts"]
                parts.append(
                    f"{fw}: measured again, the {summary['pairs']} most accurate trials changed by "
                    f"{round(summary['accuracy_change_pts'], 2) + 0.0:+.2f} points on average"
                    + (f"; seed noise of one run about {noise:.2f} points" if noise is not None
                       else f"; seed noise needs at least 3 pairs (have {summary['pairs']})"))
        return "\n".join(parts)
