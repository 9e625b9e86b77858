"""``Hardware``: CPU, cores, memory, BLAS / OpenMP libraries and GPUs, and its fingerprint.

A CPU-affinity subset of a machine (1 of its 2 cores, say) is a hardware target of its own:
``Hardware.detect(cores=1)`` describes it, and its fingerprint differs from the whole machine's.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_float, check_int

__all__ = ["Hardware", "cpu_identity", "hardware_command"]

# What a described machine may claim; beyond them a description is a typo, not a machine.
MAX_CORES = 4096
MAX_MEMORY_GB = 65536.0
MAX_GPU_MEMORY_MB = 1048576.0

# Fields that identify a hardware target (with the CPU's instruction-set extensions, below);
# everything else is descriptive.
_IDENTITY = ("machine", "cpu_model", "physical_cores", "logical_cores", "usable_cores", "memory_gb", "gpus")
_FLAGS_OF_INTEREST = ("avx", "avx2", "avx512f", "avx512_vnni", "amx_tile", "fma", "sse4_2", "neon", "asimd")
# The extensions that make the same CPU model string train at another speed: a hypervisor often
# reports only "AMD EPYC", and two such 2-vCPU VMs trained the same runs 3x apart, the faster
# one with AVX-512 (docs/explanation/how-recommend-decides.md#another-machine).
_ISA_FLAGS = ("amx_tile", "avx512f", "avx2", "asimd")


def cpu_identity(hardware: dict[str, Any]) -> str:
    """A CPU as dltune tells CPUs apart: the model string plus the speed-relevant instruction-set
    extensions, e.g. ``'AMD EPYC [avx512f avx2]'`` (the bare model when no flags are known)."""
    flags = set(hardware.get("cpu_flags") or ())
    isa = [f for f in _ISA_FLAGS if f in flags]
    return f"{hardware.get('cpu_model')} [{' '.join(isa)}]" if isa else str(hardware.get("cpu_model"))


def _cpu_info() -> tuple[str, list[str]]:
    model, flags = platform.processor() or platform.machine(), []
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "cpu model") and value.strip():
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            present = set(value.split())
            flags = [f for f in _FLAGS_OF_INTEREST if f in present]
    return model, flags


def _blas_libraries() -> list[dict[str, Any]]:
    """The BLAS and OpenMP libraries loaded in this process (numpy's, at least)."""
    try:
        import numpy  # noqa: F401 - loads its BLAS so that threadpoolctl sees it
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [{k: lib.get(k) for k in keep if lib.get(k) is not None} for lib in threadpool_info()]


def _gpus() -> list[dict[str, Any]]:
    """NVIDIA GPUs as nvidia-smi lists them; none when it is absent or fails."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2:
            gpus.append({"name": parts[0], "memory_mb": float(parts[1]), "driver": parts[2] if len(parts) > 2 else None})
    return gpus


@dataclass(frozen=True)
class Hardware:
    """A hardware target: a machine, or the subset of its cores a run may use.

    Attributes:
        cpu_model: the processor's model name.
        physical_cores / logical_cores: the whole machine's cores.
        usable_cores: the cores a run may use (the CPU-affinity subset).
        memory_gb: total memory in GiB.
        gpus: ``[{"name", "memory_mb", "driver"}]``.
        cpu_flags: vector-instruction flags of interest (avx2, avx512f, ...).
        blas: BLAS / OpenMP libraries threadpoolctl sees in this process.
    """

    cpu_model: str
    physical_cores: int
    logical_cores: int
    usable_cores: int
    memory_gb: float
    machine: str = field(default_factory=platform.machine)
    gpus: tuple[dict[str, Any], ...] = ()
    cpu_flags: tuple[str, ...] = ()
    blas: tuple[dict[str, Any], ...] = ()
    os: str = field(default_factory=platform.system)
    description: str = ""

    @classmethod
    def detect(cls, cores: int | None = None) -> Hardware:
        """This machine, or its first ``cores`` usable cores."""
        import psutil

        from dltune.config import usable_cores

        available = usable_cores()
        if cores is not None:
            cores = check_int("cores", cores, 1, available)
        model, flags = _cpu_info()
        logical = psutil.cpu_count(logical=True) or available
        return cls(
            cpu_model=model,
            physical_cores=psutil.cpu_count(logical=False) or logical,
            logical_cores=logical,
            usable_cores=cores or available,
            memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
            gpus=tuple(_gpus()),
            cpu_flags=tuple(flags),
            blas=tuple(_blas_libraries()),
        )

    @property
    def fingerprint(self) -> str:
        """A stable 12-hex-digit identity of this target (same machine, same cores: same value)."""
        data = self.to_dict()
        identity = {k: data[k] for k in _IDENTITY}
        identity["cpu_model"] = cpu_identity(data)
        identity["memory_gb"] = round(float(identity["memory_gb"]))
        identity["gpus"] = [g.get("name") for g in identity["gpus"]]
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def target(self) -> str:
        """A readable name: CPU family, the usable cores out of the logical ones, GPU if any."""
        words = re.sub(r"\(R\)|\(TM\)|CPU|Processor|@.*$", " ", self.cpu_model).split()
        short = "-".join(w.lower() for w in words[:4] if w.isascii()) or self.machine
        name = f"{short}-{self.usable_cores}of{self.logical_cores}c"
        if self.gpus:
            name += "-" + re.sub(r"[^a-z0-9]+", "", self.gpus[0]["name"].lower().replace("nvidia", ""))
        return name

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [dict(g) for g in self.gpus]
        data["cpu_flags"] = list(self.cpu_flags)
        data["blas"] = [dict(b) for b in self.blas]
        return data

    def to_json(self) -> str:
        return json.dumps({**self.to_dict(), "fingerprint": self.fingerprint, "target": self.target},
                          indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any) -> Hardware:
        """A described machine. Needs ``cpu_model`` and the core counts; ``memory_gb`` too.

        Missing ``physical_cores`` / ``usable_cores`` default to ``logical_cores``.
        """
        if not isinstance(data, dict):
            raise ParameterError(
                f"The 'hardware' parameter must be a JSON object. Got {type(data).__name__} instead."
            )
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        if "logical_cores" not in data:
            raise ParameterError(
                "The 'hardware' parameter must give 'logical_cores' (an int >= 1). Got none."
            )
        for key in ("physical_cores", "usable_cores"):
            data.setdefault(key, data["logical_cores"])
        data.setdefault("cpu_model", "unknown")
        data.setdefault("memory_gb", 0.0)
        for key in ("logical_cores", "physical_cores", "usable_cores"):
            data[key] = check_int(f"hardware.{key}", data[key], 1, MAX_CORES)
        if data["usable_cores"] > data["logical_cores"]:
            raise ParameterError(
                f"The 'hardware.usable_cores' parameter must be at most logical_cores "
                f"({data['logical_cores']}). Got {data['usable_cores']} instead."
            )
        # A memory of 0 (a GPU's too) means not known: the default when a description leaves it out.
        data["memory_gb"] = check_float("hardware.memory_gb", data["memory_gb"], 0.0, MAX_MEMORY_GB)
        if not isinstance(data["cpu_model"], str):
            raise ParameterError(f"The 'hardware.cpu_model' parameter must be a string. Got {data['cpu_model']!r} instead.")
        gpus = data.get("gpus", ())
        if not isinstance(gpus, (list, tuple)) or not all(isinstance(g, dict) and "name" in g for g in gpus):
            raise ParameterError(
                f"The 'hardware.gpus' parameter must be a list of objects with a 'name'. Got {gpus!r} instead."
            )
        for i, gpu in enumerate(gpus):
            if gpu.get("memory_mb") is not None:
                check_float(f"hardware.gpus[{i}].memory_mb", gpu["memory_mb"], 0.0, MAX_GPU_MEMORY_MB)
        blas = data.get("blas", ())
        if not isinstance(blas, (list, tuple)) or not all(isinstance(b, dict) for b in blas):
            raise ParameterError(f"The 'hardware.blas' parameter must be a list of objects. Got {blas!r} instead.")
        for i, lib in enumerate(blas):
            if lib.get("num_threads") is not None:
                check_int(f"hardware.blas[{i}].num_threads", lib["num_threads"], 1, MAX_CORES)
        flags = data.get("cpu_flags", ())
        if not isinstance(flags, (list, tuple)) or not all(isinstance(f, str) for f in flags):
            raise ParameterError(
                f"The 'hardware.cpu_flags' parameter must be a list of strings. Got {flags!r} instead."
            )
        data["gpus"] = tuple(dict(g) for g in gpus)
        data["cpu_flags"] = tuple(flags)
        data["blas"] = tuple(dict(b) for b in blas)
        return cls(**data)

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> Hardware:
        """A described machine from a JSON file path, or from JSON text."""
        text = str(source)
        path = Path(text)
        if not text.lstrip().startswith("{"):
            if not path.is_file():
                raise ParameterError(f"The 'hardware' file {text!r} does not exist.")
            text = path.read_text()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ParameterError(f"The 'hardware' parameter must be valid JSON. Got a parse error: {exc}.") from None
        return cls.from_dict(data)

    def summary(self) -> str:
        gpu = ", ".join(g["name"] for g in self.gpus) or "none"
        blas = ", ".join(
            f"{b.get('internal_api')} {b.get('version') or ''} ({b.get('num_threads')} threads)".replace("  ", " ")
            for b in self.blas
        ) or "none seen"
        return "\n".join([
            f"target       {self.target}",
            f"fingerprint  {self.fingerprint}",
            f"cpu          {self.cpu_model} ({self.machine})",
            f"cores        {self.usable_cores} usable of {self.logical_cores} logical, {self.physical_cores} physical",
            f"memory       {self.memory_gb:g} GiB",
            f"cpu flags    {' '.join(self.cpu_flags) or '-'}",
            f"blas/openmp  {blas}",
            f"gpus         {gpu}",
        ])


def hardware_command(as_json: bool, cores: int | None) -> str:
    """The text ``dltune hardware`` prints."""
    hw = Hardware.detect(cores=cores)
    return hw.to_json() if as_json else hw.summary()
