"""What a plan's pricing needs besides its passes (analytic-model §4.2–§4.6).

``PlanBase`` holds the checks, the device shard, the schemes, the MoE loads and (on first use)
the footprint and warnings of a plan; plans that differ only in comm overlap share one.
"""

from __future__ import annotations

from dataclasses import fields
from itertools import count
from math import ceil
from operator import attrgetter
from typing import TYPE_CHECKING

from deepstack import ParallelScheme

from plena_opt.estimate.eplb import check_redundant
from plena_opt.estimate.layer import LayerKind, LayerShape
from plena_opt.estimate.moe_load import MoeLoad, busiest_rank_load
from plena_opt.estimate.plan import Plan
from plena_opt.estimate.shard import (
    DeviceShard,
    dense_scheme,
    moe_scheme,
    plan_warnings,
    validate_plan,
)
from plena_opt.models import ModelSpec

if TYPE_CHECKING:
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.plan import Workload

_IDS = count()  # interned shard and scheme keys (``PlanBase.shard_id``, ``comm_id``)
_shard_fields = attrgetter(*(f.name for f in fields(DeviceShard)))  # a shard's values, a tuple
_scheme_fields = attrgetter(*(f.name for f in fields(ParallelScheme)))  # a scheme's values


def kv_cache_elements(m: ModelSpec, d: DeviceShard, kind: LayerKind, held: int) -> int:
    """KV-cache elements one device holds for one layer of ``kind`` with ``held`` tokens.

    GQA: K and V of the device's KV heads. MLA: one latent of ``kv_lora_rank + qk_rope_head_dim``
    per token, replicated on every TP rank. Sliding/chunked layers keep at most W / C tokens.
    """
    if kind.linear:  # Gated DeltaNet: a fixed state, counted by ``linear_state_kv_elements``
        return 0
    if kind.sliding:
        held = min(held, m.sliding_window)
    elif kind.chunked:
        held = min(held, m.attention_chunk_size)
    if m.is_mla:  # + the DSA indexer's key per token (0 without DSA)
        return d.b_dev * held * (m.kv_latent_dim + m.index_head_dim)
    return 2 * d.b_dev * held * d.kv_heads * m.head_dim


def _shard(m: ModelSpec, plan: Plan, w: Workload, kept: tuple | None) -> DeviceShard:
    """The plan's device shard: where its context family priced it at another batch
    (``kept``: its ``plan_invariants``), that shard re-batched (``DeviceShard.with_batch``)."""
    return DeviceShard.build(m, plan, w) if kept is None else kept[4].with_batch(w.batch_size, plan)


