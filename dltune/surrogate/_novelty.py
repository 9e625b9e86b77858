"""Out of distribution: how far a workload or hardware lies from what the knowledge base
measured, why it is flagged, and its intervals widened or hedged for it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from dltune.hardware._hardware import cpu_identity
from dltune.surrogate._features import (
    WORKLOAD_FEATURES,
    hardware_vector,
    workload_facts,
    workload_vector,
)
from dltune.surrogate._machines import machine_key
from dltune.surrogate._records import intra_threads

__all__ = ["NoveltyMixin", "NoveltyPolicy"]

# Workload features that say how alike two workloads are (size, shape, difficulty, model cost).
_NOVELTY = ("log_n_train", "channels", "log_height", "log_num_classes", "landmark_logreg",
            "landmark_1nn", "log_flops_per_sample")
_NOVELTY_IDX = [i for i, (n, _, _) in enumerate(WORKLOAD_FEATURES) if n in _NOVELTY]
_UNLIKE = "the workload is unlike every measured one of its model"


class NoveltyPolicy(Protocol):
    """What the out-of-distribution checks and the widening read of the decision's policy
    (``dltune.recommend.RecommendPolicy``, whose fields say what each is and where it was measured)."""

    @property
    def data_size_ood(self) -> float: ...
    @property
    def hardware_memory_range(self) -> float: ...
    @property
    def hardware_time_factor(self) -> float: ...
    @property
    def hardware_memory_factor(self) -> float: ...
    @property
    def installation_memory_factor(self) -> float: ...


def _data_values(meta: dict[str, Any]) -> float | None:
    """Training and test samples x input values of a workload's data set (None if unknown)."""
    try:
        return (float(meta["n_train"]) + float(meta.get("n_test") or 0)) * float(meta["input_size"])
    except (KeyError, TypeError, ValueError):
        return None


def _chance_low(meta: dict[str, Any], coverage: float) -> tuple[float, float] | None:
    """Chance accuracy on ``meta``'s test set and the low end of a chance-level score's
    ``coverage`` interval (the binomial noise of its test samples), or None where unknown."""
    try:
        k, n = int(meta["num_classes"]), float(meta["n_test"])
    except (KeyError, TypeError, ValueError):
        return None
    if k < 2 or n <= 0:
        return None
    chance, z = 1.0 / k, NormalDist().inv_cdf(0.5 + coverage / 2)
    return chance, max(0.0, chance - z * math.sqrt(chance * (1.0 - chance) / n))


def _stretch(pred: dict[str, np.ndarray], key: str, factor: float, log_space: bool) -> None:
    """Multiply the distances from ``pred[key]`` to its interval ends by ``factor``."""
    point, low, high = pred[key], pred[f"{key}_low"], pred[f"{key}_high"]
    if log_space:
        point, low, high = np.log(point), np.log(low), np.log(high)
    low, high = point - factor * (point - low), point + factor * (high - point)
    if log_space:
        low, high = np.exp(low), np.exp(high)
    pred[f"{key}_low"], pred[f"{key}_high"] = low, high


