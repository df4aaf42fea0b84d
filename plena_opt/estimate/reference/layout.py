"""What one plan is on one problem: its device shard, rank schemes, stage layout and MoE loads
(analytic-model §4.2, §4.3, §4.5, §4.6), built plainly for the reference evaluator."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import ceil

import numpy as np
from deepstack import ParallelScheme

from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.eplb import check_redundant
from plena_opt.estimate.layer import LayerShape, stage_counts
from plena_opt.estimate.moe_load import MoeLoad, busiest_rank_load
from plena_opt.estimate.plan import Plan
from plena_opt.estimate.shard import DeviceShard, dense_scheme, moe_scheme, validate_plan


@dataclass(frozen=True, eq=False)
class PlanLayout:
    """One legal plan laid out on the problem of ``ctx``.

    ``stages``: per pipeline stage, how many layers of each kind it holds (``ceil(L / pp)``
    consecutive layers each); ``loads``: the busiest expert rank's load per phase (MoE only);
    ``in_flight``: decode micro-batches ``ceil(B / micro)`` when fewer than pp, else 0.
    """

    ctx: EstimateContext
    plan: Plan
    shard: DeviceShard
    shape: LayerShape
    dense: ParallelScheme
    moe: ParallelScheme | None
    stages: list[Counter]
    loads: dict[str, MoeLoad]
    rows: np.ndarray | None
    in_flight: int
    warnings: list[str]

    @property
    def pp(self) -> int:
        return self.plan.pp

    @property
    def full_overlap(self) -> bool:
        """Whether a layer's collectives run under its compute (``comm_overlap == "full"``)."""
        return self.plan.comm_overlap == "full"


def plan_layout(ctx: EstimateContext, plan: Plan) -> PlanLayout:
    """Check ``plan`` (``PlenaInputError`` naming the rule) and lay it out (§4.2–§4.6)."""
    m, w = ctx.model, ctx.workload
    warnings = validate_plan(m, plan, w, ctx.noc.num_devices, ctx.noc.name)
    shard = DeviceShard.build(m, plan, w)
    if w.eplb_redundant:
        check_redundant(w.eplb_redundant, m.num_experts, shard.ep_moe)
    loads, rows = moe_loads(ctx, plan, shard)
    micro_batches = ceil(w.batch_size / shard.micro)
    return PlanLayout(
        ctx=ctx,
        plan=plan,
        shard=shard,
        shape=LayerShape(m, shard, ctx.perf, ctx.precision, plan.tp),
        dense=dense_scheme(plan),
        moe=moe_scheme(plan, shard.tp_moe, shard.ep_moe) if m.num_experts else None,
        stages=stage_counts(ctx.kind_runs, m.num_layers, plan.pp),
        loads=loads,
        rows=rows,
        in_flight=micro_batches if micro_batches < plan.pp else 0,
        warnings=warnings,
    )


def moe_loads(
    ctx: EstimateContext, plan: Plan, shard: DeviceShard
) -> tuple[dict[str, MoeLoad], np.ndarray | None]:
    """The busiest expert rank's load in the prefill (``q_prefill`` tokens per sequence) and
    in a decode step (one token), and the routing rows they were drawn from (§4.5).

    Rows cover one micro-batch's prefill tokens (below 8,192, where the EP dispatch is routed
    row by row) or at least its sequences; balanced routing on one EP rank needs none."""
    m, w = ctx.model, ctx.workload
    if not m.num_experts:
        return {}, None
    q_pre, micro = shard.q_prefill, shard.micro
    need = max(micro * q_pre if micro * q_pre < 8192 else 0, micro)
    rows = None
    if w.routing != "balanced" or shard.ep_moe > 1:
        rows = ctx.rows(max(need, 1))
    loads = {
        mode: busiest_rank_load(
            m,
            micro=micro,
            q=q,
            dp=plan.dp,
            tp_moe=shard.tp_moe,
            ep_moe=shard.ep_moe,
            routing=w.routing,
            rows=rows,
            redundant=w.eplb_redundant,
        )
        for mode, q in (("prefill", q_pre), ("decode", 1))
    }
    return loads, rows
