"""Evaluator cost against the output length (issue 15: ≤ 2× time and memory from 16 to 1M).

llama-3.1-70b on ``illustrative_gpu_cluster_32`` with the fictional stacked DRAM (672-byte wave
quantum) and, as a second memory, a 0.9 TB/s fixed-bandwidth memory without a quantum; batch 16,
input 2048. Per output length (16, 131,072, 1,048,576) and memory, a fresh child process scores
every legal plan with ``Evaluator.evaluate_batch`` on a fresh evaluator, ``REPEATS`` times (a new
evaluator each time), and reports the median plans/s (wall and CPU time; the routed NoC patterns
are warmed with a 16-token run first, so the figure is the decode's cost) and its peak RSS.
A fourth row is the fresh evaluator of ``bench_evaluator`` (output 1024): plans/s by wall and CPU.

``--compare DIR`` measures another checkout (e.g. ``git archive main | tar -x -C DIR``) right
before this one, row by row, so before and after come from one run; ``--rounds N`` measures each
row in N child processes per side (alternating) and keeps each side's fastest by CPU time (on a
shared machine a whole process can run up to 2× slow). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _compare  # benchmarks/ is the script's folder

OUTPUTS = (16, 131_072, 1_048_576)
REPEATS = 7  # one batch of 112 plans takes 15-50 ms: a single run is too short to be stable
MODEL, NOC = "llama-3.1-70b", "illustrative_gpu_cluster_32"


def child(memory: str, output_len: int) -> dict:
    from deepstack import load_noc_profile

    from plena_opt.estimate import Evaluator, Workload
    from plena_opt.memory import FixedBandwidthMemory, load_memory
    from plena_opt.models import load_model

    def make(out: int) -> Evaluator:
        mem = (
            FixedBandwidthMemory(0.9e12, None, name="fixed")
            if memory == "fixed"
            else load_memory("fictional_stacked_dram")
        )
        w = Workload(batch_size=16, input_seq_len=2048, output_seq_len=out)
        return Evaluator(load_model(MODEL), load_noc_profile(NOC), mem, w)

    warm = make(16)  # routes the NoC patterns (shared by the thread's evaluators)
    warm.evaluate_batch(warm.legal_plans())
    walls, cpus, n = [], [], 0
    for _ in range(REPEATS):
        ev = make(output_len)
        plans = ev.legal_plans()
        wall, cpu = time.perf_counter(), time.process_time()
        results = ev.evaluate_batch(plans)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert len(results) == len(plans)
        n = len(plans)
    return {
        "memory": memory,
        "output_len": output_len,
        "plans": n,
        "repeats": REPEATS,
        "plans_per_s": round(n / sorted(walls)[REPEATS // 2], 1),
        "plans_per_cpu_s": round(n / sorted(cpus)[REPEATS // 2], 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def child_fresh() -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_evaluator import make_evaluator

    make_evaluator().evaluate_batch(make_evaluator().legal_plans())  # route the NoC patterns
    walls, cpus, n = [], [], 0
    for _ in range(5):
        ev = make_evaluator()
        plans = ev.legal_plans()
        n = len(plans)
        wall, cpu = time.perf_counter(), time.process_time()
        ev.evaluate_batch(plans)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    walls.sort()
    cpus.sort()
    return {
        "fresh_evaluator": True,
        "plans": n,
        "plans_per_s": round(n / walls[2], 1),
        "plans_per_cpu_s": round(n / cpus[2], 1),
    }


def run_child(args: list[str], source: str | None) -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # one core per process, as every benchmark here
    script = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory() as cwd:  # keep the checkout's cwd off sys.path
        out = subprocess.run(
            _compare.command(script, ["--child", *args]),
            capture_output=True,
            text=True,
            env=_compare.env(source, env),
            cwd=cwd,
            check=True,
            timeout=900,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def fastest(rows: list[dict]) -> dict:
    """The row of the child that ran fastest by CPU time, with how many were measured."""
    return max(rows, key=lambda r: r["plans_per_cpu_s"]) | {"rounds": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--compare", help="also measure this checkout, row by row, as 'before'")
    parser.add_argument("--memories", default="stacked,fixed")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each row in this many child processes (before and after alternating) and "
        "keep each side's fastest by CPU time: a process sharing its core runs slow throughout",
    )
    args = parser.parse_args()
    if args.child:
        row = (
            child_fresh() if args.child == ["fresh"] else child(*args.child[:1], int(args.child[1]))
        )
        print(json.dumps(row | {"source": _compare.source_of()}))
        return
    jobs = [[m, str(n)] for m in args.memories.split(",") for n in OUTPUTS] + [["fresh"]]
    rows = []
    for job in jobs:
        before, after = [], []
        for _ in range(max(args.rounds, 1)):
            if args.compare:
                before.append(run_child(job, args.compare))
            after.append(run_child(job, None))
        row = ({"before": fastest(before)} if before else {}) | {"after": fastest(after)}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
