"""The search space: which training and thread settings a study may try, and in which ranges.

A :class:`SearchSpace` maps dimension names to :class:`Dimension` objects. Each dimension is
either fixed (one value, never sampled), a range (``low``..``high``, optionally on a log scale)
or a set of choices. Spaces are immutable: :meth:`SearchSpace.fix`, :meth:`SearchSpace.narrow`
and :meth:`SearchSpace.widen` return new spaces. The same specification reads from Python,
YAML or JSON::

    learning_rate: {low: 0.001, high: 0.3, log: true}
    batch_size: [16, 32, 64]     # choices
    epochs: 3                    # fixed
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune.config import OPTIMIZERS, ThreadConfig, TrainConfig, usable_cores
from dltune.config._train_config import LR_SCHEDULES

__all__ = ["Dimension", "SearchSpace", "STARTUP_KNOBS", "THREADS_CHANGE_ACCURACY"]


@dataclass(frozen=True)
class _Kind:
    """What a dimension's values may be: type, hard bounds, allowed choices, where it goes."""

    type: str  # "float" | "int" | "str"
    low: float | None = None
    high: float | None = None
    high_open: bool = False
    allowed: tuple[Any, ...] = ()
    target: str = "config"  # "config", "threads" or "env:<VARIABLE>"
    frameworks: tuple[str, ...] = ()  # start-up knobs: the frameworks that read them
    # Start-up knobs: values the thread phase does not time (the default already timed covers
    # the variable left unset).
    untimed: tuple[Any, ...] = ()


_CORES = -1  # placeholder: the hardware target's usable cores

_KINDS: dict[str, _Kind] = {
    "learning_rate": _Kind("float", 0.0, 10.0),
    "batch_size": _Kind("int", 1, 65536),
    "epochs": _Kind("int", 1, 10000),
    "optimizer": _Kind("str", allowed=OPTIMIZERS),
    "momentum": _Kind("float", 0.0, 1.0, high_open=True),
    "weight_decay": _Kind("float", 0.0, 1.0),
    "lr_schedule": _Kind("str", allowed=LR_SCHEDULES),
    "intra_op_threads": _Kind("int", 1, _CORES, target="threads"),
    "inter_op_threads": _Kind("int", 1, _CORES, target="threads"),
    "blas_threads": _Kind("int", 1, _CORES, target="threads"),
    # Start-up knobs: environment variables a framework reads once, when it is imported.
    # TF enables oneDNN on x86 Linux by default (1 behaves as unset). libgomp left unset spins a
    # while, then sleeps; passive sleeps at once, which only slows training's short parallel regions.
    "tf_onednn_opts": _Kind("int", allowed=(0, 1), target="env:TF_ENABLE_ONEDNN_OPTS",
                            frameworks=("tensorflow",), untimed=(1,)),
    "omp_wait_policy": _Kind("str", allowed=("passive", "active"), target="env:OMP_WAIT_POLICY",
                             frameworks=("torch",), untimed=("passive",)),
}

#: Per-framework start-up knobs that the default space adds (dimension name -> frameworks).
STARTUP_KNOBS = {name: kind.frameworks for name, kind in _KINDS.items() if kind.frameworks}

#: Backends whose accuracy depends on the thread setting beyond float drift (same seed, other
#: threads: benchmarks/thread_phase.py measures it): the factorized search keeps their threads
#: in the hyper-parameter phase. None does on the backends measured so far.
THREADS_CHANGE_ACCURACY: frozenset[str] = frozenset()

_THREAD_FIELDS = {"intra_op_threads": "intra_op", "inter_op_threads": "inter_op",
                  "blas_threads": "blas"}


@dataclass(frozen=True)
class Dimension:
    """One searchable setting.

    Exactly one form applies: ``value`` (fixed), ``choices`` (categorical) or ``low``/``high``
    (a range, sampled on a log scale when ``log``). In specs, a list gives choices, a mapping
    ``{low, high, log}`` a range, a scalar a fixed value; in :meth:`SearchSpace.narrow`,
    :meth:`~SearchSpace.widen` and :meth:`~SearchSpace.update`, a tuple ``(low, high)``
    re-bounds an existing range and keeps its scale.
    """

    name: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    value: Any = None

    @property
    def fixed(self) -> bool:
        return self.choices is None and self.low is None

    @property
    def is_range(self) -> bool:
        return self.low is not None

    def to_spec(self) -> Any:
        """The file form: a scalar, a list, or ``{low, high, log}``."""
        if self.is_range:
            return {"low": self.low, "high": self.high, "log": self.log}
        if self.choices is not None:
            return list(self.choices)
        return self.value

    def values_within(self, other: Dimension) -> bool:
        """Whether every value this dimension can take, ``other`` can take too."""
        if other.is_range:
            if self.is_range:
                return other.low <= self.low and self.high <= other.high
            values = self.choices if self.choices is not None else (self.value,)
            return all(other.low <= v <= other.high for v in values)
        pool = other.choices if other.choices is not None else (other.value,)
        if self.is_range:
            return False
        values = self.choices if self.choices is not None else (self.value,)
        return all(v in pool for v in values)

    def suggest(self, trial: Any) -> Any:
        """Draw this dimension's value from an Optuna trial (fixed ones are not drawn)."""
        if self.fixed:
            return self.value
        if self.choices is not None:
            return trial.suggest_categorical(self.name, list(self.choices))
        if _KINDS[self.name].type == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, float(self.low), float(self.high), log=self.log)


