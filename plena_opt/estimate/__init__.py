"""The analytic evaluator: single-chip and distributed estimates, and the batch API.

``Evaluator`` is the entry point for the search and the server; ``estimate_distributed`` and
``estimate_decoder_latency`` reproduce the reference estimates (analytic-model §3.3, §4).
``ProblemSpec`` describes what is priced (names, paths or inline documents) and loads it into
``EvaluatorInputs``. Names are imported on first use, so ``plena_opt.estimate.problem`` and
``plena_opt.estimate.plan`` stay light for the CLI.
"""

from __future__ import annotations

from plena_opt.lazy import lazy_exports

_EXPORTS = {
    "DecoderLatencyEstimate": "plena_opt.estimate.single_chip",
    "DistributedEstimate": "plena_opt.estimate.results",
    "Evaluator": "plena_opt.estimate.evaluator",
    "EvaluatorInputs": "plena_opt.estimate.problem",
    "InlineDocument": "plena_opt.estimate.problem",
    "Plan": "plena_opt.estimate.plan",
    "PlanMetrics": "plena_opt.estimate.evaluator",
    "ProblemSpec": "plena_opt.estimate.problem",
    "Workload": "plena_opt.estimate.plan",
    "estimate_decoder_latency": "plena_opt.estimate.single_chip",
    "estimate_distributed": "plena_opt.estimate.distributed",
    "estimate_single_chip": "plena_opt.estimate.single_chip",
    "reference_script_estimate": "plena_opt.estimate.single_chip",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
