"""Storage URLs: the default, checking, password masking, the PostgreSQL driver, SQLite files.

Kept apart from :mod:`dltune.tuning._storage` (heartbeats, locks, Optuna) so that readers of a
storage that import nothing heavy (``recommend`` reads a SQLite file directly) share the rules.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dltune._errors import ParameterError

__all__ = ["DEFAULT_STORAGE", "check_url", "default_storage_url", "driver_url", "mask_url",
           "require_database", "sqlite_path"]

DEFAULT_STORAGE = "sqlite:///dltune.db"

_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql")


def default_storage_url() -> str:
    """``$DLTUNE_STORAGE`` (keeps passwords out of command lines), else ``sqlite:///dltune.db``."""
    return os.environ.get("DLTUNE_STORAGE") or DEFAULT_STORAGE


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (safe to print and log)."""
    return re.sub(r"(?P<head>[a-z][a-z0-9+.-]*://[^/:@\s]*:)(?P<pw>[^@/\s]*)@",
                  lambda m: f"{m['head']}***@", url, flags=re.IGNORECASE)


def _scrub(text: str, url: str) -> str:
    """``text`` with the URL's password removed wherever it appears."""
    match = re.match(r"[a-z][a-z0-9+.-]*://[^/:@\s]*:(?P<pw>[^@/\s]+)@", url, flags=re.IGNORECASE)
    text = mask_url(text.replace(url, mask_url(url)))
    if match:
        from urllib.parse import unquote

        for secret in {match["pw"], unquote(match["pw"])}:
            text = text.replace(secret, "***")
    return text


def check_url(url: str) -> str:
    """Validate a storage URL's form; return it."""
    if not isinstance(url, str) or "://" not in url:
        raise ParameterError(
            "The 'storage' parameter must be a database URL such as 'sqlite:///dltune.db' or "
            f"'postgresql://user:password@host/db'. Got {mask_url(str(url))!r} instead."
        )
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme not in _SCHEMES:
        raise ParameterError(
            f"The 'storage' URL scheme must be one of {{{', '.join(_SCHEMES)}}}. "
            f"Got {scheme!r} instead."
        )
    return url


def driver_url(url: str) -> str:
    """``url`` with an installed PostgreSQL driver named when it names none.

    SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3; dltune's ``postgres`` extra
    installs psycopg2, so the driver is chosen by what is importable.
    """
    import importlib.util

    scheme, rest = url.split("://", 1)
    if scheme.lower() not in ("postgresql", "postgres"):
        return url
    if importlib.util.find_spec("psycopg") is not None:
        return f"postgresql+psycopg://{rest}"
    if importlib.util.find_spec("psycopg2") is not None:
        return f"postgresql+psycopg2://{rest}"
    from dltune._errors import BackendUnavailableError

    raise BackendUnavailableError(
        "A PostgreSQL storage needs psycopg2 or psycopg. Install it with: "
        "pip install 'dltune[postgres]'"
    )


def sqlite_path(url: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL (absolute), or None for other storages."""
    if not url.lower().startswith("sqlite:"):
        return None
    rest = url.split("://", 1)[1]
    if rest in ("", "/", "/:memory:"):
        return None
    return Path(rest[1:] if rest.startswith("/") else rest).expanduser().resolve()


def require_database(url: str, needed_by: str) -> str:
    """``url``, checked; a ``ParameterError`` if it names a SQLite file that does not exist
    (opening it would create an empty database). ``needed_by`` says what the file should hold."""
    path = sqlite_path(check_url(url))
    if path is not None and not path.exists():
        raise ParameterError(
            f"The 'storage' database {str(path)!r} does not exist: {needed_by} "
            "(pass --storage or $DLTUNE_STORAGE)."
        )
    return url
