"""The use cases every front end calls (the CLI, the gRPC server, a Python script, the web UI).

One function per use case (docs/ARCHITECTURE.md, "Use cases"):

* ``load_problem(spec)`` — model, NoC, memory, chip and workload from names, paths or dicts.
* ``enumerate_plans(problem)`` — every legal plan on the cluster.
* ``estimate_plan(problem, plan)`` / ``estimate_single_chip(problem)`` — one plan priced, with its
  metrics (``PlanEstimate``).
* ``search_plans(request, problem=None)`` — the Pareto search (``SearchResult``).
* ``search_codesign(request, design_space)`` — hardware knobs × plans, the joint front.
* ``prepare_workers(request)`` / ``run_worker(url, study)`` / ``run_local_workers(request, n)`` —
  one study scored by many worker processes on PostgreSQL (``plena_opt.search.workers.workers``).
* ``prepare_codesign_workers`` / ``run_codesign_workers`` — a co-design's hardware points scored
  by worker processes, the joint front read back (``plena_opt.search.workers.codesign_workers``).
* ``recheck_front(result, problem)`` — Monte Carlo re-check of a front's best plans.
* ``decide_serving(result, checks, request, problem)`` — goodput at the SLA and the
  aggregated/disaggregated serving comparison of a finished search.
* ``recommend(result, request)`` — the one deployment a finished search recommends
  (``Recommendation``: aggregated plan or disaggregated pools, the export key, the figures, why).
* ``stored_trial(storage, study, number)`` / ``engine_model(model, model_path)`` — the key,
  problem and engine model id of a stored trial, for its launch bundle (``plena_opt.export``).
* ``serve_under_load(problem, plan, engine, concurrency | request_rate)`` — one plan under a
  serving workload by an engine's scheduler: replay percentiles and steady-state means.
* ``simulate_plan(problem, plan)`` — serving simulation of one plan (``ServingSimulation``);
  ``simulate_schedule(schedule, stage_ms)`` — a training schedule (``ScheduleSimulation``).

Names are imported on first use, so ``import plena_opt.api`` is cheap.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "EvaluatorInputs": "plena_opt.estimate.problem",
    "InlineDocument": "plena_opt.estimate.problem",
    "Plan": "plena_opt.estimate.plan",
    "PlanEstimate": "plena_opt.api.estimates",
    "PlanMetrics": "plena_opt.estimate.evaluator",
    "ProblemSpec": "plena_opt.estimate.problem",
    "ScheduleSimulation": "plena_opt.api.simulations",
    "SearchRequest": "plena_opt.search.request",
    "SearchResult": "plena_opt.search.result",
    "ServingSimulation": "plena_opt.api.simulations",
    "Workload": "plena_opt.estimate.plan",
    "build_schedule": "plena_opt.api.simulations",
    "decide_serving": "plena_opt.api.serving",
    "engine_model": "plena_opt.api.exports",
    "export_moe": "plena_opt.api.exports",
    "enumerate_plans": "plena_opt.api.problems",
    "estimate_plan": "plena_opt.api.estimates",
    "estimate_single_chip": "plena_opt.api.estimates",
    "load_problem": "plena_opt.api.problems",
    "names_gpu_chip": "plena_opt.estimate.problem",
    "chip_carries_memory": "plena_opt.estimate.problem",
    "recheck_front": "plena_opt.api.recheck",
    "recommend": "plena_opt.api.recommendation",
    "Recommendation": "plena_opt.api.recommendation",
    "render_recheck": "plena_opt.api.recheck",
    "prepare_workers": "plena_opt.api.workers",
    "run_local_workers": "plena_opt.api.workers",
    "prepare_codesign_workers": "plena_opt.api.workers",
    "run_codesign_workers": "plena_opt.api.workers",
    "run_worker": "plena_opt.api.workers",
    "search_codesign": "plena_opt.api.codesign",
    "search_plans": "plena_opt.api.searches",
    "serve_under_load": "plena_opt.api.under_load",
    "UnderLoad": "plena_opt.api.under_load",
    "simulate_plan": "plena_opt.api.simulations",
    "simulate_schedule": "plena_opt.api.simulations",
    "stored_trial": "plena_opt.api.exports",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
