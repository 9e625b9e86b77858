"""The legacy runtime: a virtual environment dltune makes for MXNet 1.9.1 and Theano 1.0.5.

Those two need numpy < 1.24 and so cannot share dltune's main environment. The runtime is a
plain ``python -m venv`` with pinned packages, a ``.pth`` file that makes dltune's own worker
code importable without installing dltune's dependencies, and a marker file recording what was
installed. Nothing here imports a framework: the environment is inspected by running its
interpreter in a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltune._errors import DltuneError, ParameterError
from dltune._paths import cache_dir, user_cache_dir
from dltune._validation import check_out_dir
from dltune.envs._scripts import INSPECT, PROBE, parse_result

__all__ = ["LEGACY_PINS", "LegacyRuntime", "ProbeResult", "clean_environment"]

#: What the legacy runtime installs. numpy 1.23.5 is the last release with the aliases
#: (``np.bool``, ``np.int``...) MXNet and Theano use; scipy 1.11.4 is the last to support it.
LEGACY_PINS: tuple[str, ...] = (
    "numpy==1.23.5",
    "scipy==1.11.4",
    "mxnet==1.9.1",
    "theano==1.0.5",
    "psutil>=5.9",
    "threadpoolctl>=3.1",
)
#: Python versions with wheels for every pin (scipy 1.11 needs 3.9; numpy 1.23 stops at 3.11).
SUPPORTED_PYTHON = ((3, 9), (3, 11))
MARKER_NAME = "dltune-legacy.json"
PTH_NAME = "dltune-legacy.pth"
_MARKER_SCHEMA = 1
_PROBE_MODULES = ("numpy", "scipy", "psutil", "threadpoolctl", "mxnet", "theano")
# The folder holding the ``dltune`` package (this file is dltune/envs/_legacy.py).
_DLTUNE_PARENT = Path(__file__).resolve().parents[2]

Progress = Callable[[str], None]


def _pin_name(pin: str) -> str:
    return pin.split("==")[0].split(">=")[0].strip()


def _pin_version(pin: str) -> str | None:
    return pin.split("==", 1)[1].strip() if "==" in pin else None


def clean_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Our environment without what would leak the main environment's packages into a venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.pop("VIRTUAL_ENV", None)
    env.pop("__PYVENV_LAUNCHER__", None)
    env.update(extra or {})
    return env


_NOT_PYTHON = "The 'python' parameter must be a Python interpreter."


def _python_version(python: str) -> tuple[int, int, int]:
    """The version of interpreter ``python``, running it unless it is this one."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return tuple(sys.version_info[:3])  # type: ignore[return-value]
    code = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
    try:
        done = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_environment(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ParameterError(f"{_NOT_PYTHON} {python!r} could not be run: {exc}") from exc
    said = (done.stderr or done.stdout).strip().splitlines()
    if done.returncode != 0:
        raise ParameterError(
            f"{_NOT_PYTHON} {python!r} exited with status {done.returncode} when asked its version"
            + (f": {said[-1][-300:]}" if said else " and printed nothing") + "."
        )
    try:
        major, minor, micro = (int(p) for p in done.stdout.strip().split("."))
    except ValueError:
        raise ParameterError(
            f"{_NOT_PYTHON} {python!r} answered {done.stdout.strip()[-100:]!r} when asked its version."
        ) from None
    return major, minor, micro


def _check_supported(version: tuple[int, ...], python: str) -> None:
    low, high = SUPPORTED_PYTHON
    if not low <= tuple(version[:2]) <= high:
        shown = ".".join(str(v) for v in version)
        raise DltuneError(
            f"The legacy runtime needs Python {low[0]}.{low[1]} to {high[0]}.{high[1]} "
            f"(numpy 1.23.5, which MXNet 1.9.1 and Theano 1.0.5 need, has no wheels for newer "
            f"versions), but {python} is Python {shown}. Install Python 3.11 and run: "
            f"dltune env install legacy --python /path/to/python3.11"
        )


def _supported_version(python: str) -> tuple[int, int, int]:
    """The version of interpreter ``python``, if the legacy runtime can be made with it."""
    version = _python_version(python)
    _check_supported(version, python)
    return version


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` so that concurrent installs take turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no flock; concurrent installs are the user's problem
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class ProbeResult:
    """What importing the legacy frameworks in the runtime's interpreter gave.

    Attributes:
        ok: every module imported.
        versions: module name (and ``python``) to version, for those that imported.
        errors: module name to the one-line error, for those that did not.
        details: Theano's compiler, BLAS flags and compile folder.
    """

    ok: bool
    versions: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)


@dataclass
class _EnvState:
    version: str
    purelib: Path
    packages: dict[str, dict[str, Any]]

    def broken(self) -> list[str]:
        """The pins that are missing, damaged or at another version."""
        bad = []
        for pin in LEGACY_PINS:
            info = self.packages.get(_pin_name(pin), {})
            wanted = _pin_version(pin)
            if (
                not info.get("importable")
                or info.get("missing_files")
                or (wanted is not None and info.get("version") != wanted)
            ):
                bad.append(pin)
        return bad


def _default_path() -> Path:
    env = os.environ.get("DLTUNE_LEGACY_ENV")
    if env:
        return Path(env).expanduser()
    own = cache_dir() / "legacy"
    shared = user_cache_dir() / "legacy"
    if own != shared and not (own / MARKER_NAME).exists() and (shared / MARKER_NAME).exists():
        return shared
    return own


class LegacyRuntime:
    """The legacy virtual environment at ``path``.

    ``path`` defaults to ``$DLTUNE_LEGACY_ENV``, else ``cache_dir()/legacy``; when
    ``$DLTUNE_CACHE`` names a cache without a runtime of its own and the user cache
    (``~/.cache/dltune/legacy``) has one, that one: the runtime is a per-machine install, and
    an isolated cache (the tests', a benchmark's) should not hide it. Creating
    the object touches nothing; :meth:`install` makes or repairs the environment (installs in
    the same folder take turns through a lock file), :meth:`probe` imports the frameworks in it.

    Attributes:
        actions: what the last :meth:`install` did (``"venv"``, ``"pip"``, ``"pth"``,
            ``"blas"``, ``"marker"``); empty when everything was already in place.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            path = _default_path()
        self.path = Path(path).expanduser().absolute()
        self.actions: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"LegacyRuntime({str(self.path)!r})"

    @property
    def python(self) -> str:
        """The environment's interpreter (it may not exist yet)."""
        if os.name == "nt":
            return str(self.path / "Scripts" / "python.exe")
        return str(self.path / "bin" / "python")

    @property
    def marker_path(self) -> Path:
        """The file recording the pins, Python version and versions installed."""
        return self.path / MARKER_NAME

    @property
    def blas_dir(self) -> Path | None:
        """The folder holding a ``libopenblas.so`` Theano can link against, if installed."""
        folder = self.path / "dltune-blas"
        return folder if (folder / "libopenblas.so").exists() else None

    def marker(self) -> dict[str, Any] | None:
        """The marker's contents, or None when it is missing or unreadable."""
        try:
            data = json.loads(self.marker_path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def check(self) -> str | None:
        """Why the runtime is not usable, judged from files only; None when it looks ready."""
        marker = self.marker()
        if marker is None:
            return f"the legacy runtime is not installed at {self.path}"
        if not os.path.exists(self.python):
            return f"the legacy runtime at {self.path} has no interpreter {self.python}"
        if marker.get("pins") != list(LEGACY_PINS):
            return f"the legacy runtime at {self.path} was made for other package versions"
        return None

    @classmethod
    def install(
        cls,
        path: str | os.PathLike[str] | None = None,
        python: str | None = None,
        progress: Progress | None = None,
    ) -> LegacyRuntime:
        """Make, update or repair the legacy runtime; return it.

        Quick when everything is in place (one ~50 ms subprocess, nothing reinstalled).
        A missing interpreter recreates the environment; missing, damaged or other-version
        packages, or a stale marker, run pip again.

        Args:
            path: the environment's folder (default: see :class:`LegacyRuntime`).
            python: the interpreter to make it with (default: this one); must be 3.9-3.11.
            progress: called with one line per step (and pip's output).

        Raises:
            ParameterError: ``path`` is a file or a folder that cannot be written.
            DltuneError: unsupported or broken interpreter, a folder that is not a virtual
                environment, or pip failing (with the end of its output).
        """
        runtime = cls(path)
        # The folder and a given interpreter are checked before the lock file is made beside the
        # folder: a wrong one leaves nothing.
        check_out_dir("path", runtime.path, make=False)
        version = _supported_version(python) if python is not None else None
        with _locked(runtime.path.with_name(runtime.path.name + ".lock")):
            runtime.actions = tuple(runtime._install(python, progress or (lambda line: None), version))
        return runtime

    def _install(self, python: str | None, say: Progress,
                 version: tuple[int, int, int] | None = None) -> list[str]:
        actions: list[str] = []
        state = self._inspect()
        if python is not None or state is None:
            target = python or sys.executable
            version = version or _supported_version(target)
            if state is None or state.version.split(".")[:2] != [str(v) for v in version[:2]]:
                self._create_venv(target, version, say)
                actions.append("venv")
                state = self._inspect()
                if state is None:
                    raise DltuneError(f"The virtual environment at {self.path} does not run.")
        _check_supported(tuple(int(v) for v in state.version.split(".")), self.python)
        marker = self.marker()
        stale = (
            marker is None
            or marker.get("schema") != _MARKER_SCHEMA
            or marker.get("pins") != list(LEGACY_PINS)
            or marker.get("python") != state.version
        )
        if stale or state.broken():
            self._pip_install(state, say)
            actions.append("pip")
            state = self._inspect()
            if state is None or state.broken():
                left = state.broken() if state else list(LEGACY_PINS)
                raise DltuneError(f"pip ran but these are still not installed: {', '.join(left)}")
        if self._write_pth(state.purelib):
            actions.append("pth")
        if self._link_blas(state.purelib):
            actions.append("blas")
        if actions:
            self._write_marker(state)
            actions.append("marker")
            say(f"legacy runtime ready at {self.path}")
        return actions

    def _inspect(self) -> _EnvState | None:
        """The interpreter's version, site-packages and pins' state; None if it does not run."""
        if not os.path.exists(self.python):
            return None
        names = [_pin_name(p) for p in LEGACY_PINS]
        try:
            done = subprocess.run(
                [self.python, "-c", INSPECT, *names],
                capture_output=True,
                text=True,
                timeout=120,
                env=clean_environment(),
            )
            data = parse_result(done.stdout, "inspection")
        except (OSError, subprocess.TimeoutExpired, DltuneError, ValueError):
            return None
        return _EnvState(data["version"], Path(data["purelib"]), data["packages"])

    def _create_venv(self, python: str, version: tuple[int, int, int], say: Progress) -> None:
        if self.path.exists() and any(self.path.iterdir()):
            if not (self.path / "pyvenv.cfg").exists() and not self.marker_path.exists():
                raise DltuneError(
                    f"{self.path} exists and is not a virtual environment; refusing to clear "
                    f"it. Choose another folder with --path or set DLTUNE_LEGACY_ENV."
                )
        shown = ".".join(str(v) for v in version)
        say(f"creating virtual environment at {self.path} with {python} (Python {shown})")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.marker_path.unlink(missing_ok=True)
        done = subprocess.run(
            [python, "-m", "venv", "--clear", str(self.path)],
            capture_output=True,
            text=True,
            env=clean_environment(),
        )
        if done.returncode != 0:
            raise DltuneError(
                f"'{python} -m venv {self.path}' failed: {(done.stderr or done.stdout).strip()[-500:]}"
            )

    def _pip_install(self, state: _EnvState, say: Progress) -> None:
        base = [self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        base += ["--progress-bar", "off"]
        # pip calls a package whose files were deleted "already satisfied": reinstall those.
        present = [p for p in state.broken() if state.packages[_pin_name(p)].get("version")]
        if present:
            say(f"reinstalling damaged packages: {' '.join(present)}")
            self._run_pip([*base, "--force-reinstall", "--no-deps", *present], say)
        say(f"installing {' '.join(LEGACY_PINS)} (about a minute the first time)")
        self._run_pip([*base, *LEGACY_PINS], say)

    def _run_pip(self, command: list[str], say: Progress) -> None:
        tail: list[str] = []
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=clean_environment({"PIP_DISABLE_PIP_VERSION_CHECK": "1"}),
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                if line:
                    say(f"  {line}")
                    tail = [*tail[-19:], line]
        if proc.returncode != 0:
            raise DltuneError(
                f"pip install failed (exit status {proc.returncode}) in {self.path}:\n"
                + "\n".join(tail)
            )

    def _pth_entry(self) -> Path:
        """The folder to put on the runtime's path so that exactly ``dltune`` is importable."""
        if _DLTUNE_PARENT.name not in ("site-packages", "dist-packages"):
            return _DLTUNE_PARENT
        # dltune is installed among the main environment's packages: adding that whole folder
        # would shadow the runtime's numpy 1.23 with numpy 2, so link dltune alone instead.
        shim = self.path / "dltune-src"
        shim.mkdir(parents=True, exist_ok=True)
        link = shim / "dltune"
        target = _DLTUNE_PARENT / "dltune"
        if not (link.is_symlink() and os.readlink(link) == str(target)):
            link.unlink(missing_ok=True)
            link.symlink_to(target, target_is_directory=True)
        return shim

    def _write_pth(self, purelib: Path) -> bool:
        """Write the ``.pth`` file if it is missing or stale; return whether it was written."""
        pth = purelib / PTH_NAME
        content = f"{self._pth_entry()}\n"
        if pth.exists() and pth.read_text() == content:
            return False
        pth.write_text(content)
        return True

    def _link_blas(self, purelib: Path) -> bool:
        """Link an LP64 OpenBLAS for Theano as ``dltune-blas/libopenblas.so``; return if changed.

        numpy's wheel bundles an ILP64 OpenBLAS (symbols ``dgemm_64_``) that Theano's C code
        cannot link; scipy's wheel bundles a plain one, and MXNet's wheel another.
        """
        candidates = sorted((purelib / "scipy.libs").glob("libopenblas*.so*"))
        candidates = [c for c in candidates if "64_" not in c.name]
        candidates += sorted((purelib / "mxnet").glob("libopenblas.so*"))
        link = self.path / "dltune-blas" / "libopenblas.so"
        if not candidates:
            if link.is_symlink():
                link.unlink()
                return True
            return False
        target = str(candidates[0])
        if link.is_symlink() and os.readlink(link) == target:
            return False
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        return True

    def _write_marker(self, state: _EnvState) -> None:
        blas = self.path / "dltune-blas" / "libopenblas.so"
        data = {
            "schema": _MARKER_SCHEMA,
            "pins": list(LEGACY_PINS),
            "python": state.version,
            "versions": {name: info["version"] for name, info in state.packages.items()},
            "dltune_path": str(self._pth_entry()),
            "blas_library": os.readlink(blas) if blas.is_symlink() else None,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        tmp = self.marker_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, self.marker_path)

    def probe(self, timeout: float = 300.0) -> ProbeResult:
        """Import numpy, scipy, MXNet and Theano in the runtime's interpreter.

        Theano gets :func:`~dltune.envs.theano_flags` (its import fails without BLAS flags);
        its first import compiles a few C modules into the compile cache, which takes seconds.
        """
        from dltune.envs._flags import theano_flags

        if not os.path.exists(self.python):
            return ProbeResult(False, errors={"python": f"no interpreter at {self.python}"})
        env = clean_environment({"THEANO_FLAGS": theano_flags(runtime=self)})
        try:
            done = subprocess.run(
                [self.python, "-c", PROBE, *_PROBE_MODULES],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
            )
            data = parse_result(done.stdout, "probe")
        except subprocess.TimeoutExpired:
            return ProbeResult(False, errors={"python": f"probe timed out after {timeout:g} s"})
        except (OSError, DltuneError, ValueError) as exc:
            return ProbeResult(False, errors={"python": str(exc)})
        return ProbeResult(not data["errors"], data["versions"], data["errors"], data["details"])
