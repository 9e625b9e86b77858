"""``python -m dltune``: the command line, as the ``dltune`` command runs it (an entry point
of the CLI layer)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
