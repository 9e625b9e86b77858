"""How fast ``dltune.recommend`` answers: fitting the surrogates, a fresh process, repeated calls.

    python benchmarks/recommend_speed.py [--fresh N]

Prints, measured side by side in one run on this machine: the fit on the shipped knowledge base
alone and with this cache's ``dltune kb calibrate`` records; ``python -c "import dltune;
print(dltune.recommend('digits'))"`` in N fresh processes as on a fresh install (an empty cache,
no storage: the surrogates shipped in the package are loaded) and with this cache's model;
and, in one process, the first call, a second call and a call with another objective. Run it
on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", type=int, default=3)
    args = parser.parse_args()
    from dltune.kb import calibration_records, load_shipped_records
    from dltune.surrogate import PerformanceModel, fitted_model

    shipped = load_shipped_records()
    calibration = calibration_records()
    for name, records in (("shipped knowledge base", shipped),
                          (f"+ {len(calibration)} calibration records", shipped + calibration)):
        if name.startswith("+") and not calibration:
            continue
        started = time.perf_counter()
        PerformanceModel().fit(records)
        print(f"fit on {name} ({len(records)} records): {time.perf_counter() - started:.1f} s")
    code = "import dltune; print(dltune.recommend('digits'))"

    def fresh_processes(env: dict[str, str], cwd: str | None = None) -> str:
        fresh = []
        for _ in range(args.fresh):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env, cwd=cwd)
            fresh.append(time.perf_counter() - started)
        return f"{min(fresh):.2f}-{max(fresh):.2f} s ({args.fresh} runs)"

    with tempfile.TemporaryDirectory() as empty:
        env = {k: v for k, v in os.environ.items() if k != "DLTUNE_STORAGE"}
        env["DLTUNE_CACHE"] = str(Path(empty) / "cache")
        # The same dltune as this process's (an editable install's, or a checkout's on PYTHONPATH).
        import dltune

        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(dltune.__file__).resolve().parents[1]),
                                                          env.get("PYTHONPATH")]))
        timing = fresh_processes(env, cwd=empty)
        fitted = (Path(empty) / "cache" / "surrogates").exists()
        print(f"fresh install (empty cache, no storage): {timing}, "
              + ("FITTED: the shipped surrogates are not this knowledge base's fit "
                 "(dltune kb export --surrogates-only)" if fitted else "the shipped surrogates loaded"))
    fitted_model()  # cache the default model, as a user's first call would
    print(f"fresh process, this cache's model: {fresh_processes(dict(os.environ))}")
    from dltune.recommend import recommend

    times = []
    for objective in ("balanced", "balanced", "accuracy"):
        started = time.perf_counter()
        recommend("digits", objective=objective)
        times.append(time.perf_counter() - started)
    print(f"in one process: first call {times[0]:.3f} s, second {times[1]:.4f} s, "
          f"another objective {times[2]:.4f} s")


if __name__ == "__main__":
    main()
