"""The machine a run happens on: detected or described, with a stable fingerprint."""

from __future__ import annotations

from dltune.hardware._hardware import Hardware, cpu_identity, hardware_command

__all__ = ["Hardware", "cpu_identity", "hardware_command"]
