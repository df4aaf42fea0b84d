"""``plena-opt worker``: join a study's search as one worker process (issue 17).

The study and its work queue are created by ``plena-opt search --workers N --storage URL …``
(N may be 0: create the queue and let workers on other machines score it). A worker claims
chunks of plans through the store until none is left, scores them and stores them as the queue
says (``--store-plans``: each chunk's fronts as trials and every plan on the chunk, or one trial
per plan).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from plena_opt.cli.commands import help_of
from plena_opt.cli.conventions import ENV_STORAGE, env_default
from plena_opt.errors import PlenaInputError

# A chunk is stale after 3 silent heartbeats: beyond an hour a dead worker's chunk would wait
# half a day. The throttle is a benchmark's stand-in for a slower evaluator (a minute per plan
# at most).
MAX_HEARTBEAT_S = 3600.0
MAX_THROTTLE_MS = 60_000.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("worker", help=help_of("worker"), description=__doc__.splitlines()[0])
    p.add_argument(
        "--storage",
        default=None,
        help="the study's RDB URL, e.g. postgresql://user@host/db, or a gRPC storage proxy "
        f"grpc://host:port (plena-opt storage-proxy) (default: ${ENV_STORAGE})",
    )
    p.add_argument("--study", required=True, help="the study to join")
    p.add_argument(
        "--heartbeat",
        type=float,
        default=None,
        metavar="S",
        help="seconds between heartbeats; a chunk silent for 3 heartbeats is retried elsewhere "
        "(default 5)",
    )
    p.add_argument(
        "--throttle-ms",
        type=float,
        default=0.0,
        help="extra ms per scored plan (benchmarks: stand-in for a slower evaluator; default 0)",
    )
    p.add_argument("--json", action="store_true", help="print the worker's report as JSON")
    p.set_defaults(func=handle, storage=env_default(ENV_STORAGE))
    x = subparsers.add_parser(
        "storage-proxy",
        help=help_of("storage-proxy"),
        description="Run Optuna's gRPC storage proxy in front of an RDB store: workers then use "
        "--storage grpc://HOST:PORT and the database sees one client instead of hundreds.",
    )
    x.add_argument("--storage", default=None, help=f"the RDB URL (default: ${ENV_STORAGE})")
    x.add_argument("--host", default="localhost", help="address to listen on (default localhost)")
    x.add_argument("--port", type=int, default=13000, help="port to listen on (default 13000)")
    x.set_defaults(func=handle_proxy, storage=env_default(ENV_STORAGE))


def handle_proxy(args: argparse.Namespace) -> int:
    from plena_opt.api.studies import serve_proxy

    if args.storage is None:
        raise PlenaInputError("storage", f"--storage is required (or set ${ENV_STORAGE})")
    if not 0 < args.port < 65536:
        raise PlenaInputError("port", "--port must be 1..65535")
    print(f"gRPC storage proxy for {args.storage} on {args.host}:{args.port}", file=sys.stderr)
    try:
        serve_proxy(args.storage, args.host, args.port)
    except KeyboardInterrupt:
        return 0
    return 0


def handle(args: argparse.Namespace) -> int:
    import optuna

    from plena_opt import api

    if args.storage is None:
        raise PlenaInputError("storage", f"--storage is required (or set ${ENV_STORAGE})")
    if args.heartbeat is not None and not 1 <= args.heartbeat <= MAX_HEARTBEAT_S:
        raise PlenaInputError(
            "heartbeat", f"--heartbeat must be between 1 and {MAX_HEARTBEAT_S:g} s"
        )
    if not 0 <= args.throttle_ms <= MAX_THROTTLE_MS:  # nan fails both comparisons
        raise PlenaInputError(
            "throttle_ms", f"--throttle-ms must be between 0 and {MAX_THROTTLE_MS:g} ms"
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rep = api.run_worker(args.storage, args.study, args.heartbeat, args.throttle_ms / 1000)
    if args.json:
        print(json.dumps(asdict(rep)))
    else:
        print(
            f"worker done: study {rep.study}: {rep.chunks} chunks, {rep.plans_scored} plans "
            f"scored, {rep.stale_failed} stale chunks retried, {rep.elapsed_s:.1f} s"
        )
    return 0


def check_store_plans(args: argparse.Namespace) -> None:
    """``--store-plans`` belongs to a plan search on workers (a co-design stores each hardware
    point's front whatever it says)."""
    if args.store_plans is None:
        return
    if args.workers is None:
        raise PlenaInputError("store_plans", "--store-plans needs --workers")
    if args.design_space is not None:
        raise PlenaInputError(
            "store_plans",
            "--store-plans is for plan searches; --design-space stores each "
            "hardware point's plan front",
        )


def search_with_workers(request: Any, args: argparse.Namespace) -> Any:
    """``search --workers N``: score the study with N local workers; the request that then reads
    the stored front (exhaustive: every plan is reused). N = 0: only create the study's queue
    (workers on other machines score it) and return None. ``--store-plans`` default: front."""
    from plena_opt import api

    n, quiet, store_plans = args.workers, args.quiet, args.store_plans or "front"
    if n < 0:
        raise PlenaInputError("workers", "--workers must be at least 0")
    if n == 0:
        info = api.prepare_workers(request, store_plans=store_plans)
        print(
            f"study {info.study}: {info.enqueued} chunks of {info.chunk_plans} plans queued "
            f"({info.legal_points} plans); start workers with: plena-opt worker --storage "
            f"{request.storage} --study {info.study}"
        )
        return None
    info, reports = api.run_local_workers(request, n, store_plans=store_plans)
    report_dead_workers(reports, n)
    if not quiet:
        scored = sum(r["plans_scored"] for r in reports)
        print(f"{n} workers scored {scored} plans of {info.legal_points}", file=sys.stderr)
    return request.model_copy(update={"sampler": "exhaustive", "study": info.study})


def report_dead_workers(reports: list[dict], n: int) -> None:
    """A warning on stderr per local worker process that died while the others finished."""
    from plena_opt.api.workers import died

    dead = [r for r in reports if r.get("exit_code")]
    for r in dead:
        print(
            f"warning: worker {r['worker']} of {n} {died(r['exit_code'])} (exit code "
            f"{r['exit_code']}); the other {n - len(dead)} finished the study (every chunk "
            "scored, a dead worker's chunk retried)",
            file=sys.stderr,
        )
