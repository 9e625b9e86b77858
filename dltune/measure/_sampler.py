"""A sampler thread in the parent that watches a worker's CPU use and resident memory."""

from __future__ import annotations

import threading
import time
from typing import Any

import psutil

__all__ = ["ResourceSampler"]


class ResourceSampler:
    """Samples a process every ``interval`` seconds until stopped; use as a context manager.

    CPU rates are kept only while :meth:`set_training` says the worker is training, so the
    figures describe training, not evaluation or start-up. Peak memory covers the whole run.
    """

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.interval = interval
        self._proc = psutil.Process(pid)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._training = False
        self._last: tuple[float, float] | None = None
        self.rates: list[float] = []
        self.peak_rss = 0
        self.baseline_rss = 0
        # Resident memory without mapped file pages (shared libraries), where the OS says
        # (Linux: rss - shared): RSS also counts library pages, which vary with the page cache.
        self.peak_anon: int | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        try:
            with self._proc.oneshot():
                times = self._proc.cpu_times()
                info = self._proc.memory_info()
                rss = info.rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return
        now = time.perf_counter()
        cpu = times.user + times.system
        with self._lock:
            self.peak_rss = max(self.peak_rss, rss)
            shared = getattr(info, "shared", None)
            if shared is not None:
                self.peak_anon = max(self.peak_anon or 0, rss - shared)
            if self._training and self._last is not None:
                dt = now - self._last[0]
                if dt > 0:
                    self.rates.append(100.0 * (cpu - self._last[1]) / dt)
            self._last = (now, cpu)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def set_training(self, training: bool) -> None:
        """Mark the start or end of a training window (sampled at the boundary)."""
        self._sample()
        with self._lock:
            self._training = training

    def __enter__(self) -> ResourceSampler:
        self._sample()
        self.baseline_rss = self.peak_rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def summary(self, cores: int) -> dict[str, Any]:
        """CPU use as % of one core (mean and p95) and as a fraction of ``cores``; peak MB."""
        import numpy as np

        rates = np.asarray(self.rates) if self.rates else np.zeros(1)
        return {
            "cpu_percent_p95": float(np.percentile(rates, 95)),
            "cpu_percent_sampled_mean": float(rates.mean()),
            "peak_rss_mb": self.peak_rss / 2**20,
            "baseline_rss_mb": self.baseline_rss / 2**20,
            # What this run added over the (possibly warm, reused) worker's resident memory.
            "peak_rss_delta_mb": max(0, self.peak_rss - self.baseline_rss) / 2**20,
            "peak_rss_anon_mb": None if self.peak_anon is None else self.peak_anon / 2**20,
            "cpu_samples": int(len(self.rates)),
        }
