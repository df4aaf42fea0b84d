"""Many workers on one study in PostgreSQL (issue 17): aggregate throughput with 1, 2, 4 workers
in both storage modes (``--store-plans all``: a trial per plan; ``front``: each chunk's fronts as
trials and every plan's metrics on the chunk), side by side in one run, with the real evaluator.

Per run (a fresh database each): steady plans/s (the queue's first claim to its last chunk
done, without the workers' start-up), busy plans/s (each worker's plans over its own first
claim to last chunk, summed), wall plans/s, worker CPU (evaluator per plan, start-up, storage
per chunk), PostgreSQL server CPU (its postmaster's process tree in /proc, exited backends
included), transactions per plan (``pg_stat_database``), trials stored, the load average.
Then SQL statements per plan of one in-process worker per mode. Prints one line per run and,
last, one JSON object with every figure and the ratios (benchmarks/README_workers.md).

Run: ``export PGPORT=54391 && source .ci/postgres.sh start /tmp/pg-bench`` then
``.venv/bin/python benchmarks/bench_workers.py`` (as root or the server's owner, for /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid

import optuna
import psycopg
from sqlalchemy import event
from sqlalchemy.engine import Engine

from plena_opt import api
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.storage.storage import open_storage
from plena_opt.search.workers import workers

MODELS = "llama-3.1-70b,qwen3-235b-a22b"  # 112 and 182 plans per batch size on 32 H200s
NOC, CHIP = "illustrative_gpu_cluster_32", "h200-sxm"
# Every batch size 1–64: 7,168 and 11,648 plans, seconds of work per worker, so the workers'
# start-up (≈ 0.3 s apart) does not decide the ratio (``--batches 1,2,4,…,128``: last round's
# 896 / 1,456 plans, a fraction of a second in front mode).
BATCHES = list(range(1, 65))


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


def _postmaster(base: str) -> int:
    """The server's postmaster: the parent of this connection's backend."""
    with psycopg.connect(base, autocommit=True) as conn:
        return _ppid(int(conn.execute("SELECT pg_backend_pid()").fetchone()[0]))


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def _ppid(pid: int) -> int:
    return int(_stat(pid)[1])


def _pg_cpu_s(postmaster: int) -> float:
    """CPU seconds of this server: its postmaster (with its reaped children: exited backends)
    and its live children. Other servers on the machine are not counted."""
    tick = os.sysconf("SC_CLK_TCK")
    f = _stat(postmaster)
    total = sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            g = _stat(int(pid))
        except OSError:
            continue
        if int(g[1]) == postmaster:
            total += (int(g[11]) + int(g[12])) / tick
    return total


def run(
    base: str, pm: int, problem: ProblemSpec, n: int, mode: str, chunk: int | None, throttle: float
) -> dict:
    """``n`` local workers in ``mode`` on a fresh database (``throttle`` s of sleep per plan:
    a slower evaluator's stand-in); the run's figures."""
    url = _database(base)
    req = SearchRequest(problem=problem, batch_sizes=BATCHES, storage=url, study="bench",
                        sampler="exhaustive")  # fmt: skip
    info = api.prepare_workers(req, chunk, mode)
    c0, pg0, t0 = _commits(url), _pg_cpu_s(pm), time.perf_counter()
    _, reports = api.run_local_workers(req, n, throttle_s=throttle, store_plans=mode)
    wall = time.perf_counter() - t0
    # the workers' backends exit after them: wait until the postmaster has reaped them (else
    # one is in neither its children nor its reaped times); pg_stat_database also lags
    time.sleep(1.0)
    pg = _pg_cpu_s(pm) - pg0
    commits = _commits(url) - c0
    storage = open_storage(url)
    queue = optuna.load_study(study_name=workers.queue_name("bench"), storage=storage)
    chunks = queue.get_trials(deepcopy=False)
    window = (
        max(t.datetime_complete for t in chunks) - min(t.datetime_start for t in chunks)
    ).total_seconds()  # first claim to last chunk done: without the workers' start-up
    stored = len(optuna.load_study(study_name="bench", storage=storage).get_trials(deepcopy=False))
    plans, cpu = info.legal_points, sum(r["cpu_s"] for r in reports)
    score = sum(r["score_cpu_s"] for r in reports)
    setup = sum(r["setup_cpu_s"] for r in reports)
    # each worker's rate from its first claim to its last chunk, summed: the aggregate while
    # all run (the queue window below also counts one worker's start-up lag behind another)
    busy = sum(r["plans_scored"] / r["busy_s"] for r in reports if r["busy_s"] > 0)
    return {
        "model": problem.model, "mode": mode, "workers": n, "plans": plans,
        "chunk_plans": info.chunk_plans, "chunks": len(chunks), "trials_stored": stored,
        "wall_s": round(wall, 2), "plans_per_s": round(plans / wall, 1),
        "steady_plans_per_s": round(plans / window, 1), "busy_plans_per_s": round(busy, 1),
        "worker_cpu_ms_per_plan": round(1e3 * cpu / plans, 3),
        "evaluator_cpu_ms_per_plan": round(1e3 * score / plans, 3),
        "setup_cpu_s_per_worker": round(setup / n, 3),
        "storage_cpu_ms_per_chunk": round(1e3 * (cpu - score - setup) / len(chunks), 1),
        "pg_cpu_ms_per_plan": round(1e3 * pg / plans, 3),
        "pg_cpu_ms_per_chunk": round(1e3 * pg / len(chunks), 1),
        "transactions_per_plan": round(commits / plans, 3),
        "scored": sum(r["plans_scored"] for r in reports),
        "load": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def statements_per_plan(base: str, problem: ProblemSpec, mode: str) -> dict:
    """One in-process worker with SQLAlchemy's cursor events counted: SQL statements per plan,
    and the wall and CPU ms of the write that holds the study-row lock, per chunk (``all``: the
    bulk write of its plan trials; ``front``: the transaction that completes it)."""
    url = _database(base)
    req = SearchRequest(problem=problem, batch_sizes=BATCHES, storage=url, study="bench",
                        sampler="exhaustive")  # fmt: skip
    info = api.prepare_workers(req, store_plans=mode)
    count, held = [0], []
    name = "complete_chunk" if mode == "front" else "add_finished_trials"
    inner = getattr(workers, name)

    def counted(*_a: object) -> None:
        count[0] += 1

    def timed(*a: object, **k: object) -> object:
        w, c = time.perf_counter(), time.process_time()
        out = inner(*a, **k)
        held.append((time.perf_counter() - w, time.process_time() - c))
        return out

    event.listen(Engine, "before_cursor_execute", counted)  # every engine of this process
    setattr(workers, name, timed)
    try:
        workers.run_worker(url, "bench")
    finally:
        event.remove(Engine, "before_cursor_execute", counted)
        setattr(workers, name, inner)
    return {
        "statements_per_plan": round(count[0] / info.legal_points, 3),
        "chunk_plans": info.chunk_plans,
        "locked_write_wall_ms": round(1e3 * statistics.median(w for w, _ in held), 2),
        "locked_write_cpu_ms": round(1e3 * statistics.median(c for _, c in held), 2),
    }


def _medians(rows: list[dict], key: str) -> dict[tuple[str, str, int], float]:
    """The median of ``key`` over the repeats of each (model, mode, workers)."""
    groups: dict[tuple[str, str, int], list[float]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["mode"], r["workers"]), []).append(r[key])
    return {k: statistics.median(v) for k, v in groups.items()}


def _ratios(rows: list[dict], key: str) -> dict:
    """Median ``key`` at N workers over the median at 1, per model and mode (and the median
    rates themselves under ``plans_per_s``)."""
    med = _medians(rows, key)
    out: dict = {}
    for (model, mode, n), v in sorted(med.items()):
        d = out.setdefault(model, {}).setdefault(mode, {"plans_per_s": {}, "ratio": {}})
        d["plans_per_s"][str(n)] = round(v, 1)
        d["ratio"][str(n)] = round(v / med[(model, mode, 1)], 2)
    return out


def _flat(rows: list[dict], key: str) -> dict[str, float]:
    """Median ``key`` per ``model/mode/workers``."""
    return {f"{m}/{mode}/{n}": round(v, 3) for (m, mode, n), v in _medians(rows, key).items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--modes", default="all,front")
    ap.add_argument("--batches", default=None, help="comma-separated (default 1..64)")
    ap.add_argument("--throttle-ms", type=float, default=0.0, help="sleep per plan (default 0)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repeats (median taken)")
    ap.add_argument("--chunk", type=int, default=None, help="plans per chunk (default: mode's)")
    args = ap.parse_args()
    base = os.environ["PLENA_OPT_TEST_POSTGRES"]
    if args.batches:
        BATCHES[:] = [int(b) for b in args.batches.split(",")]
    pm, throttle = _postmaster(base), args.throttle_ms / 1000
    load0 = os.getloadavg()
    rows = []
    for _ in range(args.repeat):  # every configuration once per round, rounds interleaved
        for model in args.models.split(","):
            problem = ProblemSpec(model=model, noc=NOC, chip=CHIP, input_seq=256, output_seq=8)
            for n in args.workers.split(","):  # the modes side by side at each worker count
                for mode in args.modes.split(","):
                    rows.append(run(base, pm, problem, int(n), mode, args.chunk, throttle))
                    print(json.dumps(rows[-1]), flush=True)
    problem = ProblemSpec(model=args.models.split(",")[0], noc=NOC, chip=CHIP, input_seq=256,
                          output_seq=8)  # fmt: skip
    statements = {m: statements_per_plan(base, problem, m) for m in args.modes.split(",")}
    print(json.dumps({
        "load_start": load0, "load_end": os.getloadavg(), "cpus": os.cpu_count(),
        "repeats": args.repeat, "medians_of": "repeats",
        "steady": _ratios(rows, "steady_plans_per_s"),
        "busy": _ratios(rows, "busy_plans_per_s"),
        "wall": _ratios(rows, "plans_per_s"),
        "worker_cpu_ms_per_plan": _flat(rows, "worker_cpu_ms_per_plan"),
        "evaluator_cpu_ms_per_plan": _flat(rows, "evaluator_cpu_ms_per_plan"),
        "storage_cpu_ms_per_chunk": _flat(rows, "storage_cpu_ms_per_chunk"),
        "pg_cpu_ms_per_plan": _flat(rows, "pg_cpu_ms_per_plan"),
        "pg_cpu_ms_per_chunk": _flat(rows, "pg_cpu_ms_per_chunk"),
        "transactions_per_plan": _flat(rows, "transactions_per_plan"),
        "one_worker_in_process": statements, "runs": rows,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
