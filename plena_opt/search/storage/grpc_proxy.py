"""Optuna's gRPC storage proxy in front of one RDB store, for hundreds of workers (issue 17).

A worker opens ``--storage grpc://host:port`` as Optuna's ``GrpcStorageProxy``; the proxy
(``plena-opt storage-proxy --storage postgresql://… --port 13000``, Optuna's
``run_grpc_proxy_server``) holds the only pool of database connections, so PostgreSQL sees one
client instead of one per worker, and Optuna's cache in the proxy serves the workers' reads.
Optuna's proxy carries no heartbeats; workers on it keep a lease instead
(``plena_opt.search.workers.workers``: the chunk trial's ``BEAT_ATTR``, a stale lease failed and the
chunk enqueued again by Optuna's ``RetryFailedTrialCallback``). Optuna ≥ 4.2 (the ``grpcio`` it
needs is a plena-opt dependency already, for the server).
"""

from __future__ import annotations

import threading
from typing import Any

import optuna

from plena_opt.errors import PlenaInputError
from plena_opt.search.storage.storage_backend import RDB_SCHEMES, sqlalchemy_url

GRPC_SCHEME = "grpc://"
DEFAULT_PORT = 13000
CONNECT_TIMEOUT_S = 10.0


def is_grpc(url: str | None) -> bool:
    """Whether ``url`` names a gRPC storage proxy (``grpc://host:port``)."""
    return bool(url) and str(url).lower().startswith(GRPC_SCHEME)


def _host_port(url: str) -> tuple[str, int]:
    rest = url[len(GRPC_SCHEME) :].rstrip("/")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PlenaInputError(
            "storage", f"--storage {url!r}: a gRPC storage proxy is grpc://HOST:PORT"
        )
    return host, int(port)


def open_grpc(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> optuna.storages.BaseStorage:
    """Optuna's ``GrpcStorageProxy`` client for ``grpc://host:port``, once the proxy answers."""
    import warnings

    import grpc

    host, port = _host_port(url)
    with warnings.catch_warnings():  # experimental in Optuna 4.2–5
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = optuna.storages.GrpcStorageProxy(host=host, port=port)
    try:
        storage.wait_server_ready(timeout=timeout_s)
    except (grpc.FutureTimeoutError, ConnectionError) as exc:
        storage.close()
        raise PlenaInputError(
            "storage",
            f"--storage {url!r}: no gRPC storage proxy answers there within {timeout_s:g} s "
            "(start one with plena-opt storage-proxy --storage URL --port PORT)",
        ) from exc
    return storage


def _backend(url: str) -> optuna.storages.BaseStorage:
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    if scheme not in RDB_SCHEMES:
        raise PlenaInputError(
            "storage",
            f"--storage {url!r}: the proxy fronts an RDB store (postgresql://…, sqlite:///…); "
            "Optuna's proxy does not serve journal files",
        )
    backend = optuna.storages.get_storage(sqlalchemy_url(url))  # with Optuna's in-process cache
    # Claims (WAITING → RUNNING) must be atomic: SQLite ignores the row lock Optuna's RDB storage
    # takes, so two proxy threads could both read a chunk WAITING and both claim it (a chunk
    # scored twice, seen in tests). Every claim passes through this one process: serialise them.
    lock = threading.Lock()
    set_state = backend.set_trial_state_values

    def set_trial_state_values(*args: Any, **kwargs: Any) -> bool:
        with lock:
            return set_state(*args, **kwargs)

    backend.set_trial_state_values = set_trial_state_values
    return backend


def start_proxy(url: str, host: str = "localhost", port: int = DEFAULT_PORT) -> Any:
    """Start a proxy for RDB store ``url`` on ``host:port``; the running ``grpc.Server``
    (``.stop(grace)`` ends it). Tests and embedders; the CLI blocks in ``serve_proxy``."""
    from optuna.storages._grpc.server import make_server

    server = make_server(_backend(url), host, port)
    server.start()
    return server


def serve_proxy(url: str, host: str = "localhost", port: int = DEFAULT_PORT) -> None:
    """Run Optuna's gRPC storage proxy for RDB store ``url`` until interrupted."""
    import warnings

    with warnings.catch_warnings():  # experimental in Optuna 4.2–5
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.run_grpc_proxy_server(_backend(url), host=host, port=port)
