"""Use case: the Pareto search (its re-check is ``plena_opt.api.recheck``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.result import SearchResult
    from plena_opt.search.run.runner import Progress


def search_plans(
    request: SearchRequest,
    problem: EvaluatorInputs | None = None,
    *,
    progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SearchResult:
    """Run the search ``request`` describes on ``problem`` (default: ``request.problem``
    loaded); ``progress`` gets reports, ``should_stop()`` is polled between trials."""
    from plena_opt.api.moe_kernel import engine_inputs
    from plena_opt.search.run.runner import run_search

    inputs = problem if problem is not None else request.problem.load()
    if request.engine:  # the engine's MoE kernels price the plans (static ones too)
        inputs = engine_inputs(inputs, request.engine)
    if not request.under_load:
        return run_search(request, inputs.evaluator, progress=progress, should_stop=should_stop)
    from plena_opt.api.search_load import load_document, loaded_factory
    from plena_opt.api.under_load import check_target_engine

    inputs = engine_inputs(inputs, request.engine or "vllm")
    version = check_target_engine(inputs, request.engine or "vllm", request.engine_version)
    factory = loaded_factory(inputs.evaluator, inputs, request)
    result = run_search(request, factory, progress=progress, should_stop=should_stop)
    result.under_load = load_document(request, version)
    c, asked = request.concurrency, request.batch_sizes
    if c is not None and asked is not None and asked != [c]:
        result.warnings.append(
            f"batch sizes {','.join(map(str, asked))} not searched: under --concurrency {c} a "
            f"plan's batch is {c}, its engine's cap on running requests (max_num_seqs in the "
            "launch files), so every client is admitted as the benchmark runs"
        )
    return result
