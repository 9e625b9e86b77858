"""Tables and findings computed from the records; every number a finding states is in a table,
the load it names aside (records carry it, tables do not)."""

from __future__ import annotations

import math
from typing import Any

from dltune.report._data import (
    BENCH_PHASE,
    OUTSIDE_STUDY,
    REPEAT_PHASE,
    TUNE_PRESET_PHASE,
    load_tag,
)
from dltune.report._headline import defaults_findings
from dltune.report._model import (
    Finding,
    Table,
    fmt_mb,
    fmt_num,
    fmt_pct,
    fmt_s,
    fmt_span,
    fmt_x,
    names,
    same_time,
)
from dltune.report._reference import published_figures

__all__ = ["Analysis"]

HYPER = ("batch_size", "learning_rate", "epochs", "intra_op", "cores")
RESOURCES = ("train_time_s", "cpu_pct", "peak_mb", "accuracy_pct")
_RESOURCE_NAMES = {"train_time_s": "train time", "cpu_pct": "CPU %", "peak_mb": "peak memory",
                   "accuracy_pct": "accuracy"}
_SWEEPS = {"batch_size": "batch size", "learning_rate": "learning rate", "epochs": "epochs"}
#: The data sets the original study published figures for, and their names in its table.
PUBLISHED = {"mnist": "MNIST", "cifar10": "CIFAR-10"}


def _finite(x: Any) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


