"""The reference evaluator: one plan priced step by step, the way analytic-model §4 reads.

The fast evaluator (``estimate.distributed.PlanCost`` over ``estimate.passes`` and the decode
grids of ``estimate.decode``) prices a decode of n tokens at a few weighted evaluation points,
groups equal stages, and memoises priced pieces across plans and batch sizes. This package
prices the same plan plainly: every decode step on its own (an array entry per token), every
pipeline stage on its own, each collective by its own named function, no memo. It takes from
the rest of the product only the formulas of one layer (``layer.layer_cycles`` /
``layer.layer_traffic`` on PLENA, ``GpuPricing.layer`` on a GPU), the device shard, the MoE
busiest-rank load and the network's price of one collective.

Where to find a formula by name:

* the decode KV lengths ``kv_j = ceil((S_in + j) / cp)``: ``steps.decode_kv_lengths``;
* one layer at a step (roofline of cycles / f against quantised bytes / bandwidth):
  ``steps.layer_price``;
* the TP all-reduce of a layer, the CP combine / KV gather, the MoE dispatch, the MoE TP
  all-reduce, the MoE combine: ``collectives.tp_all_reduce``, ``cp_attention_combine``,
  ``cp_kv_all_gather``, ``moe_dispatch``, ``moe_tp_all_reduce``, ``moe_combine``;
* a layer with its collectives (sum, or max under full overlap): ``steps.layer_with_collectives``;
* the stage-boundary transfer: ``collectives.pipeline_transfer``;
* a stage's time: ``steps.stage_seconds``; a pass's latency: ``steps.pass_latency``;
* the decode period (slowest stage + transfer, or the token loop): ``steps.decode_period``;
* TTFT, TPS, TPS per sequence, energy per token: ``metrics.reference_metrics``.

Every fast path is tested against it (``tests/estimate/test_estimate_reference.py``).
"""

from __future__ import annotations

from plena_opt.estimate.reference.layout import PlanLayout, plan_layout
from plena_opt.estimate.reference.metrics import (
    DecodeSums,
    ReferenceMetrics,
    decode_sums,
    reference_metrics,
)

__all__ = [
    "DecodeSums",
    "PlanLayout",
    "ReferenceMetrics",
    "decode_sums",
    "plan_layout",
    "reference_metrics",
]
