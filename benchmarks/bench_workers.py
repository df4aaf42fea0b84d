"""Many workers on one study in PostgreSQL (issue 17): throughput with 1, 2, 4 workers and
storage round-trips per evaluated plan.

Run: ``PLENA_OPT_TEST_POSTGRES=postgresql://user@host/db .venv/bin/python
benchmarks/bench_workers.py`` (``.ci/postgres.sh start DIR`` starts a throwaway server). Each run
uses a fresh database; figures in benchmarks/README.md ("scale out").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
import uuid

import optuna
import psycopg
from sqlalchemy import event
from sqlalchemy.engine import Engine

from plena_opt import api
from plena_opt.api import workers as aw
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search import workers
from plena_opt.search.request import SearchRequest
from plena_opt.search.storage import open_storage

_CONTEXT = aw._context
PROBLEM = ProblemSpec(model="gpt-oss-20b", noc="illustrative_gpu_node_8", input_seq=256,
                      output_seq=8)  # fmt: skip


def _database(base: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def _commits(url: str) -> int:
    db = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (db,)
        ).fetchone()
    return int(row[0])


def run(base: str, n: int, batches: list[int], throttle_ms: float, chunk: int, start: str) -> dict:
    """``n`` workers from a fresh database; ``start``: ``spawn`` (each worker imports afresh,
    as before) or ``forkserver`` (``api.workers._context``: forked from a preloaded server)."""
    if start == "spawn":
        aw._context = lambda: multiprocessing.get_context("spawn")
    else:
        aw._context = _CONTEXT
    url = _database(base)
    req = SearchRequest(problem=PROBLEM, batch_sizes=batches, storage=url, study="bench",
                        sampler="exhaustive")  # fmt: skip
    info = api.prepare_workers(req, chunk)
    c0, t0 = _commits(url), time.perf_counter()
    _, reports = api.run_local_workers(req, n, throttle_s=throttle_ms / 1000, chunk_plans=chunk)
    wall = time.perf_counter() - t0
    time.sleep(0.6)  # pg_stat_database is refreshed by the stats collector
    commits = _commits(url) - c0
    queue = optuna.load_study(study_name=workers.queue_name("bench"), storage=open_storage(url))
    chunks = queue.get_trials(deepcopy=False)
    busy = (
        max(t.datetime_complete for t in chunks) - min(t.datetime_start for t in chunks)
    ).total_seconds()  # first claim to last chunk done: without the workers' start-up
    return {
        "start": start,
        "workers": n,
        "plans": info.legal_points,
        "wall_s": round(wall, 2),
        "plans_per_s": round(info.legal_points / wall, 1),
        "steady_plans_per_s": round(info.legal_points / busy, 1),
        "transactions_per_plan": round(commits / info.legal_points, 2),
        "scored": sum(r["plans_scored"] for r in reports),
    }


def statements_per_plan(base: str, batches: list[int], chunk: int) -> float:
    """One in-process worker with SQLAlchemy's cursor events counted: SQL statements per plan."""
    url = _database(base)
    req = SearchRequest(problem=PROBLEM, batch_sizes=batches, storage=url, study="bench",
                        sampler="exhaustive")  # fmt: skip
    info = api.prepare_workers(req, chunk)
    count = [0]

    def counted(*_a: object) -> None:
        count[0] += 1

    event.listen(Engine, "before_cursor_execute", counted)  # every engine of this process
    try:
        workers.run_worker(url, "bench")
    finally:
        event.remove(Engine, "before_cursor_execute", counted)
    return count[0] / info.legal_points


FIRST: dict[str, dict] = {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--model", default="gpt-oss-20b")
    ap.add_argument("--noc", default="illustrative_gpu_node_8")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--throttle-ms", type=float, default=0.0)
    ap.add_argument("--chunk", type=int, default=workers.CHUNK_PLANS)
    ap.add_argument("--start", default="spawn,forkserver", help="worker start methods compared")
    args = ap.parse_args()
    base = os.environ["PLENA_OPT_TEST_POSTGRES"]
    batches = [int(b) for b in args.batches.split(",")]
    global PROBLEM
    PROBLEM = ProblemSpec(model=args.model, noc=args.noc, input_seq=256, output_seq=8)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for n in args.workers.split(","):  # start methods side by side at each worker count
        for start in args.start.split(","):
            r = run(base, int(n), batches, args.throttle_ms, args.chunk, start)
            first = FIRST.setdefault(start, r)
            r["speedup"] = round(r["plans_per_s"] / first["plans_per_s"], 2)
            r["steady_speedup"] = round(r["steady_plans_per_s"] / first["steady_plans_per_s"], 2)
            r["load"] = round(os.getloadavg()[0], 1)
            print(json.dumps(r), flush=True)
    print(
        f"SQL statements per plan (1 worker): {statements_per_plan(base, batches, args.chunk):.1f}"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
