"""plena-opt: choose parallelism plans for LLM serving on PLENA accelerator clusters.

The library API is the use-case layer (``plena_opt.api``); its names are importable from here and
load on first use, so ``import plena_opt`` stays cheap::

    import plena_opt as po

    problem = po.load_problem(model="llama-3.1-8b", noc="illustrative_gpu_node_8")
    best = po.estimate_plan(problem, po.Plan(tp=8))
    print(best.metrics.ttft_seconds, best.metrics.tps)
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

__version__ = "0.1.0"

_API = (
    "EvaluatorInputs",
    "InlineDocument",
    "Plan",
    "PlanEstimate",
    "PlanMetrics",
    "ProblemSpec",
    "ScheduleSimulation",
    "SearchRequest",
    "SearchResult",
    "ServingSimulation",
    "Workload",
    "build_schedule",
    "decide_serving",
    "enumerate_plans",
    "estimate_plan",
    "estimate_single_chip",
    "load_problem",
    "recheck_front",
    "search_plans",
    "simulate_plan",
    "simulate_schedule",
)
__all__ = ["__version__", *_API]


__getattr__ = lazy_exports(__name__, dict.fromkeys(_API, "plena_opt.api"))
