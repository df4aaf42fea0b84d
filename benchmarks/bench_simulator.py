"""Monte Carlo simulator speed and memory: 8,192 ops × 10,000 samples (target < 2 s, < 1 GiB).

Run: ``.venv/bin/python benchmarks/bench_simulator.py [--samples N] [--no-criticality]``.
Plan: 1F1B with pp=8 and 512 micro-batches (8 ranks × 1,024 ops = 8,192 ops), lognormal jitter
σ=0.05 plus a per-rank factor σ=0.03. Reports wall time of the Monte Carlo pass (sampling
included, plan building and the deterministic timeline excluded) and the peak resident memory of
the process (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from plena_opt.pipeline import build_schedule
from plena_opt.pipeline.simulator import build_graph, simulate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=512)
    ap.add_argument("--no-criticality", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    plan = build_schedule("1f1b", args.pp, args.microbatches)
    t0 = time.perf_counter()
    graph = build_graph(plan)
    t_graph = time.perf_counter() - t0
    dur = {"F": 1.0, "B": 2.0}
    t0 = time.perf_counter()
    simulate(plan, dur, graph=graph)
    t_det = time.perf_counter() - t0
    best = cpu_best = float("inf")
    for _ in range(args.repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        res = simulate(
            plan,
            dur,
            noise="sigma=0.05,rank=0.03",
            samples=args.samples,
            seed=0,
            criticality=not args.no_criticality,
            graph=graph,
        )
        best = min(best, time.perf_counter() - t0)
        cpu_best = min(cpu_best, time.process_time() - c0)
    mc_time = best - t_det  # simulate() also rebuilds the deterministic + representative timelines
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ops={plan.n_ops} samples={args.samples} criticality={not args.no_criticality}")
    print(f"graph build {t_graph:.3f} s; deterministic timeline {t_det:.3f} s")
    print(
        f"simulate() best of {args.repeat}: wall {best:.3f} s, CPU {cpu_best:.3f} s "
        f"(Monte Carlo part ≈ {mc_time:.3f} s wall)"
    )
    print(f"load average (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        f"makespan det {res.makespan:.1f}, MC mean {res.mc.makespan.mean:.2f}, "
        f"p99 {res.mc.makespan.p99:.2f}"
    )
    print(f"peak RSS {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
