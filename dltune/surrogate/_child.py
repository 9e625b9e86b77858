"""The accuracy surrogate fitted in a child process, beside the rest of the fit.

``PerformanceModel.fit`` spends about half its time on the accuracy surrogate, which nothing
else in the fit reads. A second process fits it while the first fits the training-time and
memory surrogates. Threads do not help: the trees are fitted on one OpenMP thread each (more
spin on data this small), and a thread beside them made the fit slower.

The child is a fresh interpreter running :func:`_main` on ``FOLDER``, not a fork
(the parent may hold OpenMP or framework threads) nor ``multiprocessing``'s spawn (which imports
the caller's main script again). It reads its inputs from ``FOLDER`` (the model's parameters
and feature encoder as JSON, the rows as a ``.npz``), fits the estimator the parent would have
fitted, and writes it as the arrays ``PerformanceModel.save`` writes for it; the parent loads
them as it loads a cached model. Nothing is pickled. The fit is the same to the last bit
(tested).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ChildFit", "start_child_fit"]

PREFIX = "acc."
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class ChildFit:
    """A fit running in a child process; :meth:`result` waits for it."""

    def __init__(self, folder: tempfile.TemporaryDirectory, process: subprocess.Popen,
                 stderr: Any = None) -> None:
        self._folder = folder
        self._process = process
        self._stderr = stderr  # the child's error output, open for it (folder/stderr.txt)

    def result(self, estimator: Any) -> Any | None:
        """``estimator`` (unfitted, built as the child built its own) loaded with the child's
        fit; None, with a warning that says why, where the child failed (the caller then fits
        in this process)."""
        folder = Path(self._folder.name)
        try:
            try:
                self._process.wait()
                out = folder / "fit.npz"
                if self._process.returncode == 0 and out.exists():
                    with np.load(out, allow_pickle=False) as arrays:
                        return estimator.load_arrays(arrays, PREFIX)
                why = f"exited with status {self._process.returncode}"
            except (OSError, ValueError, KeyError) as error:
                why = f"left a fit that cannot be read ({error})"
            try:
                lines = (folder / "stderr.txt").read_text(errors="replace").strip().splitlines()
            except OSError:
                lines = []
            warnings.warn(f"The second process fitting the accuracy surrogate {why}"
                          + (f": {lines[-1]}" if lines else "")
                          + "; it is fitted in this process instead.", RuntimeWarning, stacklevel=3)
            return None
        finally:
            self.close()

    def __del__(self) -> None:  # a fit abandoned without result() or close()
        try:
            self.close()
        except Exception:  # noqa: BLE001  at interpreter exit, anything may be gone
            pass

    def close(self) -> None:
        """Stop the child if it still runs, and delete its folder."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._folder.cleanup()


def start_child_fit(params: dict[str, Any], encoder_state: dict[str, Any], X: np.ndarray,
                    y: np.ndarray, groups: np.ndarray) -> ChildFit | None:
    """Start fitting ``PerformanceModel(**params)``'s accuracy surrogate on ``X, y, groups`` in
    a child process; None where it cannot start."""
    folder = tempfile.TemporaryDirectory(prefix="dltune-fit-")
    try:
        path = Path(folder.name)
        (path / "job.json").write_text(json.dumps({"params": params, "encoder": encoder_state},
                                                  default=float))
        np.savez(path / "inputs.npz", X=np.asarray(X, dtype=np.float64),
                 y=np.asarray(y, dtype=np.float64), groups=np.asarray(groups).astype(str))
        # This dltune, wherever it is imported from (an installed package or a checkout).
        root = str(Path(__file__).resolve().parents[2])
        code = ("import sys\nif sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
                "from dltune.surrogate._child import _main\n_main(sys.argv[2])")
        # One thread per process: the parent fits beside it with one too (more oversubscribe
        # the cores, and OpenMP's spinning threads then slow both fits).
        env = dict(os.environ, **{v: "1" for v in _THREAD_VARIABLES})
        stderr = open(path / "stderr.txt", "wb")  # noqa: SIM115  closed by ChildFit.close
        try:
            process = subprocess.Popen([sys.executable, "-c", code, root, str(path)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=stderr, env=env)
        except BaseException:
            stderr.close()
            raise
    except (OSError, ValueError):
        folder.cleanup()
        return None
    return ChildFit(folder, process, stderr)


def _main(folder: str) -> None:
    from dltune.surrogate._features import FeatureEncoder
    from dltune.surrogate._model import PerformanceModel

    path = Path(folder)
    job = json.loads((path / "job.json").read_text())
    with np.load(path / "inputs.npz", allow_pickle=False) as arrays:
        X, y, groups = arrays["X"], arrays["y"], arrays["groups"]
    encoder = FeatureEncoder.from_state(job["encoder"])
    estimator = PerformanceModel(**job["params"])._estimators(encoder)[0]
    estimator.fit(X, y, groups)
    tmp = path / "fit.tmp.npz"
    np.savez(tmp, **estimator.to_arrays(PREFIX))
    tmp.replace(path / "fit.npz")
