"""Per-plan cost of a search with and without a serving workload (issue 23).

Run: ``.venv/bin/python benchmarks/bench_search_load.py`` (figures in benchmarks/README_gpu.md,
"Search under load"). Llama-3.1-70B fp8, 8k/1k, on 4×8 H100 (``hgx-h100x8@4``), every legal
plan at batch 64 (exhaustive sampler, in-memory study): the static search, then the same search
under 64 concurrent clients (vLLM, lengths ±80 %), whose per-plan cost adds each plan's steady
state (``serving.closed_loop`` on step costs from evaluators shared by the search's plans) and,
once per search, the pilot replay for the percentile ratios. Each figure is the best of 3 runs
(a fresh process state each run is not possible here: warm imports, cold evaluators), in wall
time and in CPU time (``time.process_time``); the load average is printed beside them.
"""

from __future__ import annotations

import os
import time

from plena_opt import api
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.search.request import SearchRequest

PROBLEM = ProblemSpec(model="llama-3.1-70b", noc="hgx-h100x8@4", chip="h100-sxm", input_seq=8192,
                      output_seq=1024, precision="fp8", batch_size=64)  # fmt: skip


def _run(**load: object) -> tuple[float, int, int, float]:
    """(seconds per scored plan, plans scored, plans priced under load, CPU seconds per scored
    plan) of one search."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    req = SearchRequest(problem=PROBLEM, trials=20_000, sampler="exhaustive", storage=":memory:",
                        objectives=["ttft", "tps-per-device"], **load)  # fmt: skip
    t0, c0 = time.perf_counter(), time.process_time()
    r = api.search_plans(req)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    priced = sum(1 for e in r.scored if e.under_load and "refused" not in e.under_load)
    return dt / max(1, r.evaluated), r.evaluated, priced, cpu / max(1, r.evaluated)


def main() -> None:
    statics = [_run() for _ in range(3)]
    loads = [_run(concurrency=64, range_ratio=0.8) for _ in range(3)]
    static, loaded = min(statics), min(loads)
    print(f"static search      {static[0] * 1e3:8.3f} ms/plan ({static[1]} plans)")
    print(f"under load (C=64)  {loaded[0] * 1e3:8.3f} ms/plan ({loaded[1]} plans, "
          f"{loaded[2]} priced under load)  {loaded[0] / static[0]:.1f}x")  # fmt: skip
    extra = (loaded[0] - static[0]) * loaded[1] / max(1, loaded[2])
    cpu_s, cpu_l = min(r[3] for r in statics), min(r[3] for r in loads)
    print(f"CPU: static {cpu_s * 1e3:.3f} ms/plan, under load {cpu_l * 1e3:.3f} ms/plan, "
          f"{cpu_l / cpu_s:.2f}x (best of 3 each)")  # fmt: skip
    print(f"added per plan priced under load (steady state; the one pilot replay spread over "
          f"them): {extra * 1e3:.2f} ms")  # fmt: skip
    print("load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
