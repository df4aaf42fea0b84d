"""Monte Carlo simulator speed and memory: 8,192 ops × 10,000 samples (target < 2 s, < 1 GiB).

Run: ``.venv/bin/python benchmarks/bench_simulator.py [--samples N] [--no-criticality] [--phases]``.
Plan: 1F1B with pp=8 and 512 micro-batches (8 ranks × 1,024 ops = 8,192 ops), lognormal jitter
σ=0.05 plus a per-rank factor σ=0.03. Reports wall time of the Monte Carlo pass (sampling
included, plan building and the deterministic timeline excluded) and the peak resident memory of
the process (``ru_maxrss``). ``--phases`` adds the CPU time of each stage of the Monte Carlo pass
(noise sampling, longest path with binding slots, criticality walk), block by block as in
``simulate()``.

Memory at scale (issue 15): ``--pp 64 --microbatches 8192 --samples 1000 --repeat 1`` is a
1F1B plan of 1,048,576 ops; ``--pp 64 --microbatches 2048`` one of 262,144 ops.

``--part recheck``: the re-check of ``plena-opt search`` at 4,096 devices: the
``benchmarks/bench_scale.py`` switch hierarchy (4,096 devices), llama-3.1-70b on
fictional_stacked_dram, default workload; the 5 legal plans of highest analytic TPS are
re-checked (``recheck_plans``, 1,000 samples, the CLI's default noise); prints the re-check wall
time, the peak RSS and every plan's analytic vs simulated TPS as one JSON object.

``--compare DIR`` runs the same measurement on another checkout first (e.g. ``git archive`` of
the merge base), each in a fresh interpreter, so before and after come from one run.
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
import numpy as np

from plena_opt.simulator import build_schedule
from plena_opt.simulator.engine import NoiseSampler, build_graph, parse_noise, simulate
from plena_opt.simulator.engine.dependencies import DependencyGraph
from plena_opt.simulator.engine.longest_path import (
    binding_dtype,
    build_layout,
    critical_counts,
    end_times,
)
from plena_opt.simulator.engine.noise import SAMPLE_BLOCK
from plena_opt.simulator.engine.run import base_durations

NOISE = "sigma=0.05,rank=0.03"


def phases(graph: DependencyGraph, dur: dict[str, float], samples: int) -> dict[str, float]:
    """CPU seconds per stage of the Monte Carlo pass (the steps of ``engine._monte_carlo``)."""
    plan = graph.plan
    t: dict[str, float] = {"sample": 0.0, "longest path": 0.0, "criticality walk": 0.0}
    layout = build_layout(graph)
    sampler = NoiseSampler(plan, parse_noise(NOISE), 0)
    base = base_durations(plan, dur)
    buffers: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for block in range(-(-samples // SAMPLE_BLOCK)):
        n = min(SAMPLE_BLOCK, samples - block * SAMPLE_BLOCK)
        if n not in buffers:  # allocated once per block width, as in simulate()
            d = np.empty((layout.n_rows, n), dtype=np.float32)
            buffers[n] = (d, np.empty_like(d), np.zeros(d.shape, dtype=binding_dtype(layout)))
        d, end, bind = buffers[n]
        c0 = time.process_time()
        sampler.durations(block, n, base, out=d[: plan.n_ops], row_of=layout.row_of)
        c1 = time.process_time()
        end_times(layout, d, end, bind)
        c2 = time.process_time()
        critical_counts(layout, end, bind)
        c3 = time.process_time()
        t["sample"] += c1 - c0
        t["longest path"] += c2 - c1
        t["criticality walk"] += c3 - c2
    return t


def recheck_part(devices: int, top: int, samples: int) -> dict:
    """Time ``recheck_plans`` on the top-TPS plans of a ``devices``-device switch hierarchy."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_scale import MEMORY, MODEL, switch_profile

    from plena_opt.api.recheck import DEFAULT_NOISE
    from plena_opt.estimate import Evaluator, Workload
    from plena_opt.memory import load_memory
    from plena_opt.models import load_model
    from plena_opt.simulator.engine import recheck_plans

    ev = Evaluator(load_model(MODEL), switch_profile(devices), load_memory(MEMORY), Workload())
    plans = ev.legal_plans()
    scores = ev.evaluate_batch(plans)
    best = sorted(range(len(plans)), key=lambda i: -scores[i].tps)[:top]
    estimates = [ev.estimate(plans[i]).to_dict() for i in best]
    t0, c0 = time.perf_counter(), time.process_time()
    checks = recheck_plans(estimates, samples=samples, noise=DEFAULT_NOISE, seed=0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "devices": devices,
        "plans": len(checks),
        "samples": samples,
        "recheck_s": round(wall, 3),
        "recheck_cpu_s": round(cpu, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_1min": round(os.getloadavg()[0], 2),
        "tps": [
            {
                "plan": {k: c.plan[k] for k in ("tp", "dp", "pp", "cp")},
                "analytic": round(c.analytic_tps, 1),
                "simulated_zero_noise": round(c.serving.tps_deterministic, 1),
                "p50": round(c.tps_p50, 1),
            }
            for c in checks
        ],
    }


def compare(source: str, argv: list[str]) -> None:
    """Run this benchmark (``argv`` without ``--compare``) on ``source``, then on this checkout,
    each in a fresh interpreter outside both checkouts, and print both outputs."""
    here = str(Path(__file__).resolve().parents[1])
    for label, root in (("before", str(Path(source).resolve())), ("after", here)):
        with tempfile.TemporaryDirectory() as cwd:  # keep either checkout's cwd off sys.path
            out = subprocess.run(
                _compare.command(Path(__file__).resolve(), argv),
                capture_output=True,
                text=True,
                env=_compare.env(root),
                cwd=cwd,
                check=True,
            )
        print(f"== {label} ({root}; every project module imported from it)")
        print(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("mc", "recheck"), default="mc")
    ap.add_argument("--devices", type=int, default=4096, help="--part recheck: cluster size")
    ap.add_argument("--top", type=int, default=5, help="--part recheck: plans re-checked")
    ap.add_argument("--compare", metavar="DIR", help="measure checkout DIR first (before)")
    ap.add_argument("--samples", type=int, default=None, help="default 10,000 (recheck: 1,000)")
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=512)
    ap.add_argument("--no-criticality", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--phases", action="store_true", help="CPU time of each Monte Carlo stage")
    args = ap.parse_args()
    if args.compare:
        argv = sys.argv[1:]
        i = argv.index("--compare")
        compare(args.compare, argv[:i] + argv[i + 2 :])
        return
    if args.part == "recheck":
        print(json.dumps(recheck_part(args.devices, args.top, args.samples or 1000)))
        return
    args.samples = args.samples or 10_000
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
            noise=NOISE,
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
    if args.phases:
        parts = phases(graph, dur, args.samples)
        print("CPU per stage: " + ", ".join(f"{k} {v:.3f} s" for k, v in parts.items()))


if __name__ == "__main__":
    main()
