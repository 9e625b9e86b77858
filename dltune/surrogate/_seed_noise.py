"""Each measured workload's configurations and the seed noise of one run: what a configuration
measured on the workload scored, and how far one more run of it may fall."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dltune.measure._noise import SeedNoise, noise_scale
from dltune.surrogate._features import workload_vector
from dltune.surrogate._novelty import _NOVELTY_IDX

__all__ = ["NOISE_NEIGHBOURS", "SeedNoiseMixin", "measured_key", "workload_key"]

# What does not change what a configuration trains to: left out when runs of one workload are
# grouped into measured configurations (PerformanceModel.measured_runs).
_NOT_TRAINING = ("seed", "threads", "device", "timeout_s", "preset_name")
# A workload without them takes the median of this many nearest measured workloads' of its model.
NOISE_NEIGHBOURS = 3


def measured_key(config: dict[str, Any]) -> str:
    """What tells measured configurations apart: the configuration but for how and where it
    ran (threads, device, timeout) and its seed."""
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_TRAINING}, sort_keys=True, default=str)


def workload_key(fingerprint: str | None, model: str | None) -> str:
    """A measured workload's key: its data set's fingerprint and its model."""
    return f"{fingerprint}|{model}"


class SeedNoiseMixin:
    """:class:`~dltune.surrogate.PerformanceModel`'s measured configurations and seed noise."""

    def _fit_measured(self, data: list[dict[str, Any]]) -> None:
        """Each workload's measured configurations: their mean accuracy over distinct seeds (a
        run measured again with its seed, e.g. by ``dltune kb calibrate``, counts once), and
        the workload's seed noise (the scale of :class:`~dltune.measure._noise.SeedNoise`) where
        it has :data:`MIN_NOISE_PAIRS` repeat pairs that tell, at least one test sample's worth
        of accuracy (1 / n_test)."""
        by_workload: dict[str, dict[str, dict[str, Any]]] = {}
        n_test: dict[str, float] = {}
        for d in data:
            w = d["workload"]
            key = workload_key(w.get("fingerprint"), w.get("model") or w["meta"].get("model"))
            n_test[key] = float(w["meta"].get("n_test") or 0)
            entry = by_workload.setdefault(key, {}).setdefault(measured_key(d["config"]), {
                "config": {k: v for k, v in d["config"].items() if k not in ("seed", "threads", "timeout_s")},
                "seeds": {}})
            entry["seeds"].setdefault(str(d["config"].get("seed")), float(d["metrics"]["test_accuracy"]))
        self.measured_: dict[str, dict[str, Any]] = {}
        for key, configs in by_workload.items():
            floor = 1.0 / n_test[key] if n_test[key] > 0 else 0.0
            pairs = [a[:2] for c in configs.values() if len(a := list(c["seeds"].values())) >= 2]
            self.measured_[key] = {"sigma": noise_scale(pairs, floor), "floor": floor, "configs": [
                {"config": c["config"], "accuracy": float(np.mean(list(c["seeds"].values()))),
                 "runs": len(c["seeds"])} for c in configs.values()]}
        sigmas = [m["sigma"] for m in self.measured_.values() if m["sigma"] is not None]
        # Without repeats anywhere: 0.06 sqrt(p (1 - p)), about the median of the shipped ones (0.063).
        self.measured_sigma_ = float(np.median(sigmas)) if sigmas else 0.06

    def measured_runs(self, fingerprint: str | None, model: str | None) -> tuple[list[dict[str, Any]], SeedNoise]:
        """The configurations measured on a workload (its data set's fingerprint and model):
        each ``{"config", "accuracy", "runs"}`` (the mean accuracy over ``runs`` distinct
        seeds), and the seed noise of one run (:class:`SeedNoise`: the workload's own scale
        where it has enough repeat pairs, else that of its nearest measured workloads,
        :meth:`_nearest_sigma`)."""
        self._check_fitted()
        entry = self.measured_.get(workload_key(fingerprint, model))
        if not entry:
            return [], SeedNoise(self.measured_sigma_, 0.0)
        if isinstance(entry["configs"], bytes):  # as loaded: each workload's parsed when asked for
            entry["configs"] = json.loads(entry["configs"].decode())
        scale = entry["sigma"] if entry["sigma"] is not None else self._nearest_sigma(fingerprint, model)
        return entry["configs"], SeedNoise(scale, entry["floor"])

    def has_own_seed_noise(self, fingerprint: str | None, model: str | None) -> bool:
        """Whether the workload's seed noise (:meth:`measured_runs`) is its own: it has at least
        :data:`MIN_NOISE_PAIRS` configurations measured with two seeds whose mean is more than
        a test sample from 0 and 100 % (:func:`~dltune.measure._noise.noise_scale`)."""
        self._check_fitted()
        entry = self.measured_.get(workload_key(fingerprint, model))
        return bool(entry) and entry["sigma"] is not None

    def _nearest_sigma(self, fingerprint: str | None, model: str | None) -> float:
        """The seed noise of a workload without repeats of its own: the median of its
        :data:`NOISE_NEIGHBOURS` nearest measured workloads' of its model that have them (as
        :meth:`nearest` measures), else of all that have them."""
        index = next((i for i, w in enumerate(self.workloads_)
                      if w.get("fingerprint") == fingerprint and w.get("model") == model), None)
        if index is None:
            return self.measured_sigma_
        sigmas = np.array([(self.measured_.get(workload_key(w.get("fingerprint"), w.get("model"))) or {}).get("sigma")
                           for w in self.workloads_], dtype=float)
        dist = self._distances(workload_vector(self.workloads_[index]["meta"])[_NOVELTY_IDX], skip=index, model=model)
        known = np.flatnonzero(np.isfinite(dist) & np.isfinite(sigmas))
        if not len(known):
            return self.measured_sigma_
        nearest = known[np.argsort(dist[known], kind="stable")[:NOISE_NEIGHBOURS]]
        return float(np.median(sigmas[nearest]))

    def measured_interval(self, accuracy: np.ndarray, runs: np.ndarray, noise: SeedNoise | float) -> tuple[np.ndarray, np.ndarray]:
        """The interval (at the model's ``coverage``) of one more run of a configuration whose
        ``runs`` runs measured ``accuracy`` on average, given seed noise ``noise`` per run (a
        :class:`SeedNoise`, or one sigma for every accuracy)."""
        from statistics import NormalDist

        accuracy = np.asarray(accuracy, dtype=float)
        sigma = noise.at(accuracy) if isinstance(noise, SeedNoise) else float(noise)
        half = NormalDist().inv_cdf(0.5 + self.coverage / 2) * sigma * np.sqrt(1.0 + 1.0 / np.asarray(runs, dtype=float))
        return np.clip(accuracy - half, 0.0, 1.0), np.clip(accuracy + half, 0.0, 1.0)