class PlanBase:
    """What a plan's pricing needs besides the passes: checks, shard, schemes, MoE loads, and
    (filled on first use) footprint and warnings; shared by plans that differ in comm overlap."""

    def __init__(self, ctx: EstimateContext, plan: Plan, validate: bool) -> None:
        m, w = ctx.model, ctx.workload
        # the schemes, their field values, whether the plan passed the §4.2 refusals and a
        # shard of it (all but its micro-batch and sequences per device): the same at every
        # batch size and output length (``EstimateContext.plan_invariants``)
        pkey = (plan.tp, plan.ep, plan.dp, plan.pp, plan.cp, plan.moe_tp_mode, plan.moe_tp)
        kept = ctx.plan_invariants.get(pkey)
        self._warn_of: tuple | None = None  # (model, plan, workload) of warnings not yet read
        if not validate:
            self._plan_warnings: list[str] | None = []
        elif kept is not None and kept[3]:  # refused by nothing that a length changes: its
            self._plan_warnings, self._warn_of = None, (m, plan, w)  # warnings on first read
        else:
            self._plan_warnings = validate_plan(m, plan, w, ctx.num_devices, ctx.noc.name)
        self.shard = _shard(m, plan, w, kept)
        # What the layers, collectives and extras are priced from: the micro-batch size matters
        # only to MoE loads (dense layers see the sequences per device), so dense plans with
        # another micro-batch but the same shard share their priced pieces.
        self.priced_shard = self.shard if m.num_experts else self.shard.without_micro()
        self.shape = LayerShape.unchecked(m, self.shard, ctx.perf, ctx.precision, plan.tp)
        if kept is None:
            dense = dense_scheme(plan)
            moe = moe_scheme(plan, self.shard.tp_moe, self.shard.ep_moe) if m.num_experts else None
            fields_of = (_scheme_fields(dense), _scheme_fields(moe)) if moe is not None else None
            kept = ctx.plan_invariants[pkey] = (dense, moe, fields_of, validate, self.shard)
        elif validate and not kept[3]:
            kept = ctx.plan_invariants[pkey] = (*kept[:3], True, kept[4])
        self.dense, self.moe = kept[0], kept[1]
        ranges = ctx.row_groups.ranges.get(plan.pp)  # the same for every plan of this depth
        if ranges is None:
            per_stage = ceil(m.num_layers / plan.pp)
            rs = [
                range(min(m.num_layers, i * per_stage), min(m.num_layers, (i + 1) * per_stage))
                for i in range(plan.pp)
            ]
            ranges = ctx.row_groups.ranges[plan.pp] = (rs, [len(r) for r in rs])
        self.stage_ranges, self.stage_layers = ranges
        self.stage_kind_counts = ctx.stage_kind_counts(plan.pp)
        self.pass_parts: dict[tuple, dict] = {}  # ``PlanPasses._run_pass`` fields by point set
        self.layer_grid = None  # the decode grid refined for the layers (``PlanPasses.decode``)
        self.loads: dict[str, MoeLoad] = {}  # by mode, as read (``load``)
        self._lazy_loads: tuple | None = None  # what ``load`` works a balanced one out from
        self.rows = None
        ids = ctx.shard_ids  # ids from one counter: unique even when threads share ``ids``
        # keyed by the shard's field values (a tuple hashes and compares in C; the dataclass's
        # generated ``__hash__``/``__eq__`` are Python, and equal fields mean an equal shard)
        shard_key = (_shard_fields(self.priced_shard), plan.tp, plan.cp)
        self.shard_id = ids.setdefault(shard_key, next(_IDS))
        if m.num_experts:  # EP dispatch reads the whole MoE scheme (its dp token windows);
            # the schemes by their field values (equal schemes, equal tuples; hashed in C)
            comm = (self.shard_id, "moe", *kept[2])
        else:  # a dense layer's collectives see only its tp and cp groups (dp, pp: other plans)
            net = ctx.priced_net
            comm = (self.shard_id, net.layout(self.dense, "tp"), net.layout(self.dense, "cp"))
        self.comm_id = ids.setdefault(comm, next(_IDS))
        self.footprint: tuple[float, float] | None = None
        self.warnings: list[str] | None = None
        self._loads_and_checks(ctx, plan)
        # decode micro-batches in flight when fewer than pp, else 0 (``PassResult.in_flight``);
        # read about twice per plan, so found once per base
        m = -(-w.batch_size // self.shard.micro)
        self.in_flight = m if m < plan.pp else 0
        # what every ``PlanPasses`` of this base reads as its own attributes (one dict update)
        self.plan_view = {
            "shard": self.shard,
            "priced_shard": self.priced_shard,
            "shape": self.shape,
            "dense": self.dense,
            "moe": self.moe,
            "stage_ranges": self.stage_ranges,
            "stage_kind_counts": self.stage_kind_counts,
            "distinct_kinds": ctx.distinct_kinds,
            "loads": self.loads,
            "_rows": self.rows,
            "in_flight": self.in_flight,
        }

    def _loads_and_checks(self, ctx: EstimateContext, plan: Plan) -> None:
        """The EPLB check and, for MoE models, the routing rows and busiest-rank loads."""
        m, w = ctx.model, ctx.workload
        if w.eplb_redundant:  # refused by name where the engines would refuse it
            check_redundant(w.eplb_redundant, m.num_experts, self.shard.ep_moe)
        if m.num_experts:
            q_pre = self.shard.q_prefill
            micro = self.shard.micro
            need = max(micro * q_pre if micro * q_pre < 8192 else 0, micro)
            if w.routing != "balanced" or self.shard.ep_moe > 1:
                self.rows = ctx.rows(max(need, 1))
            if w.routing == "balanced" and not w.eplb_redundant:
                # arithmetic that refuses nothing: each mode's on first read (``load``; a step
                # model's prompt-count plans read no decode load, its decode plans no prefill's)
                self._lazy_loads = (m, micro, q_pre, plan.dp, self.shard.tp_moe, self.shard.ep_moe)
                return
            for mode, q in (("prefill", q_pre), ("decode", 1)):
                self.loads[mode] = busiest_rank_load(
                    m,
                    micro=micro,
                    q=q,
                    dp=plan.dp,
                    tp_moe=self.shard.tp_moe,
                    ep_moe=self.shard.ep_moe,
                    routing=w.routing,
                    rows=self.rows,
                    redundant=w.eplb_redundant,
                )

    @property
    def plan_warnings(self) -> list[str]:
        """The plan's §4.2 warnings at this context's batch; for a plan its context family
        already checked, worked out on first read (a step model's plans read none; r16trim)."""
        out = self._plan_warnings
        if out is None:
            out = self._plan_warnings = plan_warnings(*self._warn_of)
        return out

    def load(self, mode: str) -> MoeLoad | None:
        """The busiest-rank load of ``mode`` ("prefill" or "decode"; None for a dense model),
        a balanced one worked out on first read with the arguments ``_loads_and_checks`` gives
        the others (r16trim)."""
        hit = self.loads.get(mode)
        if hit is None and self._lazy_loads is not None and mode in ("prefill", "decode"):
            m, micro, q_pre, dp, tp_moe, ep_moe = self._lazy_loads
            hit = self.loads[mode] = busiest_rank_load(
                m,
                micro=micro,
                q=q_pre if mode == "prefill" else 1,
                dp=dp,
                tp_moe=tp_moe,
                ep_moe=ep_moe,
                routing="balanced",
                rows=self.rows,
                redundant=0,
            )
        return hit
