"""Server-side limits that protect the server from oversized requests (issue 7), and the slots
that bound concurrent Simulates (their memory) as the registry bounds searches."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import grpc
from pydantic import BaseModel, ConfigDict, Field

from plena_opt.api import limits as bounds
from plena_opt.api.limits import MIB
from plena_opt.stop import StopToken
from plena_server.errors import RpcAbort, ServerLimitError

__all__ = ["MIB", "ServerLimits", "SimulationSlots"]

# Upper bounds of the operator's settings: more runs at once than MAX_CONCURRENT, or a drain
# longer than MAX_GRACE_SECONDS, is a typo (each search holds a process pool and memory).
MAX_CONCURRENT = 1024
MAX_GRACE_SECONDS = 3600.0


class ServerLimits(BaseModel):
    """Upper bounds enforced on every request; exceeding one is RESOURCE_EXHAUSTED. The
    defaults are the shared request bounds (:mod:`plena_opt.api.limits`), the web app's too."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrent_searches: int = Field(
        4, ge=1, le=MAX_CONCURRENT, description="searches running at once"
    )
    max_concurrent_simulates: int = Field(
        bounds.MAX_CONCURRENT_SIMULATIONS,
        ge=1,
        le=MAX_CONCURRENT,
        description="Simulates running at once",
    )
    max_simulate_bytes: int = Field(
        bounds.MAX_SIMULATION_BYTES,
        ge=MIB,
        description="estimated working memory of one Simulate, bytes",
    )
    max_devices: int = Field(bounds.MAX_DEVICES, ge=1, description="devices in a NoC profile")
    max_trials: int = Field(bounds.MAX_TRIALS, ge=1, description="trials per search request")
    max_samples: int = Field(bounds.MAX_SAMPLES, ge=1, description="Monte Carlo samples per plan")
    max_recheck_top_k: int = Field(
        bounds.MAX_RECHECK_TOP_K, ge=0, description="re-checked front plans per search"
    )
    max_inline_json_bytes: int = Field(
        bounds.MAX_BODY_BYTES, ge=1, description="inline config/profile size"
    )
    max_message_bytes: int = Field(
        bounds.MAX_MESSAGE_BYTES, ge=MIB, description="gRPC send/receive limit"
    )
    max_trace_bytes: int = Field(
        bounds.MAX_TRACE_BYTES, ge=0, description="compressed trace bytes per reply"
    )
    max_deadline_seconds: float = Field(
        bounds.MAX_DEADLINE_SECONDS, gt=0, description="longest search budget, s"
    )
    grace_seconds: float = Field(
        5.0, ge=0, le=MAX_GRACE_SECONDS, description="SIGTERM drain period, s"
    )


class SimulationSlots:
    """At most ``limit`` Simulates at once (RESOURCE_EXHAUSTED beyond), each holding the stop
    token that :meth:`shutdown` sets, so that SIGTERM makes them answer with what is done."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._tokens: set[StopToken] = set()
        self._closed = False

    @contextlib.contextmanager
    def slot(self, token: StopToken) -> Iterator[None]:
        """Hold a slot for the body; UNAVAILABLE while shutting down."""
        with self._lock:
            if self._closed:
                raise RpcAbort(grpc.StatusCode.UNAVAILABLE, "server is shutting down")
            if len(self._tokens) >= self.limit:
                raise ServerLimitError(
                    "request", f"the server already runs {self.limit} simulations; retry later"
                )
            self._tokens.add(token)
        try:
            yield
        finally:
            with self._lock:
                self._tokens.discard(token)
                self._idle.notify_all()

    def active(self) -> int:
        with self._lock:
            return len(self._tokens)

    def shutdown(self) -> None:
        """Refuse new Simulates and stop the running ones (reason ``shutdown``)."""
        with self._lock:
            self._closed = True
            tokens = list(self._tokens)
        for token in tokens:
            token.set("shutdown")

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every running Simulate to end."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._tokens, timeout=max(timeout, 0.0))
