"""Parameter checks whose messages name the parameter, the allowed values and the value given.

Messages follow scikit-learn's form:
``The 'batch_size' parameter must be an int in [1, 65536]. Got 0 instead.``
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError

__all__ = ["as_list_of", "check_bool", "check_choice", "check_float", "check_in_file", "check_int",
           "check_out_dir", "check_out_file", "make_folder"]


def _fmt_range(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    return f"{left}{lo}, {hi}{right}"


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[low, high]``; raise otherwise."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok and isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if ok and (low is None or value >= low) and (high is None or value <= high):
        return int(value)
    raise ParameterError(
        f"The '{name}' parameter must be an int in {_fmt_range(low, high, False, False)}. "
        f"Got {value!r} instead."
    )


def check_float(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float if it is a finite number in the given interval; raise otherwise."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        v = float(value)
        if low is not None and (v < low or (low_open and v == low)):
            ok = False
        if high is not None and (v > high or (high_open and v == high)):
            ok = False
    if ok:
        return float(value)
    raise ParameterError(
        f"The '{name}' parameter must be a float in "
        f"{_fmt_range(low, high, low_open, high_open)}. Got {value!r} instead."
    )


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``allowed``; raise naming the allowed set otherwise."""
    allowed = list(allowed)
    if value in allowed:
        return value
    shown = ", ".join(repr(a) for a in allowed)
    raise ParameterError(f"The '{name}' parameter must be one of {{{shown}}}. Got {value!r} instead.")


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` if it is a bool; raise otherwise."""
    if isinstance(value, bool):
        return value
    raise ParameterError(f"The '{name}' parameter must be a bool. Got {value!r} instead.")


def _unwritable(folder: Path, target: Path | None = None) -> str | None:
    """Why nothing can be written in ``folder`` (or to the existing file ``target`` in it), or
    None. A probe file is made and removed there, for ``os.access`` says yes to root even on
    /proc; an existing target must be a regular file that opens for appending (/dev/full fails
    only once written)."""
    if target is not None and target.exists() and not target.is_file():
        return "not a regular file"
    try:
        if target is not None and target.exists():
            target.open("ab").close()
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dltune-probe-") as probe:
            probe.write(b"\0")
            probe.flush()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def check_out_file(name: str, value: Any) -> Path:
    """Return ``value`` as a path a file can be written to (:func:`_unwritable`): not a folder,
    its folder made if missing. Checked before the work whose results it is to hold."""
    path = Path(str(value)).expanduser()
    if path.is_dir():
        raise ParameterError(f"The '{name}' parameter must be a file path. Got the folder {str(value)!r} instead.")
    make_folder(path.parent, f"The '{name}' parameter must be a file path whose folder can be made. "
                              f"Got {str(value)!r}")
    why = _unwritable(path.parent, path)
    if why is not None:
        raise ParameterError(f"The '{name}' parameter must be a writable file path. Got {str(value)!r} "
                             f"instead ({why}).")
    return path


def check_in_file(name: str, value: Any) -> Path:
    """Return ``value`` as the path of a file that exists (not a folder); raise otherwise."""
    path = Path(str(value)).expanduser()
    if not path.exists():
        raise ParameterError(f"The '{name}' file {str(value)!r} does not exist.")
    if path.is_dir():
        raise ParameterError(f"The '{name}' parameter must be a file. Got the folder {str(value)!r} instead.")
    return path


def check_out_dir(name: str, value: Any, make: bool = True) -> Path:
    """Return ``value`` as a writable folder that exists (made if missing; with ``make`` False,
    left missing if it could be made: a dry run writes nothing). Checked before the work whose
    results it is to hold."""
    path = Path(str(value)).expanduser()
    if path.exists() and not path.is_dir():
        raise ParameterError(f"The '{name}' parameter must be a folder. Got the file {str(value)!r} instead.")
    cannot = f"The '{name}' parameter must be a folder that can be made. Got {str(value)!r}"
    nearest = path
    if make:
        make_folder(path, cannot)
    else:
        nearest = next(p for p in (path, *path.parents) if p.exists())
        if not nearest.is_dir():
            raise ParameterError(f"{cannot}: {str(nearest)!r} is a file.")
    why = _unwritable(nearest)
    if why is not None:
        raise ParameterError(f"The '{name}' parameter must be a writable folder. Got {str(value)!r} "
                             f"instead ({why}).")
    return path


def make_folder(folder: Path, message: str) -> None:
    """Make ``folder`` and its parents; a ``ParameterError`` of ``message`` and why if it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocking = next((p for p in (folder, *folder.parents) if p.exists()), None)
        why = (f"{str(blocking)!r} is a file" if blocking is not None and not blocking.is_dir()
               else exc.strerror or str(exc))
        raise ParameterError(f"{message}: {why}.") from None


def as_list_of(name: str, value: Any, cls: type, from_dict: Callable[[dict[str, Any]], Any]) -> list[Any]:
    """``value`` as a list of ``cls``: one, a dict of its fields (made by ``from_dict``), or an
    iterable of either; anything else raises a ``ParameterError`` naming ``name``."""
    if isinstance(value, (cls, dict)):
        value = [value]
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ParameterError(
            f"The '{name}' parameter must be a {cls.__name__}, a dict of its fields or a list of "
            f"them. Got {type(value).__name__} instead."
        )
    out = []
    for item in value:
        if isinstance(item, dict):
            item = from_dict(item)
        if not isinstance(item, cls):
            raise ParameterError(
                f"The '{name}' parameter must hold {cls.__name__} objects or dicts of their fields. "
                f"Got {type(item).__name__} instead."
            )
        out.append(item)
    return out
