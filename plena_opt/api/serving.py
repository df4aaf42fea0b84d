"""Use case: the serving decisions of a finished search (issue 16).

``decide_serving(result, checks, request, problem)`` adds to ``result.serving``: the SLA, goodput
(the best tokens/s/device of front plans meeting it; with a re-check, judged at the request's
percentile) and, with ``request.serving`` other than ``aggregated``, the aggregated and
disaggregated fronts side by side with the verdict, stored as study ``<study>-serving`` beside
the search's own (not for an in-memory store). The CLI and the server both call it. ``stop``
(a ``plena_opt.stop.StopToken``: deadline / cancel) is polled while the comparison prices workers
and pairs them; a stopped comparison is returned partial (``partial``, ``stop_reason``, the fronts
scored so far) and not stored, so a complete stored one is never replaced by it. A search
under load (``request.under_load``) compares the modes under its workload
(``api.serving_loaded.compare_under_load``); its front's figures are judged under load already,
so no goodput from the static batch is added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.result import SearchResult
    from plena_opt.stop import StopToken


def decide_serving(
    result: SearchResult,
    checks: Sequence[Any],
    request: SearchRequest,
    problem: EvaluatorInputs | None = None,
    stop: StopToken | None = None,
) -> dict[str, Any]:
    """Goodput and the ``--serving`` comparison of ``result`` (also kept in ``result.serving``);
    ``checks`` are its re-check results (may be empty)."""
    from plena_opt.search.serving.serving import goodput, has_sla, judge_sla

    doc = result.serving
    if request.under_load:  # the front is judged under load already; the comparison is too
        if request.serving != "aggregated":
            doc["comparison"] = _compare(result, request, problem, stop)
        return doc
    if has_sla(request) or request.percentile != "p50":
        doc.update(goodput(result, request, judge_sla(result, checks, request) if checks else []))
    if request.serving != "aggregated":
        doc["comparison"] = _compare(result, request, problem, stop)
    return doc


def _compare(
    result: SearchResult, request: SearchRequest, problem: Any, stop: StopToken | None
) -> dict[str, Any]:
    """The ``--serving`` comparison, stored (and, for the Optuna pair search, resumed) as study
    ``<study>-serving`` unless the store is in memory or the comparison stopped early."""
    from plena_opt.search.request import MEMORY_STORAGE
    from plena_opt.search.serving.serving_compare import (
        SCORED_KEY,
        serving_comparison,
        serving_fingerprint,
    )
    from plena_opt.search.serving.serving_store import resume_params, store_comparison
    from plena_opt.search.storage.storage import open_storage

    stored = result.storage != MEMORY_STORAGE
    storage = open_storage(result.storage) if stored else None
    fingerprint, seeds = None, []
    if stored and request.serving_sampler == "optuna":
        fingerprint = serving_fingerprint(request)
        seeds = resume_params(storage, result.study_name, fingerprint)
    if request.under_load:  # issue 23: both modes priced under the search's workload
        from plena_opt.api.serving_loaded import compare_under_load

        inputs = problem if problem is not None else request.problem.load()
        cmp = compare_under_load(request, inputs, stop)
    else:
        cmp = serving_comparison(request, inputs=problem, stop=stop, resume=seeds)
    scored = cmp.pop(SCORED_KEY, None)
    if stored and not cmp.get("partial"):
        cmp["study"] = store_comparison(cmp, storage, result.study_name, scored, fingerprint)
    return cmp
