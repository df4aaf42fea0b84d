"""The parts of a workers' queue that the plan workers (``workers``) and the co-design workers
(``codesign_workers``) share: the queue study's attributes and name, the store check, what a
prepared queue is and what a worker reports. Below both, so neither imports the other back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from plena_opt.errors import PlenaInputError
from plena_opt.search.request import MEMORY_STORAGE
from plena_opt.search.storage.chunk_store import QUEUE_SUFFIX

QUEUE_ATTR = "plena:queue_for"  # on the queue study: the study it feeds
REQUEST_ATTR = "plena:request"  # the SearchRequest (JSON) every worker runs
POINTS_ATTR = "plena:legal_points"
CHUNK_ATTR = "plena:chunk_plans"
# Heartbeat period (s); a chunk silent for ``storage.HEARTBEAT_GRACE`` periods is stale.
HEARTBEAT_SECONDS = 5.0


def queue_name(study: str) -> str:
    """The queue study's name for ``study``."""
    return study + QUEUE_SUFFIX


def _check_storage(url: str | None) -> str:
    if not url or "://" not in url or url == MEMORY_STORAGE:
        raise PlenaInputError(
            "storage",
            f"--storage {url!r}: workers need an RDB URL (postgresql://user@host/db for several "
            "machines, sqlite:///file.db for one) or a gRPC storage proxy (grpc://host:port); a "
            "journal file or :memory: has no heartbeats",
        )
    return url


@dataclass(frozen=True)
class QueueInfo:
    """A prepared study: its name, plans in the space, plans per chunk, chunks enqueued now,
    what a chunk stores (``all`` plans as trials, or its ``front``: ``chunk_store``)."""

    study: str
    legal_points: int
    chunk_plans: int
    enqueued: int
    store_plans: str = "all"


@dataclass
class WorkerReport:
    """What one worker did: chunks it finished, plans it scored and stored, stale chunks it
    failed (for retry), chunks of its own another worker had failed as stale meanwhile (the
    retry finishes them), CPU seconds in the evaluator (``score_cpu_s``) and before its first
    claim (``setup_cpu_s``: loading the queue, the space, the stored plans), seconds from its
    first claim to its last chunk done (``busy_s``), seconds it ran, CPU seconds it used, its
    peak resident memory (MiB; 0 where the OS does not say); ``exit_code`` is non-zero for a
    local worker process that died (its report then holds nothing else)."""

    study: str
    chunks: int = 0
    reclaimed: int = 0
    worker: int = 0  # number of a local worker process (1..N), 0 for one started on its own
    exit_code: int = 0  # a local worker process that died: its exit code (-9: SIGKILL)
    plans_scored: int = 0
    plans_stored: int = 0
    stale_failed: int = 0
    score_cpu_s: float = 0.0
    setup_cpu_s: float = 0.0
    busy_s: float = 0.0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mib: float = 0.0

    def finish(self, t0: float, c0: float) -> WorkerReport:
        """Record the time, CPU time and peak memory since ``t0``/``c0``; the report."""
        self.elapsed_s = time.perf_counter() - t0
        self.cpu_s = time.process_time() - c0
        try:
            import resource

            self.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB
        except ImportError:  # not POSIX
            pass
        return self
