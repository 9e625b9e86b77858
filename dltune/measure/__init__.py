"""Measurement records.

The resource sampler beside them (``dltune.measure._sampler``) belongs to the execution layer,
so this package does not re-export it: importing the records never reaches the sampler.
"""

from __future__ import annotations

from dltune.measure._record import (
    SCHEMA_VERSION,
    SUMMARY_COLUMNS,
    Measurement,
    load_records,
    read_csv,
    save_records,
    to_dataframe,
    write_csv,
)

__all__ = [
    "SCHEMA_VERSION",
    "SUMMARY_COLUMNS",
    "Measurement",
    "load_records",
    "read_csv",
    "save_records",
    "to_dataframe",
    "write_csv",
]
