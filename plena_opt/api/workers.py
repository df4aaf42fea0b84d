"""Use case: one study searched by many worker processes on a shared RDB store (issue 17).

``prepare_workers(request)`` creates the study and its work queue; ``run_worker(url, study)``
joins it from any machine; ``run_local_workers(request, n)`` does both with ``n`` local
processes. How work is claimed and retried: ``plena_opt.search.workers.workers``.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import signal
from dataclasses import asdict
from typing import TYPE_CHECKING

from plena_opt.errors import PlenaInputError, PlenaRunError

if TYPE_CHECKING:
    from plena_opt.search.codesign.codesign import CodesignResult
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.workers.workers import QueueInfo, WorkerReport

MAX_LOCAL_WORKERS = 256
# Imported once by the fork server the local workers are forked from, not once per worker: a
# worker spawned afresh spent ≈ 2 s of CPU importing these (Optuna's RDB storage imports
# SQLAlchemy, Alembic, Mako and psycopg lazily) before scoring a plan (benchmarks/README.md,
# "scale out"). The fork server itself starts from a clean interpreter, so no database
# connection of this process is shared with a worker.
PRELOAD = [
    "plena_opt.search.workers.workers",
    "plena_opt.search.storage.chunk_store",
    "plena_opt.search.workers.codesign_workers",
    "plena_opt.api.workers",
    "sqlalchemy.orm",
    "alembic.command",
    "alembic.migration",
    "alembic.script",
    "optuna.storages._rdb.models",
    "psycopg",
]


def prepare_workers(
    request: SearchRequest, chunk_plans: int | None = None, store_plans: str = "all"
) -> QueueInfo:
    """Create ``request``'s study and work queue in ``request.storage`` (an RDB URL);
    ``store_plans``: ``all`` (a trial per plan) or ``front`` (each chunk's fronts as trials,
    every plan's metrics on the chunk: ``plena_opt.search.storage.chunk_store``)."""
    from plena_opt.search.workers.workers import prepare_queue

    return prepare_queue(request, chunk_plans=chunk_plans, store_plans=store_plans)


def run_worker(
    url: str, study: str, heartbeat_s: float | None = None, throttle_s: float = 0.0
) -> WorkerReport:
    """Claim and score chunks of ``study`` in ``url`` until its queue is done."""
    from plena_opt.search.workers import workers

    return workers.run_worker(
        url, study, heartbeat_s=heartbeat_s or workers.HEARTBEAT_SECONDS, throttle_s=throttle_s
    )


def _worker_main(
    url: str, study: str, heartbeat_s: float | None, throttle_s: float, q, number: int
) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    report = run_worker(url, study, heartbeat_s, throttle_s)
    report.worker = number
    q.put(asdict(report))


def run_local_workers(
    request: SearchRequest,
    n: int,
    heartbeat_s: float | None = None,
    throttle_s: float = 0.0,
    chunk_plans: int | None = None,
    store_plans: str = "all",
) -> tuple[QueueInfo, list[dict]]:
    """Prepare ``request``'s queue (``prepare_workers``) and score it with ``n`` local worker
    processes; the queue and one report (``WorkerReport`` as a dict) per worker."""
    if not 1 <= n <= MAX_LOCAL_WORKERS:
        raise PlenaInputError("workers", f"--workers must be 1..{MAX_LOCAL_WORKERS}, got {n}")
    info = prepare_workers(request, chunk_plans, store_plans)
    return info, _spawn(request.storage, info.study, n, heartbeat_s, throttle_s)


def _spawn(
    url: str | None, study: str, n: int, heartbeat_s: float | None, throttle_s: float
) -> list[dict]:
    """Run ``n`` local worker processes on ``study`` to the end; one report (a dict) each. A
    worker that died has a report with its ``exit_code``; when the others did not finish the
    study, :class:`PlenaRunError`."""
    ctx = _context()
    q = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker_main, args=(url, study, heartbeat_s, throttle_s, q, i + 1), daemon=True
        )
        for i in range(n)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    reports = [q.get(timeout=10) for p in procs if p.exitcode == 0]
    dead = {i + 1: p.exitcode or 0 for i, p in enumerate(procs) if p.exitcode != 0}
    if dead:
        _check_complete(url, study, n, dead)
    from plena_opt.search.workers.workers import WorkerReport

    lost = [asdict(WorkerReport(study, exit_code=c, worker=i)) for i, c in dead.items()]
    return sorted(reports + lost, key=lambda r: r["worker"])


def died(exit_code: int) -> str:
    """How a worker process ended: ``killed by SIGKILL`` (a negative exit code is the signal),
    else ``exited with status N``."""
    if exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    return f"exited with status {exit_code}"


def _check_complete(url: str | None, study: str, n: int, dead: dict[int, int]) -> None:
    """After worker processes ``dead`` (number → exit code) died: return when the survivors
    finished every chunk of ``study`` (a dead worker's chunk goes stale and is retried), else
    :class:`PlenaRunError` saying what is missing and how to resume."""
    from plena_opt.search.workers.workers import queue_done

    done, total = queue_done(str(url), study)
    if done == total:
        return
    which = ", ".join(f"worker {i} of {n} {died(code)}" for i, code in dead.items())
    raise PlenaRunError(
        f"study {study!r} is incomplete: {done} of {total} chunks scored ({which}); resume it "
        f"with: plena-opt worker --storage {url} --study {study} (or run the same search again)"
    )


def _context() -> multiprocessing.context.BaseContext:
    """A fork server preloaded with the workers' imports (POSIX), else plain spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    available = [m for m in PRELOAD if importlib.util.find_spec(m.split(".")[0]) is not None]
    ctx.set_forkserver_preload(available)  # psycopg: only with plena-opt[postgres]
    return ctx


def prepare_codesign_workers(
    request: SearchRequest, design_space: str, max_cost: float | None = None
) -> QueueInfo:
    """Create the co-design study of ``design_space`` and its queue of hardware points in
    ``request.storage`` (an RDB URL); workers join it with ``run_worker``."""
    from plena_opt.search.codesign.design_space import load_design_space
    from plena_opt.search.workers.codesign_workers import prepare_codesign_queue

    return prepare_codesign_queue(request, load_design_space(design_space), max_cost)


def run_codesign_workers(
    request: SearchRequest,
    design_space: str,
    n: int,
    max_cost: float | None = None,
    heartbeat_s: float | None = None,
) -> tuple[CodesignResult, list[dict]]:
    """Co-design ``design_space`` (every allowed hardware point) with ``n`` local worker
    processes on ``request.storage``; the joint front read back from the store, the reports."""
    from plena_opt.search.workers.codesign_workers import codesign_from_storage

    if not 1 <= n <= MAX_LOCAL_WORKERS:
        raise PlenaInputError("workers", f"--workers must be 1..{MAX_LOCAL_WORKERS}, got {n}")
    info = prepare_codesign_workers(request, design_space, max_cost)
    reports = _spawn(request.storage, info.study, n, heartbeat_s, 0.0)
    return codesign_from_storage(str(request.storage), info.study), reports
