"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes."""

from __future__ import annotations

import io
from collections.abc import Callable

from dltune.report._analysis import Analysis
from dltune.report._model import Figure

__all__ = ["make_figures", "FRAMEWORK_COLOURS"]

FRAMEWORK_COLOURS = {"torch": "#ee4c2c", "tensorflow": "#ff8f00", "mxnet": "#2f7ed8",
                     "theano": "#6a3d9a", "pytensor": "#33a02c", "numpy": "#555555", "jax": "#17becf"}


def _colour(fw: str) -> str:
    return FRAMEWORK_COLOURS.get(fw, "#999999")


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _subplots(ncols: int, width: float = 5.0, height: float = 3.6):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def _bars(a: Analysis, metric: str, title: str, ylabel: str, log: bool) -> bytes | None:
    d = a.defaults()
    if d.empty or d[metric].isna().all():
        return None
    fig, (ax,) = _subplots(1, 5.5)
    ax.bar(d.index, d[metric], color=[_colour(fw) for fw in d.index])
    for i, v in enumerate(d[metric]):
        ax.annotate(f"{v:.3g}", (i, v), ha="center", va="bottom", fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _heatmap(a: Analysis) -> bytes | None:
    acc, time = a.cross_matrix("accuracy_pct"), a.cross_matrix("train_time_s")
    if acc is None:
        return None
    import numpy as np

    fig, axes = _subplots(2, 0.9 * acc.shape[1] + 3.2, 0.55 * acc.shape[0] + 2.4)
    for ax, m, title, fmt, cmap in ((axes[0], acc, "accuracy %", "{:.1f}", "viridis"),
                                    (axes[1], time, "train s (log colour)", "{:.3g}", "magma_r")):
        values = m.to_numpy(dtype=float)
        shown = np.log10(np.clip(values, 1e-3, None)) if m is time else values
        im = ax.imshow(shown, cmap=cmap, aspect="auto")
        ax.set_xticks(range(m.shape[1]), [f"{p}\npreset" for p in m.columns], fontsize=8)
        ax.set_yticks(range(m.shape[0]), list(m.index))
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                if np.isfinite(values[i, j]):
                    r, g, b, _ = im.cmap(im.norm(shown[i, j]))
                    dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                    ax.text(j, i, fmt.format(values[i, j]), ha="center", va="center", fontsize=8,
                            color="white" if dark else "black")
        ax.set_title(title)
        bar = fig.colorbar(im, ax=ax, fraction=0.046)
        bar.set_label("log10 seconds" if m is time else "%")
    return _png(fig)


def _sweep(a: Analysis, param: str, label: str, log: bool) -> bytes | None:
    data = a.sweep(param)
    if data.empty or data[param].nunique() < 2:
        return None
    fig, axes = _subplots(2)
    for fw, g in data.groupby("framework"):
        g = g.drop_duplicates(param, keep="last")
        axes[0].plot(g[param], g["accuracy_pct"], "o-", color=_colour(fw), label=fw)
        axes[1].plot(g[param], g["train_time_s"], "o-", color=_colour(fw), label=fw)
    for ax, ylabel in zip(axes, ("test accuracy %", "training time s"), strict=True):
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    return _png(fig)


def _threads(a: Analysis) -> bytes | None:
    t = a.threads_frame()
    if t is None:
        return None
    cpu = a.phase("threads").pivot_table(index="framework", columns="threads", values="cpu_pct",
                                         aggfunc="median")
    fig, axes = _subplots(2, 6.0)
    n = len(t.index)
    width = 0.8 / max(n, 1)
    for k, fw in enumerate(t.index):
        xs = [i + k * width for i in range(len(t.columns))]
        axes[0].bar(xs, t.loc[fw], width, color=_colour(fw), label=fw)
        axes[1].bar(xs, cpu.reindex(columns=t.columns).loc[fw], width, color=_colour(fw), label=fw)
    for ax, ylabel in zip(axes, ("training time s (log)", "CPU % of one core"), strict=True):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(t.columns))], list(t.columns),
                      rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    return _png(fig)