class Analysis:
    """The study's views of one DataFrame of records (see ``records_frame``)."""

    def __init__(self, frame, dataset_kind: str = "mnist", dataset: str | None = None) -> None:
        self.df = frame
        self.ok = frame[frame["ok"]]
        self.dataset_kind = dataset_kind
        # The published figures stand beside the same data set only, never beside another.
        self.dataset = dataset_kind if dataset is None else dataset
        self.published = published_figures(self.dataset) if self.dataset in PUBLISHED else {}
        self.has_phases = bool(frame["phases"].map(len).sum())
        self.frameworks = sorted(self.ok["framework"].unique())

    # --- selections -----------------------------------------------------------------------
    def phase(self, name: str):
        """OK records of one phase (every OK record when no record carries phases)."""
        if not self.has_phases:
            return self.ok
        return self.ok[self.ok["phases"].map(lambda p: name in p)]

    def defaults(self):
        """One record per framework: the framework trained with its own default preset.

        The study's ``defaults`` phase; for a framework it has not measured, the preset tune
        measured beside its trials or a bench run of the framework's own preset unchanged
        (epochs may be capped): of several the longest one with the framework's default threads.
        Without phases: every run of the framework's own preset unchanged, chosen so.
        """
        import pandas as pd

        if self.has_phases:
            study = self.phase("defaults").sort_values("started_at")
            rest = self.ok[~self.ok["framework"].isin(set(study["framework"]))]
            rest = rest[rest["phases"].map(lambda p: TUNE_PRESET_PHASE in p or BENCH_PHASE in p)]
        else:
            study, rest = self.ok.iloc[:0], self.ok
        if not rest.empty:
            rest = rest[rest.apply(self._is_own_defaults, axis=1).astype(bool)]
            rest = rest.assign(_dt=rest["threads"] == "default").sort_values(
                ["_dt", "epochs", "started_at"]).drop(columns="_dt")
        rows = pd.concat([study, rest]) if not rest.empty else study
        return rows.groupby("framework").tail(1).set_index("framework").sort_index()

    def _is_own_defaults(self, row) -> bool:
        """Whether a record ran its framework's own preset unchanged (epochs may be capped)."""
        from dltune.config import default_preset
        from dltune.study import preset_config

        own = default_preset(row["framework"], self.dataset_kind)
        if row["preset"] != own:
            return False
        p = preset_config(own, row["framework"], self.dataset_kind)
        return (row["batch_size"], row["optimizer"]) == (p.batch_size, p.optimizer) and \
            math.isclose(float(row["learning_rate"]), p.learning_rate)

    # --- tables ---------------------------------------------------------------------------
    def comparison_table(self) -> Table:
        from dltune.study import preset_config

        d = self.defaults()
        pub = self.published
        rows = []
        for fw in sorted(set(d.index) | set(pub)):
            p = pub.get(fw, {})
            if fw in d.index:
                r = d.loc[fw]
                try:
                    full = preset_config(r["preset"], fw, self.dataset_kind).epochs
                except Exception:  # noqa: BLE001 - an unknown preset name just shows no cap
                    full = r["epochs"]
                epochs = fmt_num(r["epochs"]) + (f" (of {full})" if full != r["epochs"] else "")
                if _finite(r["epochs_run"]) and r["epochs_run"] < r["epochs"]:
                    epochs += f", stopped at {fmt_num(r['epochs_run'])}"
                measured = [r["preset"], fmt_num(r["batch_size"]), fmt_num(r["learning_rate"]), epochs,
                            fmt_s(r["train_time_s"]), fmt_s(r["test_time_s"]),
                            fmt_pct(r["accuracy_pct"]), fmt_pct(r["cpu_pct"]), fmt_mb(r["peak_mb"])]
            else:
                measured = ["–"] * 9
            published = [fmt_s(p.get("train_time_cpu_s")), fmt_s(p.get("test_time_cpu_s")),
                         fmt_pct(p.get("accuracy_cpu_pct")), fmt_s(p.get("train_time_gpu_s")),
                         fmt_pct(p.get("accuracy_gpu_pct"))] if pub else []
            rows.append([fw] + measured + published)
        columns = ["framework", "preset", "batch", "lr", "epochs", "train s", "test s", "accuracy %",
                   "CPU %", "peak MB"]
        note = "CPU % is the mean over training, in % of one core."
        unpublished = [fw for fw in d.index if fw not in pub]
        if pub and unpublished:
            note += f" {names(unpublished)}: no figures in the original study, so none are shown."
        if pub:
            columns += ["published CPU train s", "published CPU test s", "published CPU acc %",
                        "published GPU train s", "published GPU acc %"]
            note = (f"Published: the original study on {PUBLISHED[self.dataset]} (Xeon E5-1620 3.6 GHz, "
                    "GTX 1080 Ti), full-length runs of each framework's own network; measured: this "
                    f"workload on this machine. {note} Caffe cannot be installed from any registry; "
                    "its preset is applied to the others.")
        return Table("comparison", "Framework comparison: each framework with its own default settings",
                     columns, rows, note=note)

    def cross_matrix(self, metric: str):
        """Framework x preset pivot of ``metric`` from the cross-defaults phase."""
        rows = self.phase("cross_defaults")
        if rows.empty:
            return None
        return rows.pivot_table(index="framework", columns="preset", values=metric, aggfunc="median")

    def cross_table(self) -> Table | None:
        acc, time = self.cross_matrix("accuracy_pct"), self.cross_matrix("train_time_s")
        if acc is None:
            return None
        rows = [[fw] + [f"{fmt_pct(acc.loc[fw, p])} / {fmt_s(time.loc[fw, p])} s" for p in acc.columns]
                for fw in acc.index]
        return Table("cross_defaults", "Accuracy % / training s of each framework (rows) with each "
                     "framework's default preset (columns)",
                     ["framework"] + [f"{p} preset" for p in acc.columns], rows)

    def sweep(self, param: str):
        return self.phase(f"sweep:{param}").sort_values(param)

    def sweep_points_table(self, param: str) -> Table | None:
        """Accuracy % / training s at every swept value, framework by framework."""
        data = self.sweep(param)
        if data.empty or data[param].nunique() < 2:
            return None
        acc = data.pivot_table(index="framework", columns=param, values="accuracy_pct", aggfunc="last")
        time = data.pivot_table(index="framework", columns=param, values="train_time_s", aggfunc="last")
        rows = [[fw] + [f"{fmt_pct(acc.loc[fw, v])} / {fmt_s(time.loc[fw, v])} s"
                        if _finite(acc.loc[fw, v]) else "–" for v in acc.columns] for fw in acc.index]
        # The caption names the swept parameter once; the columns are its values.
        return Table(f"sweep_{param}", f"Accuracy % / training s against {_SWEEPS[param]} (columns)",
                     ["framework"] + [fmt_num(v) for v in acc.columns], rows)

    def threads_frame(self):
        data = self.phase("threads")
        if data.empty:
            return None
        return data.pivot_table(index="framework", columns="threads", values="train_time_s",
                                aggfunc="median")

    def threads_table(self) -> Table | None:
        t = self.threads_frame()
        if t is None:
            return None
        rows = [[fw] + [fmt_s(t.loc[fw, c]) for c in t.columns] for fw in t.index]
        return Table("threads", "Training seconds per thread / parallel-library setting",
                     ["framework"] + list(t.columns), rows,
                     note="intra: intra-op threads; inter: inter-op threads; blas: OpenMP / MKL / "
                          "OpenBLAS threads; N core(s): the worker pinned to N CPUs (affinity).")

    def correlations(self):
        """Spearman rank correlation of each hyper-parameter with each resource, per framework.

        Within one framework only: pooled over frameworks, memory and time would mostly
        reflect which framework ran. Returns ``{(framework, hyper, resource): (rho, n)}``.
        """
        import pandas as pd

        keyed = self.ok[self.ok["key"].notna()].drop_duplicates("key", keep="last")
        data = pd.concat([keyed, self.ok[self.ok["key"].isna()]])
        out = {}
        for fw, g in data.groupby("framework"):
            for h in HYPER:
                for r in RESOURCES:
                    pair = g[[h, r]].apply(pd.to_numeric, errors="coerce").dropna()
                    if len(pair) >= 5 and pair[h].nunique() > 1 and pair[r].nunique() > 1:
                        ranks = pair.rank()
                        out[(fw, h, r)] = (float(ranks[h].corr(ranks[r])), len(pair))
        return out

    def correlation_table(self) -> Table | None:
        corr = self.correlations()
        if not corr:
            return None
        rows = []
        for fw in self.frameworks:
            for h in HYPER:
                found = [corr.get((fw, h, r)) for r in RESOURCES]
                if not any(found):
                    continue
                n = max(c[1] for c in found if c)  # a cell over fewer runs says how many
                rows.append([fw, h, str(n)] + ["–" if c is None else f"{c[0]:+.2f}" + (
                    "" if c[1] == n else f" (n={c[1]})") for c in found])
        return Table("correlation", "Spearman correlation between hyper-parameters and resource use, "
                     "within each framework (all its successful runs)",
                     ["framework", "hyper-parameter", "runs"] + [_RESOURCE_NAMES[r] for r in RESOURCES],
                     rows, note="intra_op and cores count only runs that set them; at least 5 runs per cell.")

    def pareto(self):
        """The accuracy / training-time Pareto front over every successful run."""
        data = self.ok.sort_values(["train_time_s", "accuracy_pct"], ascending=[True, False])
        front, best = [], -math.inf
        for idx, row in data.iterrows():
            if row["accuracy_pct"] > best:
                front.append(idx)
                best = row["accuracy_pct"]
        return data.loc[front]

    def pareto_table(self) -> Table:
        rows = [[r["framework"], _configuration(r), fmt_pct(r["accuracy_pct"]),
                 fmt_s(r["train_time_s"])] for _, r in self.pareto().iterrows()]
        return Table("pareto", "Accuracy / training-time Pareto front across frameworks",
                     ["framework", "configuration", "accuracy %", "train s"], rows)

    def tuning(self):
        """Per framework: its defaults record and its best tuned record."""
        tuned = self.ok[self.ok["phases"].map(lambda p: "tune" in p)]
        d = self.defaults()
        out = {}
        for fw, g in tuned.groupby("framework"):
            best = g.loc[g["accuracy_pct"].idxmax()]
            out[fw] = (d.loc[fw] if fw in d.index else None, best, len(g))
        return out

    def tuning_table(self) -> Table | None:
        t = self.tuning()
        if not t:
            return None
        rows = []
        for fw, (default, best, n) in t.items():
            gain = None if default is None else best["accuracy_pct"] - default["accuracy_pct"]
            rows.append([fw, fmt_pct(None if default is None else default["accuracy_pct"]),
                         fmt_s(None if default is None else default["train_time_s"]), str(n),
                         fmt_pct(best["accuracy_pct"]), fmt_s(best["train_time_s"]), _describe(best),
                         "–" if gain is None else f"{gain:+.1f}"])
        return Table("tuning", "How far a short tune moves each framework from its defaults",
                     ["framework", "defaults acc %", "defaults train s", "tuning trials",
                      "tuned best acc %", "its train s", "tuned configuration", "gain (points)"], rows)

    # --- findings -------------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        out = defaults_findings(self.defaults())
        out += self._transfer_findings()
        out += self._sweep_findings()
        out += self._thread_findings()
        out += self._tuning_findings()
        corr = self.correlations()
        pairs = {k: v for k, v in corr.items() if k[2] != "accuracy_pct"}
        if pairs:
            (fw, h, r), (rho, n) = max(pairs.items(), key=lambda kv: abs(kv[1][0]))
            load = load_tag(self.ok[self.ok["framework"] == fw]) if r != "peak_mb" else ""
            out.append(Finding("correlation", f"The strongest link between a hyper-parameter and "
                               f"resource use: {h} and {_RESOURCE_NAMES[r]} for {fw}, Spearman "
                               f"{rho:+.2f} over {n} runs{load}.", {"rho": rho}))
        return out

    def _transfer_findings(self) -> list[Finding]:
        from dltune.config import default_preset

        acc = self.cross_matrix("accuracy_pct")
        if acc is None or acc.shape[0] < 1 or acc.shape[1] < 2:
            return []
        out = []
        best_preset = {fw: acc.loc[fw].idxmax() for fw in acc.index if acc.loc[fw].notna().any()}
        # presets within display precision of each framework's best: ties are not differences
        tied = {fw: {p for p in acc.columns if fmt_pct(acc.loc[fw, p]) == fmt_pct(acc.loc[fw].max())}
                for fw in best_preset}
        common = set.intersection(*tied.values()) if tied else set()
        if common:
            p = sorted(common)[0]
            best_preset = {fw: p for fw in best_preset}
        # Whether a preset is best "for every framework" takes two frameworks to say.
        if len(best_preset) >= 2 and not common and len(set(best_preset.values())) > 1:
            parts = ", ".join(f"{fw}: {p} ({fmt_pct(acc.loc[fw, p])} %)" for fw, p in best_preset.items())
            out.append(Finding("transfer", f"Defaults do not transfer: the best preset differs by "
                               f"framework ({parts}).",
                               {f"best_{fw}_pct": acc.loc[fw, p] for fw, p in best_preset.items()}))
        elif len(best_preset) >= 2:
            p = next(iter(best_preset.values()))
            out.append(Finding("transfer", f"The {p} preset was (jointly) the best for every framework here "
                               f"({', '.join(f'{fw} {fmt_pct(acc.loc[fw, p])} %' for fw in best_preset)}).",
                               {f"best_{fw}_pct": acc.loc[fw, p] for fw in best_preset}))
        out += self._same_settings_findings(acc)
        drops = []
        for fw in acc.index:
            own = default_preset(fw, self.dataset_kind)
            if own not in acc.columns or not _finite(acc.loc[fw, own]):
                continue
            for p in acc.columns:
                if p != own and _finite(acc.loc[fw, p]):
                    drops.append((acc.loc[fw, own] - acc.loc[fw, p], fw, p, own))
        if drops:
            drop, fw, p, own = max(drops)
            out.append(Finding("borrowed", f"The largest loss from borrowing defaults: {fw} with the "
                               f"{p} preset reached {fmt_pct(acc.loc[fw, p])} % against "
                               f"{fmt_pct(acc.loc[fw, own])} % with its own ({drop:.1f} points).",
                               {"borrowed_pct": acc.loc[fw, p], "own_pct": acc.loc[fw, own]}))
        return out

    def _same_settings_findings(self, acc) -> list[Finding]:
        """How far the frameworks' accuracies differ under one preset, against under their own."""
        spreads = [(acc[p].max() - acc[p].min(), p) for p in acc.columns if acc[p].notna().sum() >= 2]
        if not spreads:
            return []
        spread, p = max(spreads)
        lo, hi = acc[p].idxmin(), acc[p].idxmax()
        own = self._own_spread()
        if f"{spread:.1f}" == "0.0":
            text = (f"With the same settings the frameworks reached the same accuracy under every preset "
                    f"(the {p} preset: {fmt_pct(acc.loc[hi, p])} % for {names(list(acc[p].dropna().index))})")
        else:
            text = (f"Under any one preset the frameworks' accuracies differ by at most {spread:.1f} points "
                    f"(the {p} preset: {fmt_pct(acc.loc[lo, p])} % for {lo}, {fmt_pct(acc.loc[hi, p])} % "
                    f"for {hi})")
        # A cause is named only where one preset's spread is at most half that of their own defaults.
        if own is not None and f"{own:.1f}" != "0.0" and spread <= own / 2:
            text += (f", against {own:.1f} points between the frameworks' own defaults: the accuracy gaps "
                     f"come from the default settings, not from the frameworks.")
        elif own is not None and f"{own:.1f}" != "0.0":
            text += f", and by {own:.1f} points with their own defaults."
        else:
            text += "."
        return [Finding("same_settings", text, {"same_lo_pct": acc.loc[lo, p], "same_hi_pct": acc.loc[hi, p]})]

    def _own_spread(self) -> float | None:
        d = self.defaults()
        return None if len(d) < 2 else float(d["accuracy_pct"].max() - d["accuracy_pct"].min())

    def _sweep_findings(self) -> list[Finding]:
        import pandas as pd

        out = []
        b = self.sweep("batch_size")
        ratios = []
        for fw, g in b.groupby("framework"):
            g = g.drop_duplicates("batch_size", keep="last")
            if len(g) >= 2:
                lo, hi = g.iloc[0], g.iloc[-1]
                ratios.append((abs(math.log(lo["train_time_s"] / hi["train_time_s"])), fw, lo, hi))
        if ratios:
            _, fw, lo, hi = max(ratios, key=lambda x: x[0])
            if not same_time(lo["train_time_s"], hi["train_time_s"]):
                out.append(Finding("batch_size", f"Batch size moved training time{_most(ratios)} for {fw}: "
                                   f"{fmt_s(lo['train_time_s'])} s at batch {fmt_num(lo['batch_size'])} against "
                                   f"{fmt_s(hi['train_time_s'])} s at batch {fmt_num(hi['batch_size'])}, with "
                                   f"accuracy {fmt_pct(lo['accuracy_pct'])} % and {fmt_pct(hi['accuracy_pct'])} %"
                                   f"{load_tag(pd.DataFrame([lo, hi]))}.",
                                   {"small_batch_s": lo["train_time_s"], "large_batch_s": hi["train_time_s"]}))
        spreads = []
        for fw, g in self.sweep("learning_rate").groupby("framework"):
            if g["learning_rate"].nunique() >= 2:
                spreads.append((g["accuracy_pct"].max() - g["accuracy_pct"].min(), fw, g))
        if spreads and fmt_pct(max(spreads, key=lambda x: x[0])[0]) != "0.0":
            spread, fw, g = max(spreads, key=lambda x: x[0])
            lo, hi = g.loc[g["accuracy_pct"].idxmin()], g.loc[g["accuracy_pct"].idxmax()]
            out.append(Finding("learning_rate", f"The learning rate mattered{_most(spreads)} for {fw}: accuracy "
                               f"ranged from {fmt_pct(lo['accuracy_pct'])} % (lr {fmt_num(lo['learning_rate'])}) "
                               f"to {fmt_pct(hi['accuracy_pct'])} % (lr {fmt_num(hi['learning_rate'])}).",
                               {"lr_min_acc_pct": lo["accuracy_pct"], "lr_max_acc_pct": hi["accuracy_pct"]}))
        return out

    def _thread_findings(self) -> list[Finding]:
        t = self.threads_frame()
        if t is None:
            return []
        gaps = []
        for fw in t.index:
            row = t.loc[fw].dropna()
            if len(row) >= 2:
                gaps.append((row.max() / row.min(), fw, row.idxmin(), row.idxmax(), row))
        if not gaps:
            return []
        ratio, fw, fast, slow, row = max(gaps, key=lambda x: x[0])
        if same_time(row[fast], row[slow]):
            return []
        runs = self.phase("threads")
        return [Finding("threads", f"Thread settings changed training time up to {fmt_x(ratio)} for "
                        f"{fw}: {fmt_s(row[fast])} s with '{fast}' against {fmt_s(row[slow])} s with "
                        f"'{slow}'{load_tag(runs[(runs['framework'] == fw) & runs['threads'].isin([fast, slow])])}.",
                        {"fast_threads_s": row[fast], "slow_threads_s": row[slow]})]

    def _tuning_findings(self) -> list[Finding]:
        import pandas as pd

        t = {fw: v for fw, v in self.tuning().items() if v[0] is not None}
        if len(t) >= 2 and len({fmt_pct(best["accuracy_pct"]) for _, best, _ in t.values()}) == 1:
            return [self._tuning_tie(t)]
        out = []
        for fw, (default, best, n) in t.items():
            gain = best["accuracy_pct"] - default["accuracy_pct"]
            out.append(Finding("tuning", f"{n} tuning trials moved {fw} from {fmt_pct(default['accuracy_pct'])} % "
                               f"({fmt_s(default['train_time_s'])} s) with its defaults to "
                               f"{fmt_pct(best['accuracy_pct'])} % ({fmt_s(best['train_time_s'])} s), "
                               f"{gain:+.1f} points{load_tag(pd.DataFrame([default, best]))}.",
                               {"default_pct": default["accuracy_pct"], "tuned_pct": best["accuracy_pct"]}))
        return out

    def _tuning_tie(self, t) -> Finding:
        """One finding where every tuned framework's best reached the same accuracy."""
        defaults = [d["accuracy_pct"] for d, _, _ in t.values()]
        gains = {fw: best["accuracy_pct"] - d["accuracy_pct"] for fw, (d, best, _) in t.items()}
        lo, hi = min(gains, key=gains.get), max(gains, key=gains.get)
        trials = {n for _, _, n in t.values()}
        configs = {_describe(best) for _, best, _ in t.values()}
        best = next(iter(t.values()))[1]
        text = (f"{f'{trials.pop()} tuning trials per framework' if len(trials) == 1 else 'A short tune'} "
                f"brought {'every framework' if set(t) == set(self.frameworks) else names(list(t))} to "
                f"{fmt_pct(best['accuracy_pct'])} %" + (f" ({configs.pop()})" if len(configs) == 1 else "")
                + f", from {fmt_span(min(defaults), max(defaults), fmt_pct)} % with their own defaults: "
                f"{gains[lo]:+.1f} points for {lo} to {gains[hi]:+.1f} for {hi}.")
        return Finding("tuning", text, {"tuned_pct": best["accuracy_pct"], "defaults_lo_pct": min(defaults),
                                        "defaults_hi_pct": max(defaults)})


def _most(candidates: list) -> str:
    """`` most`` where the finding picks one framework of several; nothing for one alone."""
    return " most" if len(candidates) >= 2 else ""


def _configuration(row) -> str:
    """A study run's label (``torch with caffe defaults``); any other run's settings."""
    if isinstance(row["label"], str) and not set(row["phases"]) & OUTSIDE_STUDY:
        return row["label"]
    again = f", again with seed {fmt_num(row['seed'])}" if REPEAT_PHASE in row["phases"] else ""
    return _describe(row) + again


def _describe(row) -> str:
    th = row["threads"]
    parts = [f"{row['optimizer']} lr {fmt_num(row['learning_rate'])}", f"batch {fmt_num(row['batch_size'])}",
             f"{fmt_num(row['epochs'])} epoch{'' if row['epochs'] == 1 else 's'}"]
    if th != "default":
        parts.append(th)
    return ", ".join(parts)