def _check_value(name: str, value: Any, cores: int) -> Any:
    kind = _KINDS[name]
    if kind.allowed:
        if kind.type == "str" and isinstance(value, str):
            value = value.lower()
        if value not in kind.allowed or isinstance(value, bool):
            shown = ", ".join(repr(a) for a in kind.allowed)
            raise ParameterError(
                f"The '{name}' dimension must take values in {{{shown}}}. Got {value!r} instead."
            )
        return value
    high = cores if kind.high == _CORES else kind.high
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind.type == "int" and number and float(value).is_integer():
        value = int(value)
    ok = number and math.isfinite(value) and (kind.type == "float" or isinstance(value, int))
    if ok:
        low_ok = value > kind.low if name == "learning_rate" else value >= kind.low
        high_ok = value < high if kind.high_open else value <= high
        ok = low_ok and high_ok
    if not ok:
        left = "(" if name == "learning_rate" else "["
        right = ")" if kind.high_open else "]"
        raise ParameterError(
            f"The '{name}' dimension must take {kind.type} values in {left}{kind.low}, {high}{right}. "
            f"Got {value!r} instead."
        )
    return float(value) if kind.type == "float" else value


def _dimension(name: str, spec: Any, cores: int) -> Dimension:
    """Parse and validate one dimension from its spec (scalar, list, dict or Dimension)."""
    if name not in _KINDS:
        raise ParameterError(
            f"Unknown search-space dimension {name!r}. Known dimensions: {', '.join(_KINDS)}."
        )
    if isinstance(spec, Dimension):
        spec = spec.to_spec()
    kind = _KINDS[name]
    if isinstance(spec, Mapping):
        keys = set(spec)
        if keys <= {"value"} and keys:
            return Dimension(name, value=_check_value(name, spec["value"], cores))
        if keys <= {"choices"} and keys:
            spec = list(spec["choices"])
        elif {"low", "high"} <= keys and keys <= {"low", "high", "log"}:
            if kind.allowed:
                raise ParameterError(
                    f"The '{name}' dimension takes choices, not a range. Got {dict(spec)!r} instead."
                )
            low = _check_value(name, spec["low"], cores)
            high = _check_value(name, spec["high"], cores)
            log = spec.get("log", False)
            if not isinstance(log, bool):
                raise ParameterError(f"The '{name}.log' setting must be a bool. Got {log!r} instead.")
            if low > high:
                raise ParameterError(
                    f"The '{name}' dimension must have low <= high. Got low={low!r}, high={high!r}."
                )
            if log and low <= 0:
                raise ParameterError(
                    f"The '{name}' dimension is on a log scale, so low must be > 0. Got {low!r}."
                )
            if low == high:
                return Dimension(name, value=low)
            return Dimension(name, low=low, high=high, log=log)
        else:
            raise ParameterError(
                f"The '{name}' dimension must be a value, a list of choices, or a mapping with "
                f"'low' and 'high' (and optionally 'log'). Got {dict(spec)!r} instead."
            )
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ParameterError(f"The '{name}' dimension must list at least one choice. Got [].")
        choices = tuple(dict.fromkeys(_check_value(name, v, cores) for v in spec))
        if len(choices) == 1:
            return Dimension(name, value=choices[0])
        return Dimension(name, choices=choices)
    return Dimension(name, value=_check_value(name, spec, cores))


def _pow2_between(low: int, high: int) -> list[int]:
    return [2**k for k in range(int(math.log2(low)), int(math.log2(high)) + 1) if low <= 2**k <= high]


