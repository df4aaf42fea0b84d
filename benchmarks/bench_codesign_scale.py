"""A co-design study of ≥ 10⁶ (hardware, plan) pairs on worker processes (issue 17): wall time,
storage size and peak memory.

``BIG`` is ``plena-stacked-dram`` with more values per knob: 4 DRAM layer counts × 4 connected
layer counts × 8 L1 link bandwidths × 6 ring sizes (16–96 devices) = 768 hardware points, with
batches 1–128 (8 sizes) 1,110,016 (hardware, plan) pairs for llama-3.1-8b. Every point's exact
plan front is computed by a worker and stored on its trial; the joint front is read back.

Run: ``PLENA_OPT_TEST_POSTGRES=postgresql://user@host/db .venv/bin/python
benchmarks/bench_codesign_scale.py --workers 2`` (a fresh database on that server; ``--storage
sqlite:///x.db`` for a file); figures in benchmarks/README.md ("17 co-design at scale").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
import uuid

import optuna

from plena_opt import api
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest
from plena_opt.search.workers.codesign_workers import codesign_from_storage

BIG = {
    "name": "plena-stacked-dram-big",
    "cost_unit": "illustrative units",
    "knobs": [
        {"name": "dram_layers", "target": "problem.total_layers", "values": [6, 8, 10, 12],
         "cost_per_unit": 2.0},
        {"name": "connected_layers", "target": "problem.connected_layers",
         "values": [1, 2, 3, 4], "cost_per_unit": 5.0},
        {"name": "l1_link_gbs", "target": "noc.layers.L1.link_bandwidth_gbytes_per_s",
         "values": [25, 50, 75, 100, 150, 200, 300, 400], "cost_per_unit": 0.05},
        {"name": "ring_groups", "target": "noc.layers.L2.shape.1",
         "values": [2, 4, 6, 8, 10, 12], "cost_per_unit": 80.0},
    ],
}  # fmt: skip
PROBLEM = ProblemSpec(model="llama-3.1-8b", noc="illustrative_ring_switch_32",
                      memory="fictional_stacked_dram", input_seq=512, output_seq=64)  # fmt: skip


def _database(base: str) -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def _size_mib(url: str) -> float:
    if url.startswith("sqlite:///"):
        return os.path.getsize(url[len("sqlite:///") :]) / 2**20
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--storage", default=None, help="default: a fresh PostgreSQL database")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--ring-groups", default=None, help="a subset of 2,4,…,12 (a smaller run)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = args.storage or _database(os.environ["PLENA_OPT_TEST_POSTGRES"])
    space = json.loads(json.dumps(BIG))
    if args.ring_groups:
        space["knobs"][3]["values"] = [int(g) for g in args.ring_groups.split(",")]
    path = os.path.join(tempfile.mkdtemp(), "big.json")
    with open(path, "w") as fh:
        json.dump(space, fh)
    req = SearchRequest(problem=PROBLEM, batch_sizes=[int(b) for b in args.batches.split(",")],
                        storage=url, study="big")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    t0 = time.perf_counter()
    res, reports = api.run_codesign_workers(req, path, args.workers)
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    codesign_from_storage(url, "big")  # the joint front read back again, on its own
    rss = {
        "parent_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "largest_worker_mib": max(r["peak_rss_mib"] for r in reports),
    }
    print(json.dumps({
        "workers": args.workers, "hardware_points": res.hardware_points,
        "evaluated_points": res.evaluated_points, "pairs_scored": res.plans_scored,
        "joint_front": len(res.front), "wall_s": round(wall, 1),
        "pairs_per_s": round(res.plans_scored / wall, 1),
        "read_back_s": round(time.perf_counter() - t1, 2),
        "storage_mib": round(_size_mib(url), 1), **{k: round(v, 1) for k, v in rss.items()},
        "worker_cpu_s": [round(r["cpu_s"], 1) for r in reports],
        "load_average": round(os.getloadavg()[0], 1),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
