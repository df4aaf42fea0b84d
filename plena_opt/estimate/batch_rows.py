"""The cold ``evaluate_batch``'s TTFT without a prefill ``PassResult`` per plan.

A plan's TTFT is its prefill's latency plus its first decode step's (§4.6). The prefill is one
point, so its latency follows from the plan base's priced prefill pieces (``PlanPasses.
prefill_fields``: one priced layer of each kind, its collectives' sum, the extras by stage, the
boundary transfer, the stage groups) and the plan's comm overlap alone; ``prefill_latency``
computes it with the same functions the ``PassResult`` uses (``estimate.point_pass``), so the
figure is the same to the bit, without building the pass object and its cached attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.estimate.plan_passes import PREFILL_KEY
from plena_opt.estimate.point_pass import point_latency, point_values

if TYPE_CHECKING:
    from plena_opt.estimate.distributed import PlanCost


def prefill_latency(cost: PlanCost) -> float:
    """``cost.prefill.latency_at(0)`` (s) from the plan base's prefill pieces; the plan's own
    prefill pass, if already built, is read instead."""
    built = cost.__dict__.get("prefill")
    if built is not None:
        return built.latency_at(0)
    f = cost.base.pass_parts.get(PREFILL_KEY)  # ``cost.prefill_fields()``, its hit inline
    if f is None:
        f = cost.prefill_fields()
    groups = f["groups"]
    values = point_values(
        f["layer"], f["_comm_totals"], cost.plan.comm_overlap == "full", groups.distinct,
        f["extras"],
    )  # fmt: skip
    pp = len(f["stage_layers"])
    return point_latency(values, groups.mult, groups.mult_floats, pp, f["transfer"].seconds)


def ttft_seconds(cost: PlanCost) -> float:
    """``cost.ttft_seconds`` (s): the prefill's latency (``prefill_latency``) plus the first
    decode step's."""
    return prefill_latency(cost) + cost.decode.latency_at(0)
