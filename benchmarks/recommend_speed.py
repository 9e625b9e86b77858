"""How fast ``dltune.recommend`` answers: fitting the surrogates, a fresh process, repeated calls.

    python benchmarks/recommend_speed.py [--fresh N]

Prints, measured side by side in one run on this machine: the fit on the shipped knowledge base
alone and with this cache's ``dltune kb calibrate`` records; ``python -c "import dltune;
print(dltune.recommend('digits'))"`` in N fresh processes (model cached); and, in one process,
the first call, a second call and a call with another objective. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


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
    fitted_model()  # cache the default model, as a user's first call would
    code = "import dltune; print(dltune.recommend('digits'))"
    fresh = []
    for _ in range(args.fresh):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        fresh.append(time.perf_counter() - started)
    print(f"fresh process, cached model: {min(fresh):.2f}-{max(fresh):.2f} s ({args.fresh} runs)")
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
