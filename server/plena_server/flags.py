"""The server's command-line flags, shared by ``plena-opt serve`` and ``python -m plena_server``
(the server owns them, so it never imports the CLI)."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from plena_opt.api.access import read_token_file
from plena_opt.errors import PlenaInputError

STORAGE_ENV = "PLENA_OPT_STORAGE"  # the CLI's too (plena_opt.cli.conventions.ENV_STORAGE)

DESCRIPTION = (
    "Serve the plena_opt.v1.PlenaOpt gRPC API. It binds to loopback by default and has no "
    "authentication unless asked: to serve beyond loopback use --tls-cert/--tls-key and "
    "--tls-client-ca (client certificates) and/or --auth-token-file (a bearer token)."
)


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """``--host --port --storage --workers --max-searches --max-simulates --grace
    --no-reflection --tls-cert --tls-key --tls-client-ca --auth-token-file``; sets ``func``."""
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=50051, help="TCP port (0 = any free port)")
    p.add_argument(
        "--storage",
        default=None,
        help="journal file or RDB URL shared with the CLI "
        "(default: $PLENA_OPT_STORAGE, else ./plena-opt-studies.log)",
    )
    p.add_argument("--workers", type=int, default=16, help="RPC handler threads (default 16)")
    p.add_argument("--max-searches", type=int, default=4, help="searches run at once (default 4)")
    p.add_argument("--max-simulates", type=int, default=4, help="Simulates run at once (default 4)")
    p.add_argument(
        "--grace", type=float, default=5.0, help="seconds to drain on SIGTERM (default 5)"
    )
    p.add_argument(
        "--no-reflection",
        dest="reflection",
        action="store_false",
        help="do not offer gRPC server reflection (v1 and v1alpha; offered by default)",
    )
    p.add_argument(
        "--tls-cert",
        default=None,
        help="PEM certificate chain: serve TLS (with --tls-key; default: none, plaintext)",
    )
    p.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert (default: none)")
    p.add_argument(
        "--tls-client-ca",
        default=None,
        metavar="FILE",
        help="PEM CA certificates: require a client certificate signed by one (mutual TLS; "
        "needs --tls-cert/--tls-key; default: none)",
    )
    p.add_argument(
        "--auth-token-file",
        default=None,
        metavar="FILE",
        help="require 'authorization: Bearer TOKEN' (TOKEN: the file's content) on every RPC "
        "but the health check (UNAUTHENTICATED otherwise; default: none)",
    )
    p.add_argument(
        "--calibration",
        default=None,
        metavar="FILE.json",
        help="apply the overlay plena-opt calibrate --out wrote (its fitted constants per "
        "engine and GPU chip) to every plan this server prices under load; read once at start, "
        "a damaged file is refused then (default: none, the shipped constants)",
    )
    # ``applies_calibration``: the server reads --calibration itself, once at start
    p.set_defaults(func=run_serve, storage=os.environ.get(STORAGE_ENV) or None,
                   applies_calibration=True)  # fmt: skip


_FLAGS = {
    "max_concurrent_searches": "--max-searches",
    "max_concurrent_simulates": "--max-simulates",
    "grace_seconds": "--grace",
}


def _tls(args: argparse.Namespace) -> object:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise PlenaInputError("tls", "--tls-cert and --tls-key go together")
    ca = getattr(args, "tls_client_ca", None)
    if ca and not args.tls_cert:
        raise PlenaInputError("tls_client_ca", "--tls-client-ca needs --tls-cert and --tls-key")
    if not args.tls_cert:
        return None
    from plena_server.app import TlsFiles

    tls = TlsFiles(Path(args.tls_cert), Path(args.tls_key), Path(ca) if ca else None)
    try:
        tls.credentials()
    except OSError as exc:
        raise PlenaInputError("tls", f"cannot read {exc.filename}: {exc.strerror}") from exc
    return tls


def run_serve(args: argparse.Namespace) -> int:
    """Validate the flags and serve until SIGTERM/SIGINT (user errors: ``PlenaInputError``)."""
    from pydantic import ValidationError

    from plena_opt.api.calibration import applied, overlay_flag
    from plena_server.limits import MAX_CONCURRENT, ServerLimits

    if not 0 <= args.port <= 65535:
        raise PlenaInputError("port", "--port must be between 0 and 65535")
    if not 1 <= args.workers <= MAX_CONCURRENT:
        raise PlenaInputError("workers", f"--workers must be between 1 and {MAX_CONCURRENT}")
    try:
        limits = ServerLimits(
            max_concurrent_searches=args.max_searches,
            max_concurrent_simulates=args.max_simulates,
            grace_seconds=args.grace,
        )
    except ValidationError as exc:
        loc = str(exc.errors()[0]["loc"][0])
        raise PlenaInputError(loc, f"{_FLAGS[loc]}: {exc.errors()[0]['msg']}") from exc
    tls = _tls(args)
    token_file = getattr(args, "auth_token_file", None)
    token = read_token_file(token_file) if token_file else None
    overlay = overlay_flag(getattr(args, "calibration", None))
    _check_port_free(args.host, args.port)
    try:
        with applied(overlay):  # process-wide: every RPC thread prices with it
            return _serve(args, limits, tls, token)
    except OSError as exc:
        raise PlenaInputError("port", f"cannot serve on {args.host}:{args.port}: {exc}") from exc
    except RuntimeError as exc:  # grpcio: "Failed to bind to address …" (port busy or no access)
        if "bind" not in str(exc):
            raise
        raise PlenaInputError(
            "port",
            f"cannot serve on {args.host}:{args.port}: the address is in use or not available; "
            "choose another --port",
        ) from None


def _serve(args: argparse.Namespace, limits: object, tls: object, token: str | None) -> int:
    from plena_server.app import serve

    return serve(
        args.host,
        args.port,
        args.storage,
        args.workers,
        limits,
        reflection_on=args.reflection,
        tls=tls,
        auth_token=token,
    )


def _check_port_free(host: str, port: int) -> None:
    """Fail with the OS's reason before gRPC tries (its C core logs a bind failure first)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        raise PlenaInputError(
            "port",
            f"cannot serve on {host}:{port}: {exc.strerror or exc}; choose another --port",
        ) from None