def _resources(a: Analysis) -> bytes | None:
    data = a.sweep("batch_size")
    if data.empty or data["batch_size"].nunique() < 2:
        return None
    fig, axes = _subplots(2)
    for fw, g in data.groupby("framework"):
        g = g.drop_duplicates("batch_size", keep="last")
        axes[0].plot(g["batch_size"], g["cpu_pct"], "o-", color=_colour(fw), label=fw)
        axes[1].plot(g["batch_size"], g["peak_mb"], "o-", color=_colour(fw), label=fw)
    for ax, ylabel in zip(axes, ("CPU % of one core (training)", "peak memory MB"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return _png(fig)


def _pareto(a: Analysis) -> bytes | None:
    if a.ok.empty:
        return None
    fig, (ax,) = _subplots(1, 7.0, 4.2)
    for fw, g in a.ok.groupby("framework"):
        ax.scatter(g["train_time_s"], g["accuracy_pct"], s=18, alpha=0.6, color=_colour(fw), label=fw)
    front = a.pareto()
    ax.step(front["train_time_s"], front["accuracy_pct"], where="post", color="black", lw=1,
            label="Pareto front")
    ax.scatter(front["train_time_s"], front["accuracy_pct"], s=40, facecolors="none", edgecolors="black")
    ax.set_xscale("log")
    ax.set_xlabel("training time s (log)")
    ax.set_ylabel("test accuracy %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def _tuning(a: Analysis) -> bytes | None:
    t = a.tuning()
    if not t:
        return None
    fig, (ax,) = _subplots(1, 7.0, 4.2)
    tuned = a.ok[a.ok["phases"].map(lambda p: "tune" in p)]
    for fw, g in tuned.groupby("framework"):
        ax.scatter(g["train_time_s"], g["accuracy_pct"], s=18, alpha=0.5, color=_colour(fw),
                   label=f"{fw} tuning trials")
        default = t[fw][0]
        if default is not None:
            ax.scatter([default["train_time_s"]], [default["accuracy_pct"]], marker="*", s=180,
                       color=_colour(fw), edgecolors="black", label=f"{fw} defaults")
    ax.set_xscale("log")
    ax.set_xlabel("training time s (log)")
    ax.set_ylabel("test accuracy %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def make_figures(a: Analysis) -> dict[str, Figure]:
    """Every figure the data allows, by name; a view without data has no figure."""
    specs: list[tuple[str, str, Callable[[], bytes | None], str]] = [
        ("train_time", "Training time per framework (own defaults, log scale)",
         lambda: _bars(a, "train_time_s", "training time (s, log)", "seconds", True), ""),
        ("test_time", "Testing time per framework (own defaults)",
         lambda: _bars(a, "test_time_s", "testing time (s)", "seconds", False), ""),
        ("accuracy", "Test accuracy per framework (own defaults)",
         lambda: _bars(a, "accuracy_pct", "test accuracy (%)", "%", False), ""),
        ("cross_defaults", "Every framework with every framework's defaults",
         lambda: _heatmap(a), "Rows: framework trained; columns: whose default settings."),
        ("sweep_batch_size", "Accuracy and training time against batch size",
         lambda: _sweep(a, "batch_size", "batch size", True), "Other settings: each framework's defaults."),
        ("sweep_learning_rate", "Accuracy and training time against learning rate",
         lambda: _sweep(a, "learning_rate", "learning rate", True), "Other settings: each framework's defaults."),
        ("sweep_epochs", "Accuracy and training time against epochs",
         lambda: _sweep(a, "epochs", "epochs", False), "Other settings: each framework's defaults."),
        ("threads", "Training time and CPU use per thread setting",
         lambda: _threads(a), "Same configuration (each framework's defaults), thread settings varied."),
        ("resources_batch_size", "CPU use and peak memory against batch size",
         lambda: _resources(a), "CPU % is the mean during training, in % of one core."),
        ("pareto", "Accuracy against training time, all runs, with the Pareto front",
         lambda: _pareto(a), "Black: configurations no other run beats on both accuracy and time."),
        ("tuning", "Tuning trials against each framework's defaults (stars)",
         lambda: _tuning(a), ""),
    ]
    out = {}
    for name, title, draw, caption in specs:
        png = draw()
        if png is not None:
            out[name] = Figure(name, title, png, caption)
    return out
