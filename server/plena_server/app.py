"""Server assembly: thread pool, message limits, health, reflection, TLS, graceful drain.

Service-conventions §2.1: the standard health service (overall "" and ``plena_opt.v1.PlenaOpt``)
and server reflection, offered as ``grpc.reflection.v1`` and ``grpc.reflection.v1alpha``
(``reflection=False`` turns both off). On SIGTERM/SIGINT ``enter_graceful_shutdown()`` sets every
service NOT_SERVING and the server keeps answering (health says NOT_SERVING, new searches and
Simulates are UNAVAILABLE) while running searches, re-checks and Simulates stop and reply with
what is done (``stop_reason = "shutdown"``); then ``server.stop`` waits out the rest of the grace.

Security: the server binds loopback by default. ``tls`` (a certificate chain and private key in
PEM, grpcio's own ``ssl_server_credentials``) encrypts the connection; with ``client_ca`` it also
requires a client certificate signed by that CA (mutual TLS; a client without one fails the
handshake). ``auth_token`` requires ``authorization: Bearer <token>`` on every RPC but health
(:mod:`plena_server.auth`). Without either, anyone who reaches the port may use the server.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from plena_proto import plena_opt_pb2 as pb

from plena_server.auth import TokenInterceptor
from plena_server.errors import safe_deserializer
from plena_server.limits import ServerLimits
from plena_server.service import SERVICE_NAME, PlenaOptServicer

log = logging.getLogger("plena_server")


@dataclass
class RunningServer:
    """A started server and the objects needed to drain it."""

    server: grpc.Server
    servicer: PlenaOptServicer
    health: health.HealthServicer
    port: int

    def drain(self, grace: float) -> None:
        """Health → NOT_SERVING; stop searches and Simulates (they answer with what is done)
        while the server still answers; then stop it within what is left of ``grace`` seconds."""
        end = time.monotonic() + grace
        self.health.enter_graceful_shutdown()
        self.servicer.registry.shutdown()
        self.servicer.simulations.shutdown()
        # health keeps answering NOT_SERVING (not UNAVAILABLE) for at least DRAIN_NOTICE s and
        # until the stopped work has ended
        time.sleep(min(DRAIN_NOTICE_SECONDS, grace))
        while self.servicer.registry.active() and time.monotonic() < end:
            time.sleep(0.02)
        self.servicer.simulations.wait_idle(end - time.monotonic())
        self.server.stop(max(end - time.monotonic(), 0.0)).wait()


def add_servicer(servicer: PlenaOptServicer, server: grpc.Server) -> None:
    """Register every RPC of the proto's service, with malformed-bytes-safe deserializers."""
    service = pb.DESCRIPTOR.services_by_name["PlenaOpt"]
    handlers = {}
    for method in service.methods:
        request_cls = getattr(pb, method.input_type.name)
        response_cls = getattr(pb, method.output_type.name)
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=safe_deserializer(request_cls.FromString),
            response_serializer=response_cls.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))


def channel_options(limits: ServerLimits) -> list[tuple[str, int]]:
    """Message-size limits of the server (service-conventions §2.6; the client uses the same)."""
    return [
        ("grpc.max_send_message_length", limits.max_message_bytes),
        ("grpc.max_receive_message_length", limits.max_message_bytes),
    ]


STALE_LOCK_SECONDS = 2.0
# Seconds the health service reports NOT_SERVING before the server stops accepting RPCs.
DRAIN_NOTICE_SECONDS = 0.5
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS: the certificate chain and its private key; ``client_ca``: the CA
    certificates a client's certificate must be signed by (mutual TLS; None: no client
    certificate asked)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """grpcio's server credentials (raises ``OSError`` for an unreadable file)."""
        chain, key = Path(self.cert).read_bytes(), Path(self.key).read_bytes()
        if self.client_ca is None:
            return grpc.ssl_server_credentials([(key, chain)])
        ca = Path(self.client_ca).read_bytes()
        return grpc.ssl_server_credentials(
            [(key, chain)], root_certificates=ca, require_client_auth=True
        )


