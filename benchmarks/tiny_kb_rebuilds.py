"""How the tests that read the freshly measured tiny knowledge base fare on fresh measurements.

Each clean clone measures the ``tiny`` suite afresh (tests/conftest.py's ``tiny_kb``), so those
tests see other timings on every machine and day. This rebuilds it N times into scratch caches,
as the fixture does (waiting up to 60 s for the machine to fall quiet before each run; ``--no-wait``
to skip that), every other build beside a busy process that starts 0-8 s into the build and
spins for 15 s (``--neighbour``), and runs the knowledge-base, surrogate and recommend tests on
each build, with the rest of this checkout's cache (``DLTUNE_CACHE``, else .cache/dltune:
the legacy runtime, data arrays) linked in. It prints a line per build and keeps each build's
records in OUT.

    python benchmarks/tiny_kb_rebuilds.py [--builds 4] [--neighbour] [--no-wait] [--out DIR]

Takes about 1.5 minutes a build on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = Path(os.environ.get("DLTUNE_CACHE") or ROOT / ".cache" / "dltune")
BUILD = """
import sys
from dltune._paths import cache_dir
from dltune.kb import build_kb
build_kb("tiny", out=cache_dir() / "test-kb" / "tiny-numpy", frameworks=["numpy"],
         configs_per_pair=6, repeats=1, quiet_wait_s=float(sys.argv[1]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=4)
    parser.add_argument("--neighbour", action="store_true", help="a busy process beside every other build")
    parser.add_argument("--no-wait", action="store_true", help="do not wait for the machine to fall quiet")
    parser.add_argument("--out", default="tiny-kb-rebuilds", help="folder for each build's records")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i in range(args.builds):
        cache = out / f"cache-{i}"
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir()
        # The rest of the cache (legacy runtime, data arrays, landmarks) is this checkout's.
        for entry in BASE.iterdir() if BASE.is_dir() else []:
            if entry.name not in ("test-kb", "surrogates"):
                (cache / entry.name).symlink_to(entry.resolve())
        env = {**os.environ, "DLTUNE_CACHE": str(cache)}
        busy = args.neighbour and i % 2 == 0
        neighbour = None
        if busy:
            neighbour = subprocess.Popen([sys.executable, "-c", (
                f"import time; time.sleep({random.randint(0, 8)}); end = time.time() + 15\n"
                "while time.time() < end: pass")])
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", BUILD, "0" if args.no_wait else "60"], env=env,
                       cwd=ROOT, check=True, capture_output=True)
        built = time.monotonic() - started
        if neighbour is not None:
            neighbour.wait()
        records = cache / "test-kb" / "tiny-numpy" / "records.jsonl"
        shutil.copy(records, out / f"records-{i}.jsonl")
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "tests/kb", "tests/surrogate", "tests/recommend"],
                               env=env, cwd=ROOT, capture_output=True, text=True)
        lines = [ln for ln in tests.stdout.splitlines() if ln.startswith("FAILED") or " passed" in ln
                 or " failed" in ln]
        print(f"build {i} ({'beside a busy process' if busy else 'quiet'}, built in {built:.0f} s): "
              + "; ".join(lines), flush=True)


if __name__ == "__main__":
    main()
