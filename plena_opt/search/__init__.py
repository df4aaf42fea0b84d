"""Multi-objective plan search with Optuna: plan space, objectives, Pareto fronts, storage.

Public API (imported lazily, so importing the package costs nothing until a name is used):
``SearchRequest``, ``SearchResult``, ``FrontEntry``, ``Progress``,
``run_search(request, evaluator_factory=None, progress=None, should_stop=None)``,
``open_storage``, ``list_studies`` (``ProblemSpec`` lives in ``plena_opt.estimate``).

The modules beside this face (``progress``, ``record``, ``request``, ``result``) hold the types
every part speaks. The sub-packages, from the bottom up (no cycle between them:
tests/test_architecture.py):

* ``space``: The plan space a search walks: points, objectives and constraints (and their Optuna
  adapter), samplers, local refinement of a front, infeasible-plan reports.
* ``fronts``: Pareto fronts: non-dominance (in memory and in chunks), hypervolume, front quality
  against the exact front.
* ``storage``: Where studies live: stores (journal file, RDB, gRPC proxy) and their care, scored
  plans as Optuna trials, bulk writes, front-only chunk records, the dashboard.
* ``serving``: Serving decisions in the search: KV-capacity batches, SLA, goodput, aggregated vs
  disaggregated fronts, the Optuna pair search, mixed GPU pools.
* ``run``: One search run: the runner, the session state, how the budget is spent (modes, the
  sampler loop) and the rendering of the result.
* ``codesign``: Hardware × plan co-design: design space files, the outer study, the joint front.
* ``workers``: Many worker processes on one study: the work queue, claims and heartbeats, plan
  chunks and co-design points as work units.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "SearchRequest": "plena_opt.search.request",
    "SearchResult": "plena_opt.search.result",
    "FrontEntry": "plena_opt.search.result",
    "Progress": "plena_opt.search.run.runner",
    "run_search": "plena_opt.search.run.runner",
    "default_study_name": "plena_opt.search.run.runner",
    "open_storage": "plena_opt.search.storage.storage",
    "list_studies": "plena_opt.search.storage.storage",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