def enable_reflection(server: grpc.Server, services: tuple[str, ...]) -> None:
    """Server reflection as ``grpc.reflection.v1alpha`` (grpcio-reflection) and as
    ``grpc.reflection.v1``, whose messages are the same on the wire (grpc-proto's v1 schema is
    v1alpha's, renamed), served by the same servicer; grpcurl asks for v1 first."""
    names = (*services, reflection.SERVICE_NAME, REFLECTION_V1)
    servicer = reflection.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(REFLECTION_V1, {"ServerReflectionInfo": handler}),)
    )


def clear_stale_journal_lock(storage: str | None, stale_after: float = STALE_LOCK_SECONDS) -> bool:
    """Remove a journal lock left by a process killed while writing (``search.storage.storage``)."""
    from plena_opt.api.studies import clear_stale_lock

    return clear_stale_lock(storage, stale_after)


# Libraries the handlers import lazily (to keep `plena-opt --help` fast). Imported once before
# serving: two RPC threads importing the same module for the first time can otherwise meet in
# importlib's module locks (`_DeadlockError`, seen once in 10,000 fuzzed requests). The product's
# modules are listed by the use-case layer (`plena_opt.api.warm.MODULES`).
PRELOAD = ("optuna", "optuna.trial")


def preload() -> None:
    """Import :data:`PRELOAD` and ``plena_opt.api.warm.MODULES`` in this thread (before any RPC
    thread runs)."""
    import importlib

    from plena_opt.api import warm

    for name in PRELOAD:
        importlib.import_module(name)
    warm.import_all()


def start_server(
    host: str = "127.0.0.1",
    port: int = 50051,
    storage: str | None = None,
    workers: int = 16,
    limits: ServerLimits | None = None,
    *,
    reflection_on: bool = True,
    tls: TlsFiles | None = None,
    auth_token: str | None = None,
) -> RunningServer:
    """Build and start the server on ``host:port`` (port 0 = any free port); reflection unless
    ``reflection_on`` is False; TLS with ``tls``; the bearer token ``auth_token`` required."""
    limits = limits or ServerLimits()
    preload()
    clear_stale_journal_lock(storage)
    # Searches and Simulates hold a thread each; keep threads for the cheap RPCs (health,
    # Estimate, Cancel).
    pool = futures.ThreadPoolExecutor(
        max_workers=workers + limits.max_concurrent_searches + limits.max_concurrent_simulates,
        thread_name_prefix="plena-rpc",
    )
    interceptors = [TokenInterceptor(auth_token)] if auth_token else []
    server = grpc.server(pool, options=channel_options(limits), interceptors=interceptors)
    servicer = PlenaOptServicer(limits, storage)
    add_servicer(servicer, server)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if reflection_on:
        enable_reflection(server, (SERVICE_NAME, health.SERVICE_NAME))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if tls is not None:
        bound = server.add_secure_port(address, tls.credentials())
    else:
        bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot bind {address}")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, servicer, health_servicer, bound)


def serve(
    host: str = "127.0.0.1",
    port: int = 50051,
    storage: str | None = None,
    workers: int = 16,
    limits: ServerLimits | None = None,
    *,
    reflection_on: bool = True,
    tls: TlsFiles | None = None,
    auth_token: str | None = None,
) -> int:
    """Run until SIGTERM/SIGINT, then drain gracefully; returns the exit code (0)."""
    limits = limits or ServerLimits()
    running = start_server(
        host,
        port,
        storage,
        workers,
        limits,
        reflection_on=reflection_on,
        tls=tls,
        auth_token=auth_token,
    )
    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    # The first stdout line is the address (tests and scripts parse it).
    print(f"plena-opt serving on {host}:{running.port}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
        print("plena-opt: draining", file=sys.stderr, flush=True)
        running.drain(limits.grace_seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("plena-opt: stopped", file=sys.stderr, flush=True)
    return 0
