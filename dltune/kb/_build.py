"""``build_kb``: measure a suite into a resumable knowledge-base folder, with its provenance."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune._log import Progress
from dltune._validation import check_choice, check_float, check_out_dir
from dltune.config._goals import refuse_renamed
from dltune.kb._store import RecordStore
from dltune.kb._suite import SUITES, PlannedRun, SuiteWorkload, plan_suite
from dltune.measure._record import now_iso

__all__ = ["BuildPlan", "BuildResult", "build_kb", "default_build_dir", "load_warning", "plan_build"]

NOISE_NOTE = (
    "Each entry's kb.load_1m is the machine's 1-minute load average when its run started: "
    "training times measured under load carry that noise; repeats (kind 'repeat', another "
    "seed) show its size. Where present, kb.others_cpu_pct is the CPU (in % of one core) the "
    "rest of the machine used just before the run, after kb.waited_s seconds of waiting for "
    "it to fall to the quiet threshold. Where present, kb.steal_pct is the share of the "
    "machine's CPU time during the run and the CPU check before it (0.2 s, longer when it "
    "waited) that its hypervisor gave to other guests (steal time; "
    "absent where the OS does not report it): a virtual machine's host can slow every run "
    "while the machine itself looks idle."
)
# Other work the build waits out before each run: in % of one core, over QUIET_SAMPLE_S. An idle
# 2-vCPU VM reads 0-10 %; one busy process reads about 100 %.
QUIET_CPU_PCT = 30.0
QUIET_SAMPLE_S = 0.2


def others_cpu_pct(interval: float = QUIET_SAMPLE_S) -> float:
    """The CPU the machine used over ``interval`` seconds, in % of one core. Between a build's
    runs its warm workers sleep and the build itself waits here, so this is other work."""
    import psutil

    return psutil.cpu_percent(interval=interval) * (psutil.cpu_count() or 1)


def cpu_steal_pct(before: Any, after: Any) -> float | None:
    """The share (%) of the machine's CPU time between two ``psutil.cpu_times()`` readings
    that the hypervisor gave to other guests (steal time); None where the OS reports no
    steal time or no time passed. Guest time is already counted in user time, so it is left
    out of the total."""
    if not hasattr(before, "steal") or not hasattr(after, "steal"):
        return None

    def busy_and_idle(t: Any) -> float:
        d = t._asdict()
        return sum(v for k, v in d.items() if k not in ("guest", "guest_nice"))
    total = busy_and_idle(after) - busy_and_idle(before)
    if total <= 0:
        return None
    return max(0.0, 100.0 * (after.steal - before.steal) / total)


def wait_for_quiet(max_wait_s: float, threshold: float = QUIET_CPU_PCT,
                   sample: Callable[[], float] = others_cpu_pct,
                   sleep: Callable[[float], None] = time.sleep, step_s: float = 2.0,
                   stop: dict[str, bool] | None = None) -> tuple[float, float]:
    """Sample the machine's CPU use until it is at most ``threshold`` (% of one core) or
    ``max_wait_s`` have passed (then measure anyway: the record keeps the reading). Returns
    the last reading and the seconds waited."""
    waited = 0.0
    reading = sample()
    while reading > threshold and waited < max_wait_s and not (stop or {}).get("stop"):
        pause = min(step_s, max_wait_s - waited)
        sleep(pause)
        waited += pause
        reading = sample()
    return reading, waited


def load_warning(load_1m: float, cores: int,
                 advice: str = "build a knowledge base others will rely on") -> str | None:
    """A warning when the machine is busy before a build starts (None when it is quiet).

    With as many threads as cores, any other runnable process stalls a training step's thread
    barriers: runs measured while it runs are slower than the machine is, by far more than the
    other process's share.
    """
    if load_1m <= 0.5 * max(cores, 1):
        return None
    return (
        f"warning: the 1-minute load average is {load_1m:.1f} on {cores} usable cores: other work "
        "is running. Training times measured now carry its noise (each record keeps kb.load_1m); "
        f"{advice} while the machine is otherwise idle."
    )


@dataclass
class BuildResult:
    """What one ``build_kb`` call did."""

    folder: Path
    planned: int
    done_before: int
    measured: int
    failed: int
    stopped_by: str  # "complete", "budget", "signal"
    machines: int = 1  # machines that measured into the folder (a build resumed elsewhere: 2+)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "folder": str(self.folder)}


def default_build_dir(suite: str) -> Path:
    from dltune._paths import cache_dir

    return cache_dir() / "kb" / suite


@contextlib.contextmanager
def _lock(folder: Path) -> Iterator[None]:
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise DltuneError(f"Another 'dltune kb build' is writing {str(folder)!r}.") from exc
        yield


@contextlib.contextmanager
def _stop_on_signals(flag: dict[str, bool]) -> Iterator[None]:
    """SIGTERM / SIGINT finish the run in progress, then stop (the folder stays consistent)."""

    def handler(signum, frame):  # noqa: ARG001
        flag["stop"] = True

    previous = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: no signal handling
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _library_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist in ("dltune", "numpy", "scikit-learn", "scipy", "torch", "tensorflow-cpu", "keras"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[dist] = md.version(dist)
    return out


def _write_provenance(folder: Path, data: dict[str, Any]) -> None:
    path = folder / "provenance.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    tmp.replace(path)


def _provenance(folder: Path, suite: str, frameworks: list[str], command: str,
                plan: list[PlannedRun], budget_s: float | None) -> dict[str, Any]:
    from dltune.hardware import Hardware

    path = folder / "provenance.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    hw = Hardware.detect()
    machine = {**hw.to_dict(), "fingerprint": hw.fingerprint, "target": hw.target}
    # A folder may be resumed on another machine: every machine that measured into it is kept
    # ("machines", first the one that started it), and each session names its own. Folders
    # written before held one "machine", which measured every session before this one.
    machines = list(old.get("machines") or ([old["machine"]] if old.get("machine") else []))
    sessions = [s if "machine" in s or not machines else {**s, "machine": machines[0]["fingerprint"]}
                for s in old.get("sessions", [])]
    if all(m.get("fingerprint") != hw.fingerprint for m in machines):
        machines.append(machine)
    return {
        "suite": suite,
        "frameworks": list(old.get("frameworks", [])) + [f for f in frameworks if f not in old.get("frameworks", [])],
        "machines": machines,
        "host_versions": _library_versions(),
        "sessions": sessions + [{"command": command, "started_at": now_iso(), "budget_s": budget_s,
                                 "machine": hw.fingerprint}],
        "workloads": _provenance_workloads(plan),
        "planned_runs": len(plan),
        "design": (
            "Per workload x framework: scrambled Sobol configurations over optimizer, learning "
            "rate (log range per optimizer), batch size 16..256, epochs 1..max_epochs and threads "
            "(1 thread pinned to 1 core = the 1-core hardware target, or all usable cores); the "
            "framework's default preset with epochs capped at the workload's max_epochs "
            "(published defaults run 11-350 epochs); the first configurations repeated with seed 1, "
            "and once more each in a new worker process (kind 'fresh': the peak memory a training "
            "process needs; a reused worker's is the high-water mark of all its runs; a backend "
            "whose process memory changed since measures them again: FRESH_REVISIONS); with "
            "all_cores (dltune kb calibrate on more than 2 usable cores) each space-filling "
            "configuration once more with every usable core (kind 'all-cores'). "
            "Runs are dealt in rounds, cheapest first, so a budget-limited build covers every pair."
        ),
        "notes": NOISE_NOTE,
        # Changes made to the records outside this command (e.g. runs removed to be measured
        # again), written by whoever made them; kept across sessions.
        "edits": old.get("edits", []),
    }


def _provenance_workloads(plan: list[PlannedRun]) -> list[dict[str, Any]]:
    return [w.to_dict() | {"name": w.name} for w in {p.workload.name: p.workload for p in plan}.values()]


def machine_plan(suite: str, frameworks: list[str], configs_per_pair: int, repeats: int, fresh: int,
                 all_cores: bool = False) -> list[PlannedRun]:
    """The plan :func:`build_kb` measures on this machine: runs of 1 thread and 2 (1 on a 1-core
    machine), and with ``all_cores`` each space-filling configuration with every usable core too
    (on more than 2; :func:`plan_suite`)."""
    from dltune.config import usable_cores

    cores = usable_cores()
    return plan_suite(suite, frameworks, configs_per_pair, repeats, min(2, cores), fresh=fresh,
                      all_cores=cores if all_cores else None)


@dataclass(frozen=True)
class BuildPlan:
    """What :func:`build_kb` measures, known after its checks and before it writes anything."""

    frameworks: list[str]
    folder: Path  # not made yet
    runs: list[PlannedRun]
    budget_s: float | None
    quiet_wait_s: float


def plan_build(
    suite: str = "reference",
    out: str | Path | None = None,
    frameworks: list[str] | None = None,
    time_budget_s: float | None = None,
    configs_per_pair: int = 24,
    repeats: int = 3,
    fresh: int = 3,
    quiet_wait_s: float = 0.0,
    all_cores: bool = False,
    models: list[str] | None = None,
) -> BuildPlan:
    """Every check :func:`build_kb` makes before its first run, and what it would then measure;
    writes nothing. ``build_kb`` calls it, and so does ``--plan``: a plan is printed only for
    arguments the build itself takes."""
    from dltune._bench import interpreter_for
    from dltune.backends._registry import BACKENDS

    check_choice("suite", suite, sorted(SUITES))
    if time_budget_s is not None:
        time_budget_s = check_float("time_budget_s", time_budget_s, 0.0, None, low_open=True)
    quiet_wait_s = check_float("quiet_wait_s", quiet_wait_s, 0.0, None)
    if frameworks is None:
        frameworks = []
        for name in ("torch", "tensorflow", "mxnet", "theano"):
            with contextlib.suppress(DltuneError):
                interpreter_for(name)
                frameworks.append(name)
        if not frameworks:
            raise ParameterError("No backend is available to measure; install torch or tensorflow.")
    else:
        if not frameworks:
            raise ParameterError("The 'frameworks' parameter must name at least one backend. Got none.")
        for name in frameworks:
            if name not in BACKENDS:
                raise ParameterError(
                    f"The 'frameworks' parameter must hold backends among {{{', '.join(BACKENDS)}}}. "
                    f"Got {name!r} instead."
                )
            interpreter_for(name)
    runs = machine_plan(suite, list(frameworks), configs_per_pair, repeats, fresh, all_cores)
    if models is not None:
        # The same runs (keys) as the whole suite's: a filtered build resumes and is resumed by it.
        known = list(dict.fromkeys(w.model for w in SUITES[suite]))
        if not models:
            raise ParameterError(f"The 'models' parameter must name at least one model of the {suite!r} suite. Got none.")
        models = [check_choice("models", m, known) for m in models]
        runs = [r for r in runs if r.workload.model in models]
    folder = check_out_dir("out", out if out is not None else default_build_dir(suite), make=False)
    return BuildPlan(list(frameworks), folder, runs, time_budget_s, quiet_wait_s)


def build_kb(
    suite: str = "reference",
    out: str | Path | None = None,
    frameworks: list[str] | None = None,
    time_budget_s: float | None = None,
    configs_per_pair: int = 24,
    repeats: int = 3,
    fresh: int = 3,
    progress: bool | Callable[[dict[str, Any]], None] = False,
    command: str | None = None,
    pool=None,
    quiet_wait_s: float = 0.0,
    all_cores: bool = False,
    models: list[str] | None = None,
    **renamed: Any,
) -> BuildResult:
    """Measure ``suite`` into ``out`` (append-only ``records.jsonl`` + ``provenance.json``).

    Already measured runs (same key) are skipped, so calling it again resumes. It stops starting
    runs when ``time_budget_s`` seconds of this call have passed, or after SIGTERM / SIGINT (the run in
    progress finishes and is stored).

    Args:
        frameworks: backends to measure; default: those available among torch, tensorflow,
            mxnet and theano.
        progress: True for progress on stderr (:class:`dltune._log.Progress`), or a callable
            given each stored entry.
        quiet_wait_s: before each run, wait up to this long for the rest of the machine to use
            at most :data:`QUIET_CPU_PCT` % of one core (``dltune kb build`` waits up to 300 s;
            0: only record the reading). Other work stalls the thread barriers of a run with
            as many threads as cores, far beyond its own share.
        all_cores: on a machine with more than 2 usable cores, also run each space-filling
            configuration with every usable core (``plan_suite``'s ``all_cores``).
        models: measure only the suite's workloads of these models (the rest stay planned).
    """
    import psutil

    from dltune._workload import Workload

    refuse_renamed("build_kb", renamed)
    planned = plan_build(suite, out, frameworks, time_budget_s, configs_per_pair, repeats, fresh,
                         quiet_wait_s, all_cores, models)
    frameworks, plan, budget_s = planned.frameworks, planned.runs, planned.budget_s
    quiet_wait_s = planned.quiet_wait_s
    folder = check_out_dir("out", planned.folder)
    command = command or " ".join(sys.argv)
    store = RecordStore(folder)
    stop = {"stop": False}
    with _lock(folder), _stop_on_signals(stop):
        done = store.done_keys()
        todo = [p for p in plan if p.key not in done]
        provenance = _provenance(folder, suite, frameworks, command, plan, budget_s)
        # A session that measures some of the folder's frameworks (--frameworks) or models
        # (--models) leaves the others' runs in the folder: the folder's plan covers them all.
        if provenance["frameworks"] != frameworks or models is not None:
            whole = machine_plan(suite, provenance["frameworks"], configs_per_pair, repeats, fresh, all_cores)
            provenance["planned_runs"] = len(whole)
            provenance["workloads"] = _provenance_workloads(whole)
        _write_provenance(folder, provenance)
        own_pool = pool is None
        if own_pool:
            from dltune.runtime import WorkerPool

            # Warm workers for every framework x thread setting, so nothing is imported twice.
            pool = WorkerPool(max_workers=len({(p.config.framework, p.config.threads) for p in plan}))
        bar = None
        if progress is True:
            bar = Progress(len(plan), f"kb {suite}", "run", initial=len(plan) - len(todo))
        workloads: dict[str, Workload] = {}
        measured = failed = 0
        stopped_by = "complete"
        started = time.monotonic()
        try:
            for run in todo:
                if stop["stop"]:
                    stopped_by = "signal"
                    break
                if budget_s is not None and time.monotonic() - started >= budget_s:
                    stopped_by = "budget"
                    break
                workload = workloads.get(run.workload.name)
                if workload is None:
                    workload = _load(run.workload)
                    workloads[run.workload.name] = workload
                # Steal time from before the CPU check (0.2 s at least): a run of a few
                # milliseconds alone can end before the OS has counted one clock tick.
                times_before = psutil.cpu_times()
                others, waited = wait_for_quiet(quiet_wait_s, stop=stop)
                load_1m = os.getloadavg()[0]
                if run.kind == "fresh":
                    from dltune.runtime import WorkerPool

                    with WorkerPool(max_workers=1) as fresh_pool:
                        record = _measure(workload, run, fresh_pool)
                else:
                    record = _measure(workload, run, pool)
                entry_kb = {"key": run.key, "suite": suite, "kind": run.kind, "round": run.round,
                            "repeat": run.repeat, "suite_workload": run.workload.name,
                            "load_1m": round(load_1m, 2), "others_cpu_pct": round(others, 1),
                            "waited_s": round(waited, 1)}
                steal = cpu_steal_pct(times_before, psutil.cpu_times())
                if steal is not None:
                    entry_kb["steal_pct"] = round(steal, 2)
                store.append(record, entry_kb)
                measured += 1
                failed += 0 if record.ok else 1
                if bar is not None:
                    bar.set_postfix_str(f"{run.config.framework} {run.workload.name}"[:60])
                    bar.update()
                elif callable(progress):
                    progress({**record.to_dict(), "kb": entry_kb})
        finally:
            if bar is not None:
                bar.close()
            if own_pool:
                pool.close()
            provenance["sessions"][-1].update(
                finished_at=now_iso(), measured=measured, failed=failed, stopped_by=stopped_by
            )
            entries = store.entries()
            provenance["records"] = len(entries)
            provenance["records_ok"] = sum(1 for e in entries if e.get("status") == "ok")
            provenance["framework_versions"] = sorted(
                {json.dumps(e.get("versions", {}), sort_keys=True) for e in entries if e.get("versions")}
            )
            provenance["measured_from"] = min((e["started_at"] for e in entries), default=None)
            provenance["measured_to"] = max((e["finished_at"] for e in entries), default=None)
            _write_provenance(folder, provenance)
    return BuildResult(folder, len(plan), len(plan) - len(todo), measured, failed, stopped_by,
                       len(provenance["machines"]))


def _load(spec: SuiteWorkload):
    from dltune._workload import Workload

    return Workload.from_name(spec.dataset, spec.model, **spec.params)


def _measure(workload, run: PlannedRun, pool):
    from dltune._bench import measure

    return measure(workload, run.config, pool=pool)