class NoveltyMixin:
    """:class:`~dltune.surrogate.PerformanceModel`'s out-of-distribution checks, on the
    workloads and hardware its fit kept (``workloads_``, ``hardware_``)."""

    def _distances(self, vector: np.ndarray, skip: int | None = None, model: str | None = None) -> np.ndarray:
        """Standardised distances of ``vector`` to the measured workloads; with ``model``, those
        of another model are infinitely far where ``model`` was measured (:meth:`model_measured`):
        a workload's size, shape and landmarks say little about how another model trains on it."""
        cached = getattr(self, "_workload_vectors", None)
        if cached is None or cached[0] is not self.workloads_:  # once per fit or load
            cached = self._workload_vectors = (
                self.workloads_, np.array([workload_vector(w["meta"])[_NOVELTY_IDX] for w in self.workloads_]))
        diff = (cached[1] - vector[None, :]) / self.workload_scale_[None, :]
        diff = np.where(np.isfinite(diff), diff, 3.0)  # a feature unknown on one side: far
        dist = np.sqrt(np.mean(diff**2, axis=1))
        dist[~self._of_model(model)] = np.inf
        if skip is not None:
            dist[skip] = np.inf
        return dist

    def model_measured(self, model: str | None) -> bool:
        """Whether the knowledge base trained model preset ``model`` (None: unknown, taken as yes)."""
        return model is None or any(w.get("model") == model for w in self.workloads_)

    def _of_model(self, model: str | None) -> np.ndarray:
        """Which measured workloads speak for ``model``: its own where it was measured, else
        (a model never measured, or none given) all of them."""
        same = np.array([w.get("model") == model for w in self.workloads_], dtype=bool)
        return same if model is not None and same.any() else np.ones(len(self.workloads_), dtype=bool)

    def nearest_workloads(self, meta: dict[str, Any], k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` measured workloads most like ``meta``, with their standardized distance: of
        its model (``meta["model"]``) where the knowledge base trained it, else of any."""
        self._check_fitted()
        dist = self._distances(workload_vector(meta)[_NOVELTY_IDX], model=meta.get("model"))
        order = [i for i in np.argsort(dist)[:k] if np.isfinite(dist[i])]
        return [(self.workloads_[i]["name"], round(float(dist[i]), 3)) for i in order]

    def data_size_ratio(self, meta: dict[str, Any]) -> tuple[float, float, float] | None:
        """How many times the largest measured data set ``meta``'s is (training and test samples
        x input values), with both sizes; None where either is unknown."""
        self._check_fitted()
        size = _data_values(meta)
        measured = [v for w in self.workloads_ if (v := _data_values(w["meta"]))]
        if not size or not measured:
            return None
        return size / max(measured), size, max(measured)

    def _data_size_reason(self, meta: dict[str, Any], policy: NoveltyPolicy) -> tuple[float, str] | None:
        ratio = self.data_size_ratio(meta)
        if ratio is None or ratio[0] <= policy.data_size_ood:
            return None
        return ratio[0], (f"the data set is {ratio[0]:.3g}x the largest measured ({ratio[1]:,.0f} training "
                          f"and test input values against {ratio[2]:,.0f}): training time and memory are "
                          f"extrapolated by their cost models")

    def outside_reasons(self, meta: dict[str, Any]) -> list[str]:
        """Why ``meta`` lies outside what the knowledge base measured, one reason per fact: a
        data modality or model family it never measured, a class count outside the measured
        range, an input shape outside the range measured for its modality ([] where none)."""
        self._check_fitted()
        asked = workload_facts(meta)
        measured = [workload_facts(w["meta"], w.get("model")) for w in self.workloads_]
        reasons = []
        modalities = sorted({m["modality"] for m in measured})
        if asked["modality"] not in modalities:
            reasons.append(f"the data are {asked['modality']}, a modality never measured "
                           f"(measured: {', '.join(modalities)})")
        families = sorted({m["model_family"] for m in measured if m["model_family"]})
        if asked["model_family"] and families and asked["model_family"] not in families:
            reasons.append(f"model family {asked['model_family']!r} was never measured "
                           f"(measured: {', '.join(families)})")
        classes = [m["num_classes"] for m in measured if m["num_classes"]]
        n = asked["num_classes"]
        if n and classes and not min(classes) <= n <= max(classes):
            reasons.append(f"{n} classes is outside the measured {min(classes)}..{max(classes)}")
        shape = asked["input_shape"]
        shapes = np.array([m["input_shape"] for m in measured if shape and m["modality"] == asked["modality"]
                           and m["input_shape"] and len(m["input_shape"]) == len(shape)])
        if len(shapes):
            low, high = shapes.min(axis=0), shapes.max(axis=0)
            if np.any((np.array(shape) < low) | (np.array(shape) > high)):
                ranges = " x ".join(f"{a}..{b}" if a != b else f"{a}" for a, b in zip(low, high, strict=True))
                reasons.append(f"input {'x'.join(map(str, shape))} is outside the measured {ranges}")
        return reasons

    def _unlike(self, meta: dict[str, Any], k: int) -> tuple[list[tuple[str, float]], str | None, float]:
        """The ``k`` nearest workloads of ``meta``, why it is unlike the measured ones (None:
        it is not), and how many times wider its intervals get for the workload (1.0: like the
        measured ones): ``1 + d / t`` beyond the threshold ``t``, ``1 + max(d, t) / t`` for a
        model never measured or a workload outside the measured range (:meth:`outside_reasons`)."""
        nearest = self.nearest_workloads(meta, k=k)
        why = ("its model was never measured" if not self.model_measured(meta.get("model"))
               else "the workload lies outside the measured range" if self.outside_reasons(meta)
               else None)
        if not nearest or not (why or nearest[0][1] > self.ood_threshold_):
            return nearest, None, 1.0
        unlike = 1.0 + max(nearest[0][1], self.ood_threshold_ if why else 0.0) / self.ood_threshold_
        return nearest, why or _UNLIKE, unlike

    def consensus_accuracy_band(self, rows: Sequence[dict[str, Any]],
                                meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the ends of its configuration's accuracy interval averaged over the measured
        workloads of ``meta``'s model (over all of them, for a model never measured or not
        given): ``(low, high)``, the accuracy each configuration is predicted to reach at least,
        and at most, across them, whatever the workload asked about.

        The accuracy interval's trees see neither the framework nor the hardware, so rows that
        differ only there share one prediction per workload: each distinct one is predicted once. The ends
        are the quantile ensembles' (``predict_band``): ``predict`` also stretches an interval
        to hold its point, where the point falls outside, and the point costs most (its order
        model ranks every workload's rows).
        """
        self._check_fitted()
        # The columns the interval's quantile ensembles split on.
        seen = self.accuracy_._band_X(self.encoder_.transform(rows))
        _, first, inverse = np.unique(seen, axis=0, return_index=True, return_inverse=True)
        others = [w for w, keep in zip(self.workloads_, self._of_model(meta.get("model")), strict=True) if keep]
        swapped = [dict(rows[i], meta=w["meta"]) for w in others for i in first]
        band = self.accuracy_.predict_band(self.encoder_.transform(swapped))
        low, high = (end.reshape(len(others), len(first)).mean(axis=0)[inverse.ravel()] for end in band)
        return low, high

    def ranking_accuracy(self, rows: Sequence[dict[str, Any]], meta: dict[str, Any], low: np.ndarray
                         ) -> tuple[np.ndarray, float, tuple[np.ndarray, np.ndarray] | None]:
        """What the picks rank ``rows`` by, the share of it that is ``low`` (the low ends as
        learnt for ``meta``), and the consensus band it was mixed with (None where it was not).

        Where ``meta`` is like the measured workloads of its model, ``low`` itself (share 1).
        Where it is unlike them (:meth:`novelty`), its own low ends are an extrapolation: they
        are mixed with the consensus of the measured workloads of its model
        (:meth:`consensus_accuracy_band`'s low ends), ``low`` weighing ``1 / u``, with ``u`` the
        factor its intervals are widened by for the workload (``1 + d / t``): the consensus
        brings such a workload's pick closer to its best run (docs/explanation/how-recommend-decides.md#out-of-distribution). The band is what :meth:`widen` stretches such a workload's accuracy
        intervals to reach.
        """
        _, _, unlike = self._unlike(meta, k=1)
        if unlike <= 1.0:
            return low, 1.0, None
        share = 1.0 / unlike
        band = self.consensus_accuracy_band(rows, meta)
        return share * low + (1.0 - share) * band[0], share, band

    def novelty(self, meta: dict[str, Any], hardware: dict[str, Any], policy: NoveltyPolicy
                ) -> tuple[bool, list[str], list[tuple[str, float]]]:
        """Whether a workload / hardware lies outside the knowledge base, by ``policy``'s
        thresholds (``data_size_ood``, ``hardware_memory_range``), the measured range of
        workloads (:meth:`outside_reasons`) and the distance to them: (flag, reasons, nearest)."""
        nearest, _, unlike = self._unlike(meta, k=3)
        outside = self.outside_reasons(meta)
        # The measured ranges a workload leaves come before its distance: they name what differs.
        reasons = []
        known_model = self.model_measured(meta.get("model"))
        if not known_model:
            measured = sorted({str(w.get("model")) for w in self.workloads_})
            reasons.append(f"model {meta['model']!r} was never measured (measured: {', '.join(measured)}): "
                           "its accuracy is predicted from other models' runs")
        reasons.extend(outside)
        if known_model and unlike > 1.0 and (not outside or nearest[0][1] > self.ood_threshold_):
            reasons.append(
                f"workload is unlike every measured one of its model (distance {nearest[0][1]:.2f} to "
                f"{nearest[0][0]}; measured workloads lie within {self.ood_threshold_:.2f} of the "
                "nearest other of their model)"
            )
        larger = self._data_size_reason(meta, policy)
        if larger:
            reasons.append(larger[1])
        reasons.extend(self._hardware_reasons(hardware, policy))
        return bool(reasons), reasons, nearest

    def widen(self, pred: dict[str, np.ndarray], meta: dict[str, Any], hardware: dict[str, Any],
              policy: NoveltyPolicy, consensus: tuple[np.ndarray, np.ndarray] | None = None,
              ) -> tuple[dict[str, np.ndarray], list[str]]:
        """``pred``'s intervals widened for how far ``meta`` / ``hardware`` lie from the
        knowledge base, with a note per widening (none when both are like what was measured).

        The intervals were calibrated on measured workloads and hardware; outside them they
        would claim a confidence the data cannot give. A workload at distance ``d`` (from the
        nearest measured workload of its model) beyond the out-of-distribution threshold ``t``
        gets every interval's width multiplied by ``1 + d / t`` (nearer, the accuracy interval's
        alone, without a note), a model never measured by
        ``1 + max(d, t) / t``, and so a workload outside the measured range
        (:meth:`outside_reasons`); a data set ``r`` > ``policy.data_size_ood`` times the largest measured gets
        the training-time and memory intervals' widths (in log space) multiplied by
        ``1 + ln(r)`` instead where that is more (their cost models extrapolate in size, with
        coefficients fitted on smaller data sets); hardware unlike the measured gets the training-time interval widened by
        a factor ``policy.hardware_time_factor`` each way per reason (another CPU, core count or a
        GPU can change throughput several-fold, and no measurement says in which direction)
        and the memory interval by ``policy.hardware_memory_factor`` per reason (more cores run
        more threads, each with its buffers; a GPU machine's CUDA build of a framework maps
        more libraries). For an unlike workload, ``consensus`` (the band
        :meth:`ranking_accuracy` returns) stretches each accuracy interval further to reach it:
        its own stretched interval stays around its own extrapolated point, while the picks rank
        by the consensus too (docs/explanation/how-recommend-decides.md#out-of-distribution). Accuracy
        does not depend on the hardware. (Thread counts beyond the
        measured: :meth:`hedge_threads`.) Always, without a note: the memory interval's high end
        reaches at least ``policy.installation_memory_factor`` times its point, for the user's
        installation of the frameworks, whose mapped library pages differ from the knowledge
        base's; and an accuracy low end at chance reaches down by the test set's sampling noise
        of a chance-level score (:func:`_chance_low`): a run that learns nothing scores about
        chance, below it as often as above.
        """
        self._check_fitted()
        out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in pred.items()}
        notes = []
        nearest, why, unlike = self._unlike(meta, k=1)
        # A workload not measured, though like the measured ones, still widens its accuracy band
        # with the distance to the nearest (1 + d / t), silently: unseen workloads fell outside
        # the bands calibrated on held-out ones (benchmarks/unseen_workloads.py).
        accuracy = unlike if unlike > 1.0 or not nearest else 1.0 + nearest[0][1] / self.ood_threshold_
        if accuracy > 1.0:
            _stretch(out, "accuracy", accuracy, False)
            out["accuracy_low"] = np.clip(out["accuracy_low"], 0.0, 1.0)
            out["accuracy_high"] = np.clip(out["accuracy_high"], 0.0, 1.0)
        if unlike > 1.0:
            for key in ("train_time_s", "peak_rss_mb"):
                _stretch(out, key, unlike, True)
            notes.append(f"intervals {unlike:.1f}x wider: {why or _UNLIKE}")
            if consensus is not None:
                out["accuracy_low"] = np.minimum(out["accuracy_low"], consensus[0])
                out["accuracy_high"] = np.maximum(out["accuracy_high"], consensus[1])
                notes.append("accuracy intervals reach the configuration's interval averaged over the measured "
                             + ("workloads of its model" if self.model_measured(meta.get("model")) else "workloads"))
        larger = self._data_size_reason(meta, policy)
        # The distance counts the data's size too: a data set both larger and unlike gets the
        # larger of the two stretches, not their product.
        if larger and 1.0 + math.log(larger[0]) > unlike:
            stretch = (1.0 + math.log(larger[0])) / unlike
            for key in ("train_time_s", "peak_rss_mb"):
                _stretch(out, key, stretch, True)
            notes.append(f"training-time and memory intervals {unlike * stretch:.1f}x wider: the data "
                         f"set is {larger[0]:.3g}x the largest measured")
        # A low end at chance: a run that learns nothing scores chance give or take its test
        # set's sampling noise, so the floor itself bounds no such run.
        chance = _chance_low(meta, self.coverage)
        if chance is not None:
            at_floor = out["accuracy_low"] <= chance[0] + 1e-9
            out["accuracy_low"] = np.where(at_floor, np.minimum(out["accuracy_low"], chance[1]), out["accuracy_low"])
        # Another installation of the same frameworks (the user's): its mapped library pages.
        out["peak_rss_mb_high"] = np.maximum(out["peak_rss_mb_high"],
                                             out["peak_rss_mb"] * policy.installation_memory_factor)
        hardware_reasons = len(self._hardware_reasons(hardware, policy))
        if hardware_reasons:
            factor = policy.hardware_time_factor ** hardware_reasons
            memory = policy.hardware_memory_factor ** hardware_reasons
            out["train_time_s_low"] = out["train_time_s_low"] / factor
            out["train_time_s_high"] = out["train_time_s_high"] * factor
            out["peak_rss_mb_low"] = out["peak_rss_mb_low"] / memory
            out["peak_rss_mb_high"] = out["peak_rss_mb_high"] * memory
            notes.append(f"training-time interval {factor:g}x wider each way and memory "
                         f"{memory:.3g}x: the hardware is unlike the measured")
        return out, notes

    def threads_top(self, hardware: dict[str, Any]) -> int | None:
        """The most intra-op threads measured on ``hardware``'s machine (its own runs where it
        has some, else any run), or None where its core count is flagged already."""
        self._check_fitted()
        top = self.threads_measured_.get(self.machine_of(hardware), self.threads_measured_.get("*"))
        return None if top is None or self._cores_outside(hardware) else int(top)

    def threads_reason(self, threads: int, hardware: dict[str, Any]) -> str | None:
        """Why ``threads`` intra-op threads on ``hardware`` lie beyond the measured, or None
        (see :meth:`hedge_threads`)."""
        top = self.threads_top(hardware)
        if top is None or threads <= top:
            return None
        return (f"{threads} threads is beyond the {top} this machine's runs used at most: its "
                f"training time lies between the {top}-thread prediction and the cost model's "
                f"extrapolation (`dltune bench --threads {threads}` measures it)")

    def hedge_threads(self, pred: dict[str, np.ndarray], rows: Sequence[dict[str, Any]],
                      hardware: dict[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
        """Training times of ``rows`` with more threads than ``hardware``'s machine was measured
        at, hedged between what those threads can gain: nothing, or what the cost model says.

        The cost model learns how time falls with threads from the thread counts the runs used
        (1 and 2 for the knowledge base and ``dltune kb calibrate`` on 2 cores) and extrapolates
        beyond. (A machine calibrated on more cores ran all of them too: its times there are
        scaled by what they gained, :func:`thread_delta`, and not hedged.)
        Beyond the measured threads the extrapolation is too fast and no gain too slow
        (``benchmarks/threads_hedge.py``), so such a row's point becomes the geometric
        middle of the two predictions (the same configuration at the measured threads, and
        the extrapolation) and its interval reaches both intervals' far ends. Its memory and
        accuracy are left as predicted. Returns the new predictions and a note (none when no
        row lies beyond).
        """
        top = self.threads_top(hardware)
        threads = [intra_threads(r["config"], r["hardware"]) for r in rows]
        beyond = np.array([top is not None and n is not None and n > top for n in threads], dtype=bool)
        if not beyond.any():
            return pred, []
        at_top = self.predict([
            dict(rows[i], hardware=dict(rows[i]["hardware"], usable_cores=hardware.get("usable_cores")),
                 config=dict(rows[i]["config"], threads={"intra_op": top, "inter_op": 1, "blas": top,
                                                         "cores": None}))
            for i in np.flatnonzero(beyond)])
        out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in pred.items()}
        ext = {k: out[f"train_time_s{k}"][beyond] for k in ("", "_low", "_high")}
        out["train_time_s"][beyond] = np.sqrt(ext[""] * at_top["train_time_s"])
        out["train_time_s_low"][beyond] = np.minimum(ext["_low"], at_top["train_time_s_low"])
        out["train_time_s_high"][beyond] = np.maximum(ext["_high"], at_top["train_time_s_high"])
        return out, [f"training time of {int(beyond.sum())} configurations with more than {top} "
                     f"threads: between the {top}-thread prediction and the extrapolation"]

    def _cores_outside(self, hardware: dict[str, Any]) -> str | None:
        cores = [h["usable_cores"] for h in self.hardware_ if h.get("usable_cores")]
        usable = hardware.get("usable_cores", hardware.get("logical_cores"))
        if cores and usable is not None and not (min(cores) <= usable <= max(cores)):
            return f"{usable} usable cores is outside the measured {min(cores)}..{max(cores)}"
        return None

    def _hardware_reasons(self, hardware: dict[str, Any], policy: NoveltyPolicy) -> list[str]:
        calibrated = set(self.calibrated_machines())
        measured = [h for h in self.hardware_ if machine_key(h) in calibrated]
        models = sorted({cpu_identity(h) for h in measured})
        reasons = []
        if cpu_identity(hardware) not in models:
            same_name = any(str(h["cpu_model"]) == str(hardware.get("cpu_model")) for h in measured)
            hint = ("; the description gives no cpu_flags, and the same model string differs in "
                    "speed by instruction set: `dltune hardware --json` on that machine lists them"
                    if same_name and not hardware.get("cpu_flags") else "")
            reasons.append(f"CPU {cpu_identity(hardware)!r} was never measured (measured: {', '.join(models)}; "
                           f"`dltune kb calibrate` measures this machine in a few minutes{hint})")
        cores = self._cores_outside(hardware)
        if cores:
            reasons.append(cores)
        if len(hardware.get("gpus") or ()) and not any(h["gpus"] for h in self.hardware_):
            reasons.append("the knowledge base has no GPU measurements")
        vec = hardware_vector(hardware)
        mems = [h["memory_gb"] for h in self.hardware_ if h.get("memory_gb")]
        span = policy.hardware_memory_range
        if mems and math.isfinite(vec[2]) and not (min(mems) / span <= math.exp(vec[2]) <= span * max(mems)):
            reasons.append(f"{math.exp(vec[2]):.0f} GB memory is far from the measured {min(mems):.0f}..{max(mems):.0f} GB")
        return reasons
