"""Server assembly: thread pool, message limits, health, reflection, graceful SIGTERM drain.

Service-conventions §2.1: the standard health service (overall "" and ``plena_opt.v1.PlenaOpt``)
and server reflection; on SIGTERM/SIGINT ``enter_graceful_shutdown()`` sets every service
NOT_SERVING, running searches are asked to stop (they return their partial fronts) and
``server.stop(grace)`` waits for in-flight RPCs.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from plena_proto import plena_opt_pb2 as pb

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
        """Health → NOT_SERVING, stop searches, then stop the server within ``grace`` seconds."""
        self.health.enter_graceful_shutdown()
        self.servicer.registry.shutdown()
        self.server.stop(grace).wait()


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


def clear_stale_journal_lock(storage: str | None, stale_after: float = STALE_LOCK_SECONDS) -> bool:
    """Remove a journal lock left by a process killed while writing (``search.storage``)."""
    from plena_opt.search.storage import DEFAULT_STORAGE
    from plena_opt.search.storage import clear_stale_journal_lock as clear

    return clear(storage or DEFAULT_STORAGE, stale_after)


def start_server(
    host: str = "127.0.0.1",
    port: int = 50051,
    storage: str | None = None,
    workers: int = 16,
    limits: ServerLimits | None = None,
) -> RunningServer:
    """Build and start the server on ``host:port`` (port 0 = any free port)."""
    limits = limits or ServerLimits()
    clear_stale_journal_lock(storage)
    # Searches hold a thread each; keep threads for the cheap RPCs (health, Estimate, Cancel).
    pool = futures.ThreadPoolExecutor(
        max_workers=workers + limits.max_concurrent_searches, thread_name_prefix="plena-rpc"
    )
    server = grpc.server(pool, options=channel_options(limits))
    servicer = PlenaOptServicer(limits, storage)
    add_servicer(servicer, server)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
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
) -> int:
    """Run until SIGTERM/SIGINT, then drain gracefully; returns the exit code (0)."""
    limits = limits or ServerLimits()
    running = start_server(host, port, storage, workers, limits)
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
