"""Running searches: the concurrency limit, cancellation by study name and shutdown."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import grpc

from plena_opt.stop import StopToken
from plena_server.errors import RpcAbort, ServerLimitError


class StopSignal(StopToken):
    """A search's stop flag with the reason it was raised (first reason wins); the re-check
    derives a deadline token from it (:class:`plena_opt.stop.StopToken`)."""


class SearchRegistry:
    """At most ``limit`` searches at once; each registered under its study name."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._running: dict[str, StopSignal] = {}
        self._closed = False

    def acquire(self, study_name: str, stop: StopSignal) -> None:
        """Take a search slot; RESOURCE_EXHAUSTED when full, FAILED_PRECONDITION when the study
        already runs, UNAVAILABLE while shutting down. Pair with :meth:`release`."""
        with self._lock:
            if self._closed:
                raise RpcAbort(grpc.StatusCode.UNAVAILABLE, "server is shutting down")
            if study_name in self._running:
                raise RpcAbort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"study {study_name!r} is already running on this server",
                )
            if len(self._running) >= self.limit:
                raise ServerLimitError(
                    "options", f"the server already runs {self.limit} searches; retry later"
                )
            self._running[study_name] = stop

    def release(self, study_name: str) -> None:
        with self._lock:
            self._running.pop(study_name, None)

    @contextlib.contextmanager
    def slot(self, study_name: str, stop: StopSignal) -> Iterator[None]:
        """:meth:`acquire` … :meth:`release` as a context manager."""
        self.acquire(study_name, stop)
        try:
            yield
        finally:
            self.release(study_name)

    def cancel(self, study_name: str) -> bool:
        with self._lock:
            stop = self._running.get(study_name)
        if stop is None:
            return False
        stop.set("cancelled")
        return True

    def is_running(self, study_name: str) -> bool:
        with self._lock:
            return study_name in self._running

    def active(self) -> int:
        with self._lock:
            return len(self._running)

    def shutdown(self) -> None:
        """Refuse new searches and ask every running one to stop (reason ``shutdown``)."""
        with self._lock:
            self._closed = True
            stops = list(self._running.values())
        for stop in stops:
            stop.set("shutdown")
