"""Where one PostgreSQL saturates under many workers (issue 17): storage cost per chunk and per
plan with N concurrent writer processes whose evaluator is a sleep (it needs no CPU).

Each writer does exactly a worker's storage calls (``plena_opt.search.workers.workers``: stale
check, claim, heartbeat, one bulk write of the chunk's plan trials, complete), with ``--think-ms``
of sleep per plan standing in for the evaluator. Measured per N: aggregate plans/s, client-side
storage seconds per chunk, the bulk write alone (it holds the study-row lock: the serial part),
and PostgreSQL's server CPU seconds per chunk (its processes' /proc times). The projection model
(benchmarks/README.md, "17 saturation") is computed from these inputs.

Run: ``PLENA_OPT_TEST_POSTGRES=postgresql://postgres@127.0.0.1:PORT/db .venv/bin/python
benchmarks/bench_workers_storage.py [--writers 1,2,4,8,16 --seconds 8]`` (as root, or as the
server's owner, for the /proc times).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
import uuid

import optuna
import psycopg
from optuna.trial import TrialState

from plena_opt.api import workers as aw
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.run.runner import _default_factory
from plena_opt.search.run.session import _Search
from plena_opt.search.storage.rdb_bulk import add_finished_trials
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.storage.trials import record_trial
from plena_opt.search.workers import workers

PROBLEM = ProblemSpec(model="gpt-oss-20b", noc="illustrative_gpu_node_8", input_seq=256,
                      output_seq=8)  # fmt: skip


def _database(base: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def _pg_cpu_s() -> float:
    """CPU seconds used so far by every postgres process (user + system)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)
            if "postgres" not in fields[0]:
                continue
            parts = fields[1].split()
            total += (int(parts[11]) + int(parts[12])) / tick
        except (OSError, IndexError):
            continue
    return total


def _trials(chunk: int) -> list:
    """One chunk of real plan trials (as a worker writes them)."""
    req = SearchRequest(problem=PROBLEM, batch_sizes=[4, 16, 64], sampler="exhaustive")
    s = _Search(req, _default_factory(req), None, None)
    s.open_study()
    batch, prec = s.groups()[0]
    pts = [p for p in s.space.points if p.batch_size == batch and p.precision == prec]
    recs = s.score((pts * (chunk // len(pts) + 1))[:chunk])
    return [record_trial(r, s.writer.dists, -1) for r in recs]


def _writer(url: str, chunk: int, think_s: float, seconds: float, q, go, stop, relist) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    queue = optuna.load_study(study_name="q", storage=open_storage(url, heartbeat_s=5))
    study = optuna.load_study(study_name="s", storage=open_storage(url))
    trials, claimer = _trials(chunk), workers.Claimer(queue, 5.0)
    done, storage_s, write_s = 0, 0.0, 0.0
    q.put("ready")
    go.wait()
    until = time.time() + seconds
    while time.time() < until:
        t0 = time.perf_counter()
        if relist:  # before: the stale check and the whole waiting list at every claim
            workers._fail_stale(queue, 5.0)
        else:
            claimer.fail_stale()
        if relist:
            claimer._todo = []
        t = claimer.claim()
        if t is None:
            break
        with workers._Heartbeat(queue._storage, t._trial_id, 5.0):
            t1 = time.perf_counter()
            time.sleep(think_s)  # the evaluator
            t2 = time.perf_counter()
            add_finished_trials(study, [copy.deepcopy(x) for x in trials])
            t3 = time.perf_counter()
        queue._storage.set_trial_state_values(t._trial_id, TrialState.COMPLETE, [chunk])
        storage_s += (t1 - t0) + (time.perf_counter() - t2)
        write_s += t3 - t2
        done += 1
    q.put((done, storage_s, write_s))
    stop.wait()  # keep the connections (their server processes) until their CPU time is read


def run(base: str, n: int, chunk: int, think_ms: float, seconds: float, relist: bool) -> dict:
    url = _database(base)
    storage = open_storage(url)
    optuna.create_study(study_name="s", storage=storage, directions=["minimize"] * 3)
    queue = optuna.create_study(study_name="q", storage=storage)
    dist = optuna.distributions.IntDistribution(0, 100_000)
    add_finished_trials(queue, [
        optuna.trial.create_trial(state=TrialState.WAITING, params={"chunk": c},
                                  distributions={"chunk": dist})
        for c in range(int(n * seconds * 20) + 50)
    ])  # fmt: skip  # more chunks than the writers can take in ``seconds``
    ctx = aw._context()
    q, go, stop = ctx.Queue(), ctx.Event(), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, chunk, think_ms * chunk / 1e3, seconds, q,
                                               go, stop, relist)) for _ in range(n)]  # fmt: skip
    for p in procs:
        p.start()
    assert [q.get(timeout=300) for _ in procs] == ["ready"] * n  # all set up: start the clock
    cpu0, t0 = _pg_cpu_s(), time.perf_counter()
    go.set()
    out = [q.get(timeout=seconds + 120) for _ in procs]
    wall, pg_cpu = time.perf_counter() - t0, _pg_cpu_s() - cpu0
    stop.set()
    for p in procs:
        p.join()
    chunks = sum(o[0] for o in out)
    return {
        "claim": "read per claim" if relist else "read once",
        "writers": n, "chunks": chunks, "plans_per_s": round(chunks * chunk / wall, 1),
        "storage_ms_per_chunk": round(1e3 * sum(o[1] for o in out) / chunks, 1),
        "bulk_write_ms_per_chunk": round(1e3 * sum(o[2] for o in out) / chunks, 1),
        "pg_cpu_ms_per_chunk": round(1e3 * pg_cpu / chunks, 1),
        "load": round(os.getloadavg()[0], 1),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", default="1,2,4,8,16")
    ap.add_argument("--chunk", type=int, default=workers.CHUNK_PLANS)
    ap.add_argument("--think-ms", type=float, default=2.75, help="evaluator ms per plan (sleep)")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument(
        "--compare", action="store_true", help="also the per-claim stale check and queue read"
    )
    args = ap.parse_args()
    base = os.environ["PLENA_OPT_TEST_POSTGRES"]
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for n in args.writers.split(","):  # before (--compare) and after side by side
        for relist in (True, False) if args.compare else (False,):
            r = run(base, int(n), args.chunk, args.think_ms, args.seconds, relist)
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
