"""Multi-objective plan search with Optuna: plan space, objectives, Pareto fronts, storage.

Public API (imported lazily, so importing the package costs nothing until a name is used):
``SearchRequest``, ``SearchResult``, ``FrontEntry``, ``Progress``,
``run_search(request, evaluator_factory=None, progress=None, should_stop=None)``,
``open_storage``, ``list_studies`` (``ProblemSpec`` lives in ``plena_opt.estimate``).
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "SearchRequest": "plena_opt.search.request",
    "SearchResult": "plena_opt.search.result",
    "FrontEntry": "plena_opt.search.result",
    "Progress": "plena_opt.search.runner",
    "run_search": "plena_opt.search.runner",
    "default_study_name": "plena_opt.search.runner",
    "open_storage": "plena_opt.search.storage",
    "list_studies": "plena_opt.search.storage",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
