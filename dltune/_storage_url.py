"""Storage URLs: the default, checking, password masking, the PostgreSQL driver, SQLite files.

Kept apart from :mod:`dltune.measure._storage` (heartbeats, Optuna) so that readers of a
storage that import nothing heavy (``recommend`` reads a SQLite file directly) share the rules.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dltune._errors import ParameterError

__all__ = ["DEFAULT_STORAGE", "check_sqlite_file", "check_url", "default_storage_url", "driver_url",
           "mask_url", "require_database", "resolve_storage", "sqlite_path",
           "unreadable_database"]

DEFAULT_STORAGE = "sqlite:///dltune.db"

_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql")


def default_storage_url() -> str:
    """``$DLTUNE_STORAGE`` (keeps passwords out of command lines), else ``sqlite:///dltune.db``."""
    return os.environ.get("DLTUNE_STORAGE") or DEFAULT_STORAGE


def resolve_storage(storage: str | None) -> str | None:
    """The storage a command or function uses, by the one rule: ``"default"`` is
    :func:`default_storage_url`; None (or ``"none"``, as the CLI writes it) is no storage; any
    other value is a URL, checked."""
    if storage is None or storage == "none":
        return None
    return default_storage_url() if storage == "default" else check_url(storage)


# A URL in a text: a scheme, then up to the next blank (a quote may be in a password).
_URL_IN_TEXT = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<rest>\S*)", re.IGNORECASE)


def _password(url: str) -> str | None:
    """The password of a URL's ``user:password@`` part, or None. The part runs from ``//`` to
    the *last* ``@``, so a raw ``@``, ``:`` or ``/`` in the password stays inside it; SQLite
    URLs have no such part (their path may hold an ``@``)."""
    match = _URL_IN_TEXT.match(url)
    if not match or match["scheme"].lower().startswith("sqlite"):
        return None
    userinfo = match["rest"].rpartition("@")[0]
    user, colon, password = userinfo.partition(":")
    return password if colon else None


def mask_url(url: str) -> str:
    """The text with the password of each URL in it replaced by ``***`` (safe to print and log):
    ``postgresql://user:***@host/db``."""

    def masked(match: re.Match[str]) -> str:
        if _password(match[0]) is None:
            return match[0]
        userinfo, _, host = match["rest"].rpartition("@")
        return f"{match['scheme']}://{userinfo.partition(':')[0]}:***@{host}"

    return _URL_IN_TEXT.sub(masked, url)


def _scrub(text: str, url: str) -> str:
    """``text`` with the URL's password removed wherever it appears, in the URL or alone (a
    driver's message may quote it), as written and percent-decoded."""
    from urllib.parse import unquote

    text = mask_url(text.replace(url, mask_url(url)))
    password = _password(url)
    for secret in {password, unquote(password)} if password else ():
        if secret:
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
    if scheme != "sqlite" and re.match(r"[^:/]*:[^@]*@[^/?#]*@", url.split("://", 1)[1]):
        # SQLAlchemy ends the password at its first '@' and would take the rest for the host.
        raise ParameterError(
            "The 'storage' URL's password must write '@' as '%40' (percent-encoded). "
            f"Got {mask_url(url)!r} instead."
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
    (opening it would create an empty database) or that is no whole SQLite database
    (:func:`check_sqlite_file`). ``needed_by`` says what the file should hold."""
    path = sqlite_path(check_url(url))
    if path is not None and not path.exists():
        raise ParameterError(
            f"The 'storage' database {str(path)!r} does not exist: {needed_by} "
            "(pass --storage or $DLTUNE_STORAGE)."
        )
    if path is not None:
        check_sqlite_file(path)
    return url


_SQLITE_MAGIC = b"SQLite format 3\x00"


def unreadable_database(path: Path, why: str) -> ParameterError:
    """The error for a ``storage`` SQLite file that cannot be read as a database."""
    return ParameterError(f"The 'storage' parameter must name a SQLite database. Got {str(path)!r}, "
                          f"which {why}.")


def check_sqlite_file(path: Path) -> Path:
    """``path`` if it is empty (SQLite's empty database) or a whole SQLite database; else a
    ``ParameterError``. A foreign file or a database cut short would otherwise read as one
    holding no records (https://www.sqlite.org/fileformat.html#the_database_header)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
        size = path.stat().st_size
    except OSError as exc:
        raise unreadable_database(path, f"cannot be read ({exc.strerror or exc})") from None
    if not header:
        return path
    if not header.startswith(_SQLITE_MAGIC):
        raise unreadable_database(path, "is not a SQLite database")
    if len(header) < 100:
        raise unreadable_database(path, f"is cut short ({size} bytes, less than its header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The header's page count holds while its change counter matches; a hot journal or a WAL
    # file beside it means a write was cut off and SQLite restores the file on opening.
    counted = header[24:28] == header[92:96] and pages > 0
    pending = any(path.with_name(path.name + s).exists() for s in ("-journal", "-wal"))
    if counted and not pending and size < page_size * pages:
        raise unreadable_database(
            path, f"is cut short ({size} bytes of the {page_size * pages} its header counts)")
    return path
