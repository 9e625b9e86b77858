"""How fast ``dltune.recommend`` answers: fitting the surrogates, a fresh process, repeated calls.

    python benchmarks/recommend_speed.py [--fresh N] [--baseline DIR] [--json]

Prints, measured side by side in one run on this machine: the fit on the shipped knowledge base
alone and with this cache's ``dltune kb calibrate`` records, as dltune fits (the accuracy
surrogate in a second process where at least 2 cores are usable) and in one process; ``python -c "import dltune;
print(dltune.recommend('digits'))"`` in N fresh processes as on a fresh install (an empty cache,
no storage: the surrogates shipped in the package are loaded) and with this cache's model;
and, in one process, the first call, a second call and a call with another objective; and a
call for a workload unlike every measured one of its model, whose candidates are ranked partly
by the consensus of the measured ones. Run it on an idle machine.

With ``--baseline DIR`` (a checkout, e.g. ``git worktree add DIR HEAD``), the same timings are
taken of the dltune in DIR first, in a process of its own, then of this one, and printed side by
side; ``--json`` prints this one's as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", type=int, default=3)
    parser.add_argument("--baseline", help="a checkout whose dltune is timed first, side by side")
    parser.add_argument("--json", action="store_true", help="print the timings as JSON")
    args = parser.parse_args()
    if args.baseline:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
            str(Path(args.baseline).resolve()), os.environ.get("PYTHONPATH")])))
        done = subprocess.run([sys.executable, __file__, "--json", "--fresh", str(args.fresh)],
                              check=True, capture_output=True, text=True, env=env)
        baseline = json.loads(done.stdout)
        here = measure(args.fresh)
        timed = {k: v for k, v in here.items() if k != "dltune"}
        width = max(len(k) for k in timed)
        print(f"{'seconds':<{width}}  {'baseline':>9}  {'this tree':>9}  ratio")
        for key, value in timed.items():
            before = baseline.get(key)
            ratio = f"{value / before:.2f}x" if before else "-"
            print(f"{key:<{width}}  {before if before is not None else float('nan'):9.4f}  {value:9.4f}  {ratio}")
        print(f"(baseline: {baseline['dltune']}; this tree: {here['dltune']})")
        return
    timings = measure(args.fresh, echo=not args.json)
    if args.json:
        print(json.dumps(timings))


def measure(n_fresh: int, echo: bool = False) -> dict:
    """The timings, by name (seconds; ``dltune``: where the dltune timed lives), each also
    printed as a sentence with ``echo``."""
    import sklearn.ensemble  # noqa: F401  imported before the first fit is timed: each pays the same

    import dltune
    from dltune.kb import calibration_records, load_shipped_records
    from dltune.surrogate import PerformanceModel, fitted_model

    out: dict = {}

    def say(text: str) -> None:
        if echo:
            print(text)

    shipped = load_shipped_records()
    calibration = calibration_records()
    for name, key, records in (("shipped knowledge base", "fit", shipped),
                               (f"+ {len(calibration)} calibration records", "fit + calibrations",
                                shipped + calibration)):
        if name.startswith("+") and not calibration:
            continue
        seconds = {}
        for jobs in (None, 1):  # as dltune fits (a second process where it pays), and in one
            started = time.perf_counter()
            PerformanceModel(n_jobs=jobs).fit(records)
            seconds[jobs] = time.perf_counter() - started
        out[key], out[f"{key} (one process)"] = seconds[None], seconds[1]
        say(f"fit on {name} ({len(records)} records): {seconds[None]:.1f} s "
            f"({seconds[1]:.1f} s in one process: {seconds[1] / seconds[None]:.2f}x)")
    code = "import dltune; print(dltune.recommend('digits'))"

    def fresh_processes(env: dict[str, str], cwd: str | None = None) -> list[float]:
        fresh = []
        for _ in range(n_fresh):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env, cwd=cwd)
            fresh.append(time.perf_counter() - started)
        return fresh

    def spread(fresh: list[float]) -> str:
        return f"{min(fresh):.2f}-{max(fresh):.2f} s ({n_fresh} runs)"

    with tempfile.TemporaryDirectory() as empty:
        env = {k: v for k, v in os.environ.items() if k != "DLTUNE_STORAGE"}
        env["DLTUNE_CACHE"] = str(Path(empty) / "cache")
        # The same dltune as this process's (an editable install's, or a checkout's on PYTHONPATH).
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(dltune.__file__).resolve().parents[1]),
                                                          env.get("PYTHONPATH")]))
        fresh = fresh_processes(env, cwd=empty)
        out["fresh install, fastest process"] = min(fresh)
        fitted = (Path(empty) / "cache" / "surrogates").exists()
        say(f"fresh install (empty cache, no storage): {spread(fresh)}, "
            + ("FITTED: the shipped surrogates are not this knowledge base's fit "
               "(dltune kb export --surrogates-only)" if fitted else "the shipped surrogates loaded"))
    fitted_model()  # cache the default model, as a user's first call would
    fresh = fresh_processes(dict(os.environ))
    out["fresh process with the cache's model, fastest"] = min(fresh)
    say(f"fresh process, this cache's model: {spread(fresh)}")
    from dltune.recommend import recommend

    times = []
    for objective in ("balanced", "balanced", "accuracy"):
        started = time.perf_counter()
        recommend("digits", objective=objective)
        times.append(time.perf_counter() - started)
    out["first call"], out["second call"], out["another objective"] = times
    say(f"in one process: first call {times[0]:.3f} s, second {times[1]:.4f} s, "
        f"another objective {times[2]:.4f} s")
    # A workload unlike every measured one of its model: its candidates are ranked partly by the
    # consensus of the measured ones (each distinct candidate predicted for each of them).
    from dltune import Workload
    from dltune.recommend import _recommend

    unlike = Workload.from_name("synthetic", "lenet", n_train=200, height=8, width=8, classes=10,
                                difficulty=0.9)
    recommend(unlike, storage=None)  # the data set's meta-features and landmarks, once
    answers, seconds = {}, {}
    for name, workload in (("digits", "digits"), ("unlike", unlike)):
        _recommend._predictions.clear()  # a new question to a loaded model
        started = time.perf_counter()
        answers[name] = recommend(workload, storage=None)
        seconds[name] = time.perf_counter() - started
    out["new question, digits"], out["new question, unlike LeNet"] = seconds["digits"], seconds["unlike"]
    say(f"a new question to the loaded model: digits {seconds['digits']:.3f} s (own share "
        f"{answers['digits'].ranked_own_share:.2f}); a 200 x 8x8x1 LeNet at difficulty 0.9, unlike every "
        f"measured LeNet workload, {seconds['unlike']:.3f} s (own share {answers['unlike'].ranked_own_share:.2f})")
    out["dltune"] = str(Path(dltune.__file__).resolve().parents[1])
    return out


if __name__ == "__main__":
    main()
