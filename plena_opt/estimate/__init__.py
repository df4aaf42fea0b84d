"""The analytic evaluator: single-chip and distributed estimates, and the batch API.

``Evaluator`` is the entry point for the search and the server; ``estimate_distributed`` and
``estimate_decoder_latency`` reproduce the reference estimates (analytic-model §3.3, §4).
"""

from plena_opt.estimate.distributed import DistributedEstimate, estimate_distributed
from plena_opt.estimate.evaluator import Evaluator, PlanMetrics
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.single_chip import (
    DecoderLatencyEstimate,
    estimate_decoder_latency,
    estimate_single_chip,
    reference_script_estimate,
)

__all__ = [
    "DecoderLatencyEstimate",
    "DistributedEstimate",
    "Evaluator",
    "Plan",
    "PlanMetrics",
    "Workload",
    "estimate_decoder_latency",
    "estimate_distributed",
    "estimate_single_chip",
    "reference_script_estimate",
]
