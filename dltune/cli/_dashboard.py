"""``dltune dashboard``: serve optuna-dashboard on dltune's storage, on loopback by default."""

from __future__ import annotations

import argparse
import errno
import socket

EXAMPLES = """examples:
  dltune dashboard
  dltune dashboard --storage sqlite:///runs/dltune.db --port 8081"""


def add_parser(parser: argparse.ArgumentParser) -> None:
    from dltune.cli._common import add_storage_arg

    parser.epilog = EXAMPLES
    add_storage_arg(parser, "whose studies are shown")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=8080, help="port")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dltune._errors import ParameterError
    from dltune._log import logger
    from dltune._storage_url import resolve_storage
    from dltune._validation import check_int
    from dltune.tuning._storage import mask_url, open_storage, require_database

    check_int("port", args.port, 1, 65535)
    try:
        from optuna_dashboard import run_server
    except ImportError:
        from dltune._errors import BackendUnavailableError

        raise BackendUnavailableError(
            "The dashboard needs optuna-dashboard. Install it with: pip install 'dltune[dashboard]'"
        ) from None
    url = resolve_storage(args.storage)
    if url is None:
        raise ParameterError("The 'storage' parameter must be a database URL: the dashboard "
                             "shows the studies stored there. Got 'none' instead.")
    url = require_database(url, "the dashboard shows the studies that 'dltune tune' or 'dltune study' stored there")
    _check_bindable(args.host, args.port)
    storage = open_storage(url, heartbeat=False)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("dltune dashboard: warning: binding %s exposes the studies to the network",
                       args.host)
    host = f"[{args.host}]" if ":" in args.host else args.host
    logger.info("optuna-dashboard for %s at http://%s:%s/ (Ctrl+C stops)", mask_url(url), host,
                args.port)
    run_server(storage, host=args.host, port=args.port)
    return 0


def _check_bindable(host: str, port: int) -> None:
    """Refuse a ``host`` that does not resolve to this machine, or a ``port`` that cannot be
    bound there, before the server starts. The probe binds as bottle's wsgiref server does (IPv6
    when the host has a colon, SO_REUSEADDR), so it fails where the server would."""
    from dltune._errors import ParameterError

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except (socket.gaierror, UnicodeError) as exc:
            why = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
            raise ParameterError(f"The 'host' parameter must be a name or address of this machine. "
                                 f"Got {host!r}, which does not resolve: {why}.") from None
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ParameterError(f"The 'host' parameter must be an address of this machine. "
                                     f"Got {host!r}: {exc.strerror}.") from None
            raise ParameterError(f"The 'port' parameter must be a port that can be listened on at "
                                 f"{host}. Got {port}: {exc.strerror}.") from None
