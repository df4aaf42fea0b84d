"""Evaluator speed and memory (issue 4 targets).

llama-3.1-70b on ``illustrative_gpu_cluster_32`` with the fictional stacked DRAM, batch 16,
input 2048, output 1024, one core:

* ``plans_per_second``: every legal plan through ``Evaluator.evaluate_batch`` on a fresh evaluator
  (its layer and collective caches empty), median of 5 runs; the routed NoC patterns are shared
  by the evaluators of a thread, so ``first_in_process_plans_per_second`` (the first run,
  routing included) is reported too, and ``warm_plans_per_second`` scores the same plans again;
* ``plans_per_cpu_second`` / ``warm_plans_per_cpu_second``: the same by CPU time of the process
  (runs 2–5; the fair figure when other work shares the cores);
* ``output_len_ratio_32768_over_16``: time of one fresh estimate (tp8 pp4) at output 32768 over
  output 16, each the median of 7 runs, measured side by side;
* ``peak_rss_bytes``: peak resident memory of a child process that scores a 10,000-plan batch
  (the legal plans repeated) and keeps every result.

``python benchmarks/bench_evaluator.py --json`` prints one JSON object. ``--compare DIR
[--repeats N]`` measures the plans/s figures of checkout DIR ("before") and of this one
("after") in alternating child processes, N pairs, and prints every pair, the medians, their
ratios and the load average before and after (``benchmarks/_compare.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _compare  # benchmarks/ is the script's folder
from deepstack import load_noc_profile

from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.memory import load_memory
from plena_opt.models import load_model

MODEL, NOC, MEMORY = "llama-3.1-70b", "illustrative_gpu_cluster_32", "fictional_stacked_dram"


def make_evaluator(output_seq_len: int = 1024) -> Evaluator:
    return Evaluator(
        load_model(MODEL),
        load_noc_profile(NOC),
        load_memory(MEMORY),
        Workload(batch_size=16, input_seq_len=2048, output_seq_len=output_seq_len),
    )


def plans_per_second(runs: int = 5) -> tuple[float, int, float, float, float, float]:
    """(fresh, plans, warm, first in process, fresh by CPU time, warm by CPU time) plans/s."""
    cold, warm, cold_cpu, warm_cpu = [], [], [], []
    n = 0
    for _ in range(runs):
        ev = make_evaluator()
        plans = ev.legal_plans()
        n = len(plans)
        t, c = time.perf_counter(), time.process_time()
        ev.evaluate_batch(plans)
        cold.append(time.perf_counter() - t)
        cold_cpu.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        ev.evaluate_batch(plans)
        warm.append(time.perf_counter() - t)
        warm_cpu.append(time.process_time() - c)
    # cold[0] is the first evaluator of the process: it also routes every collective pattern
    # (later evaluators of the same thread share the routed NoC patterns).
    med = statistics.median
    return (
        n / med(cold),
        n,
        n / med(warm),
        n / cold[0],
        n / max(med(cold_cpu[1:]), 1e-9),
        n / max(med(warm_cpu[1:]), 1e-9),
    )


def one_estimate_seconds(output_seq_len: int, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        ev = make_evaluator(output_seq_len)
        t = time.perf_counter()
        ev.evaluate(Plan(tp=8, pp=4))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def batch_peak_rss(n_plans: int = 10_000) -> int:
    code = (
        "import resource, sys; sys.path.insert(0, 'benchmarks');"
        "from bench_evaluator import make_evaluator;"
        "ev = make_evaluator(); plans = ev.legal_plans();"
        f"batch = (plans * ({n_plans} // len(plans) + 1))[:{n_plans}];"
        "res = ev.evaluate_batch(batch); assert len(res) == len(batch);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


RATE_KEYS = ("plans_per_second", "plans_per_cpu_second", "warm_plans_per_second")


def rates() -> dict:
    """The plans/s figures of ``plans_per_second`` (one child's row)."""
    pps, n, warm_pps, _, cpu_pps, _ = plans_per_second()
    return {
        "plans_per_second": round(pps, 1),
        "plans_per_cpu_second": round(cpu_pps, 1),
        "warm_plans_per_second": round(warm_pps, 1),
        "plans": n,
    }


def run_child(source: str | None) -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    with tempfile.TemporaryDirectory() as cwd:  # keep the checkout's cwd off sys.path
        out = subprocess.run(
            _compare.command(str(Path(__file__).resolve()), ["--child"]),
            capture_output=True,
            text=True,
            env=_compare.env(source, env),
            cwd=cwd,
            check=True,
            timeout=300,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(source: str, repeats: int) -> dict:
    """Alternating before/after children; medians and after/before ratios."""
    load = [os.getloadavg()]
    pairs = []
    for _ in range(repeats):
        pair = {"before": run_child(source), "after": run_child(None)}
        pairs.append(pair)
        print(json.dumps(pair), file=sys.stderr)
    load.append(os.getloadavg())
    med = {
        side: {k: statistics.median(p[side][k] for p in pairs) for k in RATE_KEYS}
        for side in ("before", "after")
    }
    ratios = {k: round(med["after"][k] / med["before"][k], 3) for k in RATE_KEYS}
    return {"pairs": pairs, "median": med, "ratio": ratios, "loadavg": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--compare", help="also measure this checkout, as 'before'")
    parser.add_argument("--repeats", type=int, default=5, help="before/after pairs (--compare)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(rates() | {"source": _compare.source_of()}))
        return
    if args.compare:
        print(json.dumps(compare(args.compare, args.repeats)))
        return
    pps, n, warm_pps, first_pps, cpu_pps, cpu_warm = plans_per_second()
    t16 = one_estimate_seconds(16)
    t32k = one_estimate_seconds(32768)
    t16_again = one_estimate_seconds(16)
    t16 = min(t16, t16_again)
    result = {
        "plans_per_second": round(pps, 1),
        "plans": n,
        "warm_plans_per_second": round(warm_pps, 1),
        "first_in_process_plans_per_second": round(first_pps, 1),
        "plans_per_cpu_second": round(cpu_pps, 1),
        "warm_plans_per_cpu_second": round(cpu_warm, 1),
        "estimate_seconds_output_16": t16,
        "estimate_seconds_output_32768": t32k,
        "output_len_ratio_32768_over_16": round(t32k / t16, 3),
        "peak_rss_bytes": batch_peak_rss(),
        "self_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:32} {v}")


if __name__ == "__main__":
    main()
