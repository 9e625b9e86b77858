"""Measurement records and the resource sampler."""

from __future__ import annotations

from dltune.measure._record import (
    SCHEMA_VERSION,
    Measurement,
    load_records,
    read_csv,
    save_records,
    to_dataframe,
    write_csv,
)

__all__ = [
    "SCHEMA_VERSION",
    "Measurement",
    "ResourceSampler",
    "load_records",
    "read_csv",
    "save_records",
    "to_dataframe",
    "write_csv",
]


def __getattr__(name: str):
    if name == "ResourceSampler":
        from dltune.measure._sampler import ResourceSampler

        return ResourceSampler
    raise AttributeError(name)
