"""Which backends can run here, with which interpreter, and the command that fixes each one.

Main-environment frameworks are found with :func:`importlib.util.find_spec` (never imported);
the legacy ones are judged from the legacy runtime's marker file, or, with ``deep=True``, by
importing them in its interpreter.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass

from dltune._errors import BackendUnavailableError
from dltune._log import logger
from dltune._validation import check_choice
from dltune.backends._registry import framework_label
from dltune.envs._legacy import LegacyRuntime, ProbeResult

__all__ = [
    "BACKEND_NAMES",
    "BackendStatus",
    "backend_status",
    "install_command",
    "runtime_interpreter",
    "status_command",
]

LEGACY_FIX = "dltune env install legacy"
_MAIN = {
    # backend: (module, distributions to ask for a version, fix)
    "torch": ("torch", ("torch",), "pip install 'dltune[torch]'"),
    "tensorflow": (
        "tensorflow",
        ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos"),
        "pip install 'dltune[tensorflow]'",
    ),
    "jax": ("jax", ("jax",), "pip install 'dltune[jax]'"),
    "pytensor": ("pytensor", ("pytensor",), "pip install 'dltune[pytensor]'"),
    # The framework-free reference backend: numpy alone.
    "numpy": ("numpy", ("numpy",), "pip install numpy"),
}
_LEGACY = ("mxnet", "theano")
#: Every backend name, main environment first.
BACKEND_NAMES: tuple[str, ...] = (*_MAIN, *_LEGACY)


@dataclass(frozen=True)
class BackendStatus:
    """Whether one backend can run, where, and how to make it run.

    Attributes:
        name: the backend name.
        available: its framework is installed where dltune runs it.
        interpreter: the Python its worker runs with (for the legacy runtime, where it would be).
        version: the framework's version, when installed.
        location: ``"main"`` (dltune's environment) or ``"legacy"`` (the legacy runtime).
        fix: the command that makes it available; None when it is.
        reason: why it is unavailable; None when it is available.
    """

    name: str
    available: bool
    interpreter: str
    version: str | None
    location: str
    fix: str | None
    reason: str | None

    def to_dict(self) -> dict[str, object]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def _version(distributions: tuple[str, ...], module: str) -> str | None:
    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    for dist in importlib.metadata.packages_distributions().get(module, ()):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _main_status(name: str) -> BackendStatus:
    module, distributions, fix = _MAIN[name]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        reason = f"{module} is not installed in {sys.executable}"
        return BackendStatus(name, False, sys.executable, None, "main", fix, reason)
    version = _version(distributions, module)
    return BackendStatus(name, True, sys.executable, version, "main", None, None)


def _legacy_status(name: str, runtime: LegacyRuntime, probe: ProbeResult | None) -> BackendStatus:
    problem = runtime.check()
    marker = runtime.marker() or {}
    version = (marker.get("versions") or {}).get(name)
    if problem is None and probe is not None:
        if name in probe.errors:
            problem = f"importing {name} in {runtime.python} failed: {probe.errors[name]}"
        elif not probe.ok and "python" in probe.errors:
            problem = f"the legacy runtime's interpreter failed: {probe.errors['python']}"
        version = probe.versions.get(name, version)
    if problem is not None:
        return BackendStatus(name, False, runtime.python, version, "legacy", LEGACY_FIX, problem)
    return BackendStatus(name, True, runtime.python, version, "legacy", None, None)


def backend_status(deep: bool = False, runtime: LegacyRuntime | None = None) -> list[BackendStatus]:
    """The status of every backend, in :data:`BACKEND_NAMES` order.

    Args:
        deep: also import MXNet and Theano in the legacy runtime (seconds) rather than
            trusting its marker file.
        runtime: the legacy runtime to judge (default: the default one).
    """
    runtime = runtime if runtime is not None else LegacyRuntime()
    probe = runtime.probe() if deep and runtime.check() is None else None
    statuses = [_main_status(name) for name in _MAIN]
    statuses += [_legacy_status(name, runtime, probe) for name in _LEGACY]
    return statuses


def status_command(
    json_output: bool, deep: bool = False, runtime: LegacyRuntime | None = None
) -> str:
    """What ``dltune env status [--json] [--deep]`` prints: a JSON list or an aligned table."""
    statuses = backend_status(deep=deep, runtime=runtime)
    if json_output:
        return json.dumps([s.to_dict() for s in statuses], indent=2)
    header = ("backend", "available", "version", "where", "interpreter")
    rows = [header] + [
        (framework_label(s.name), "yes" if s.available else "no",
         s.version or "-", s.location, s.interpreter)
        for s in statuses
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True))
        + "  "
        + row[-1]
        for row in rows
    ]
    missing = [s for s in statuses if not s.available]
    if missing:
        lines += ["", "To make the missing backends available:"]
        lines += [f"  {s.name}: {s.fix}    ({s.reason})" for s in missing]
    return "\n".join(lines)


def install_command(
    name: str, path: str | os.PathLike[str] | None = None, python: str | None = None
) -> str:
    """Run ``dltune env install NAME``: progress lines go to the ``dltune`` logger (INFO);
    returns the summary.

    Raises:
        ParameterError: ``name`` is not ``"legacy"``.
        DltuneError: the installation failed.
    """
    check_choice("name", name, ("legacy",))

    runtime = LegacyRuntime.install(path, python=python, progress=logger.info)
    versions = (runtime.marker() or {}).get("versions") or {}
    shown = ", ".join(f"{n} {versions.get(n)}" for n in ("numpy", "mxnet", "theano"))
    state = "installed" if runtime.actions else "already up to date"
    summary = f"legacy runtime {state} at {runtime.path}\n  python: {runtime.python}\n  {shown}"
    if runtime.path != LegacyRuntime().path:
        summary += f"\n  dltune uses it only with: export DLTUNE_LEGACY_ENV={runtime.path}"
    return summary


def runtime_interpreter(backend: str, runtime: LegacyRuntime | None = None) -> str:
    """The Python of the runtime ``backend`` runs in: dltune's own, or the legacy runtime
    (checked to be installed and up to date; whether the framework is installed is not).

    Raises:
        ParameterError: unknown backend name.
        BackendUnavailableError: a legacy backend whose runtime is missing or out of date.
    """
    check_choice("backend", backend, BACKEND_NAMES)
    if backend in _MAIN:
        return sys.executable
    runtime = runtime if runtime is not None else LegacyRuntime()
    problem = runtime.check()
    if problem is not None:
        raise BackendUnavailableError(
            f"Backend '{backend}' runs in the legacy runtime, but {problem}; run: {LEGACY_FIX}"
        )
    return runtime.python