class SearchSpace:
    """The settings a study searches, with their ranges.

    Args:
        dimensions: name -> spec (a value, a list of choices, ``{low, high, log}`` or a
            :class:`Dimension`). Names not given keep their defaults when ``defaults`` is True.
        cores: the hardware target's usable cores (upper bound of the thread dimensions);
            this machine's by default.
        defaults: start from :meth:`default_dimensions` (True) or from nothing but fixed
            values (False: every dimension not given is left at TrainConfig's default).
    """

    def __init__(
        self,
        dimensions: Mapping[str, Any] | None = None,
        *,
        cores: int | None = None,
        defaults: bool = True,
    ) -> None:
        self.cores = int(cores) if cores is not None else usable_cores()
        if self.cores < 1:
            raise ParameterError(f"The 'cores' parameter must be an int >= 1. Got {cores!r} instead.")
        specs: dict[str, Any] = self.default_dimensions(self.cores) if defaults else {}
        specs.update(dict(dimensions or {}))
        self.dimensions: dict[str, Dimension] = {
            name: _dimension(name, spec, self.cores) for name, spec in specs.items()
        }

    @staticmethod
    def default_dimensions(cores: int) -> dict[str, Any]:
        """The default ranges: wide enough for the study's findings, cheap enough to search."""
        threads = {"low": 1, "high": cores} if cores > 1 else 1
        return {
            "learning_rate": {"low": 1e-4, "high": 0.3, "log": True},
            "batch_size": _pow2_between(16, 256),
            "epochs": {"low": 1, "high": 20},
            "optimizer": list(OPTIMIZERS),
            "momentum": {"low": 0.5, "high": 0.99},
            "weight_decay": {"low": 1e-6, "high": 1e-3, "log": True},
            "lr_schedule": "constant",
            "intra_op_threads": threads,
            "inter_op_threads": threads,
            "blas_threads": threads,
            "tf_onednn_opts": [0, 1],
            "omp_wait_policy": ["passive", "active"],
        }

    # -- changing a space ---------------------------------------------------------------------

    def _with(self, changes: Mapping[str, Any]) -> SearchSpace:
        specs = {name: dim.to_spec() for name, dim in self.dimensions.items()}
        for name, spec in changes.items():
            current = self.dimensions.get(name)
            if isinstance(spec, tuple) and len(spec) == 2 and current is not None and current.is_range:
                # (low, high) re-bounds an existing range and keeps its scale
                spec = {"low": spec[0], "high": spec[1], "log": current.log}
            specs[name] = spec
        return SearchSpace(specs, cores=self.cores, defaults=False)

    def fix(self, **values: Any) -> SearchSpace:
        """A copy with these dimensions fixed to one value each."""
        return self._with({name: {"value": value} for name, value in values.items()})

    def update(self, **specs: Any) -> SearchSpace:
        """A copy with these dimensions replaced by new specs (any form)."""
        return self._with(specs)

    def narrow(self, **specs: Any) -> SearchSpace:
        """A copy whose given dimensions are subsets of the current ones; raises otherwise."""
        return self._change(specs, narrower=True)

    def widen(self, **specs: Any) -> SearchSpace:
        """A copy whose given dimensions contain the current ones; raises otherwise."""
        return self._change(specs, narrower=False)

    def _change(self, specs: Mapping[str, Any], narrower: bool) -> SearchSpace:
        new = self._with(specs)
        for name in specs:
            before, after = self.dimensions.get(name), new.dimensions[name]
            if before is None:
                continue
            inside = after.values_within(before) if narrower else before.values_within(after)
            if not inside:
                verb, rel = ("narrow", "within") if narrower else ("widen", "containing")
                raise ParameterError(
                    f"Cannot {verb} '{name}' to {after.to_spec()!r}: it must be {rel} the "
                    f"current {before.to_spec()!r}. Use update() to replace it."
                )
        return new

    def split(self) -> tuple[SearchSpace, SearchSpace]:
        """``(hyper-parameter space, execution space)`` for the factorized search.

        The execution space holds the thread and start-up dimensions that vary: they change how
        fast a run trains, not what it learns. The hyper-parameter space holds everything else
        and the execution dimensions fixed to one value; the ones left out run at the base
        configuration's threads (the framework's own default on the hardware target).
        """
        hyper, execution = {}, {}
        for name, dim in self.dimensions.items():
            side = execution if _KINDS[name].target != "config" and not dim.fixed else hyper
            side[name] = dim.to_spec()
        return (SearchSpace(hyper, cores=self.cores, defaults=False),
                SearchSpace(execution, cores=self.cores, defaults=False))

    def knob_alternatives(self, name: str) -> list[Any]:
        """A start-up knob's choices the thread phase times (not its ``untimed`` ones)."""
        dim = self.dimensions[name]
        values = dim.choices if dim.choices is not None else (dim.value,)
        return [v for v in values if v not in _KINDS[name].untimed]

    def without_knobs(self, framework: str) -> SearchSpace:
        """This space less the start-up knobs ``framework`` does not read (``torch+tensorflow``:
        none of them reads)."""
        names = set(framework.split("+"))
        keep = {n: d.to_spec() for n, d in self.dimensions.items()
                if not _KINDS[n].frameworks or names & set(_KINDS[n].frameworks)}
        return SearchSpace(keep, cores=self.cores, defaults=False)

    # -- files ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {name: dim.to_spec() for name, dim in self.dimensions.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, cores: int | None = None,
                  defaults: bool = True) -> SearchSpace:
        """A space from a mapping; a ``defaults: false`` entry starts from nothing."""
        data = dict(data)
        if "defaults" in data:
            defaults = data.pop("defaults")
            if not isinstance(defaults, bool):
                raise ParameterError(f"The 'defaults' entry must be a bool. Got {defaults!r} instead.")
        return cls(data, cores=cores, defaults=defaults)

    @classmethod
    def from_file(cls, path: str | Path, *, cores: int | None = None) -> SearchSpace:
        """Read a YAML (``.yaml``/``.yml``) or JSON file; other dimensions keep their defaults."""
        path = Path(path)
        if not path.is_file():
            raise ParameterError(f"The search-space file {str(path)!r} does not exist.")
        text = path.read_text()
        try:
            if path.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text) or {}
            else:
                data = json.loads(text)
        except Exception as exc:  # both parsers' errors: report them in one form
            raise ParameterError(f"Cannot parse search-space file {str(path)!r}: {exc}") from None
        if not isinstance(data, Mapping):
            raise ParameterError(
                f"The search-space file {str(path)!r} must hold a mapping of dimension names. "
                f"Got {type(data).__name__} instead."
            )
        return cls.from_dict(data, cores=cores)

    def save(self, path: str | Path) -> Path:
        """Write this space as YAML or JSON (by suffix)."""
        path = Path(path)
        if path.suffix in (".yaml", ".yml"):
            import yaml

            path.write_text(yaml.safe_dump({"defaults": False, **self.to_dict()}, sort_keys=False))
        else:
            path.write_text(json.dumps({"defaults": False, **self.to_dict()}, indent=1))
        return path

    # -- sampling -------------------------------------------------------------------------------

    def sample(self, trial: Any) -> dict[str, Any]:
        """Draw every dimension from an Optuna trial; momentum only when it matters."""
        values: dict[str, Any] = {}
        for name, dim in self.dimensions.items():
            if name == "momentum" and values.get("optimizer", "momentum") != "momentum":
                continue
            values[name] = dim.suggest(trial)
        return values

    def to_config(self, values: Mapping[str, Any], base: TrainConfig) -> tuple[TrainConfig, dict[str, str]]:
        """The run configuration and the start-up environment for sampled ``values``."""
        fields: dict[str, Any] = {}
        threads = base.threads.to_dict()
        env: dict[str, str] = {}
        for name, value in values.items():
            target = _KINDS[name].target
            if target == "config":
                fields[name] = value
            elif target == "threads":
                threads[_THREAD_FIELDS[name]] = int(value)
            else:
                env[target.split(":", 1)[1]] = str(value)
        fields["threads"] = ThreadConfig.from_dict(threads)
        return base.replace(**fields), env

    def params_for(self, config: TrainConfig | Mapping[str, Any]) -> dict[str, Any]:
        """Optuna parameters that reproduce ``config`` (for enqueueing): sampled dimensions only.

        A value outside its dimension is clipped into the range, or left to the sampler when it
        is not among the choices.
        """
        data = config.to_dict() if isinstance(config, TrainConfig) else dict(config)
        threads = dict(data.get("threads") or {})
        params: dict[str, Any] = {}
        for name, dim in self.dimensions.items():
            if dim.fixed:
                continue
            if name in _THREAD_FIELDS:
                value = threads.get(_THREAD_FIELDS[name], data.get(name))
            else:
                value = data.get(name)
            if value is None:
                continue
            if name == "momentum" and data.get("optimizer") not in (None, "momentum"):
                continue
            if dim.choices is not None:
                if value in dim.choices:
                    params[name] = value
            else:
                clipped = min(max(value, dim.low), dim.high)
                params[name] = int(round(clipped)) if _KINDS[name].type == "int" else float(clipped)
        return params

    # -- inspection -----------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Dimension:
        return self.dimensions[name]

    def __contains__(self, name: object) -> bool:
        return name in self.dimensions

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpace) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={d.to_spec()!r}" for n, d in self.dimensions.items())
        return f"SearchSpace({inner}, cores={self.cores})"


def as_space(space: Any, cores: int) -> SearchSpace:
    """Accept None (defaults), a SearchSpace, a mapping, or a YAML / JSON file path."""
    if space is None:
        return SearchSpace(cores=cores)
    if isinstance(space, SearchSpace):
        return space
    if isinstance(space, Mapping):
        return SearchSpace.from_dict(space, cores=cores)
    if isinstance(space, (str, Path)):
        return SearchSpace.from_file(space, cores=cores)
    raise ParameterError(
        "The 'space' parameter must be a SearchSpace, a mapping or a YAML/JSON file path. "
        f"Got {type(space).__name__} instead."
    )
