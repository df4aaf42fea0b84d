"""The passes of one plan: its layers, collectives and extras priced at the prefill point and
at the weighted decode points (analytic-model §4.6).

``PlanPasses`` shares a ``PlanBase`` (shard, schemes, MoE loads) with the plans that differ only
in comm overlap, prices each layer kind once per shard and point set (the caches live on the
``EstimateContext``) and refines the decode grid until every check holds (``decode.checks``).
``PlanCost`` (``estimate.distributed``) builds the headline metrics on top.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from plena_opt.estimate.cached import cached
from plena_opt.estimate.comm import Cost, layer_collectives, pipeline_transfer
from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.decode import MAX_REFINES, DecodeGrid
from plena_opt.estimate.decode.plan_checks import layer_checks
from plena_opt.estimate.layer import LayerKind, decode_kv_read_bytes
from plena_opt.estimate.passes import PassFigures, PassResult, pass_groups
from plena_opt.estimate.plan import Plan
from plena_opt.estimate.plan_base import PlanBase
from plena_opt.estimate.pricing import ONE_STEP, StageArrays, StepWeights


def plan_base(ctx: EstimateContext, plan: Plan, validate: bool = True) -> PlanBase:
    """The ``PlanBase`` of ``plan`` in ``ctx`` (built on first use; ``validate`` runs the §4.2
    checks, which raise ``PlenaInputError`` for an illegal plan): everything but the passes is
    the same for plans that differ only in comm overlap, so they share one."""
    key = (plan.tp, plan.ep, plan.dp, plan.pp, plan.cp, plan.moe_tp_mode, plan.moe_tp, validate)
    base = ctx.plan_bases.get(key)
    if base is None:
        base = ctx.plan_bases[key] = PlanBase(ctx, plan, validate)
    return base


PREFILL_KEY = ("prefill", ())  # the prefill's key in ``PlanBase.pass_parts``


class PlanPasses:
    """The prefill and decode passes of one legal plan (``validate=False`` skips the §4.2
    checks of a plan already known legal)."""

    def __init__(self, ctx: EstimateContext, plan: Plan, *, validate: bool = True) -> None:
        self.ctx = ctx
        self.plan = plan
        # ``plan_base(ctx, plan, validate)``, its lookup inline (once per plan)
        key = (plan.tp, plan.ep, plan.dp, plan.pp, plan.cp, plan.moe_tp_mode, plan.moe_tp, validate)
        base = ctx.plan_bases.get(key)
        if base is None:
            base = ctx.plan_bases[key] = PlanBase(ctx, plan, validate)
        self.base = base
        # base.shard, priced_shard, shape, dense, moe, stage_ranges,
        # stage_kind_counts, loads and rows (as ``_rows``), in_flight (decode micro-batches in
        # flight when fewer than pp, else 0: ``PlanBase.in_flight``) and ctx.distinct_kinds
        self.__dict__.update(base.plan_view)

    # -- passes ------------------------------------------------------------------------------
    def _layer(
        self,
        kind: LayerKind,
        mode: str,
        q: int,
        kv: np.ndarray,
        steps: StepWeights,
        points_key: Hashable | None,
        cache: dict,
    ) -> StageArrays:
        """One layer of ``kind`` priced at the KV lengths ``kv`` (memoised in ``cache``)."""
        ctx, shape = self.ctx, self.shape
        key = ((self.base.shard_id, mode), kind, points_key)
        priced = cache.get(key)
        if priced is not None:
            return priced
        load = self.base.load(mode)
        priced = ctx.pricer.layer(shape, kind, mode, q, kv, load, steps, self.plan.cp)
        cache[key] = priced
        return priced

    def _layer_grid(self, grid: DecodeGrid) -> DecodeGrid:
        """``grid`` refined until every layer keeps its roofline side on each compressed piece.

        A function of the layer prices only (the priced shard, tp, cp), so every plan of that
        layer starts its own checks from it: the roofline switch is found once per layer, not
        once per plan (the plan's checks still decide, and refine further where they fail).
        """
        ctx = self.ctx
        lkey = (self.base.shard_id, grid.token)
        hit = ctx.layer_grids.get(lkey)
        if hit is not None:
            return hit
        for tries in range(MAX_REFINES):
            if not grid.checks:
                break
            layers = [
                self._layer(k, "decode", 1, grid.kv, grid.weights, grid.token, ctx.layer_cache)
                for k in self.distinct_kinds
            ]
            failed = layer_checks(grid, layers)  # keeps the layers' facts for the plan checks
            if not failed:
                break
            grid = self._refined(grid, failed, tries == MAX_REFINES - 1)
        ctx.layer_grids[lkey] = grid
        return grid

    def _refined(self, grid: DecodeGrid, failed: dict[int, list[int]], last: bool) -> DecodeGrid:
        """``grid`` cut at ``failed`` (memoised per context: equal cuts give one grid)."""
        rkey = (grid.key, tuple((i, tuple(c)) for i, c in sorted(failed.items())), last)
        refined = self.ctx.refined.get(rkey)
        if refined is None:
            refined = self.ctx.refined[rkey] = grid.refine(failed, enumerate_failed=last)
        return refined

    def _run_pass(
        self, mode: str, q: int, kv: np.ndarray, steps: StepWeights, points_key: Hashable | None
    ) -> PassResult:
        """Price every stage at the KV lengths ``kv``; ``points_key`` names the point set for the
        shared layer cache (None: a plan's own refined points, not cached)."""
        fields = self.pass_fields(mode, q, kv, steps, points_key)
        result = object.__new__(PassResult)  # every field given: the generated ``__init__``
        d = result.__dict__  # skipped
        d.update(fields)
        d["full_overlap"] = self.plan.comm_overlap == "full"
        d["in_flight"] = self.in_flight if mode == "decode" else 0
        return result

    def pass_fields(
        self, mode: str, q: int, kv: np.ndarray, steps: StepWeights, points_key: Hashable | None
    ) -> dict:
        """Every ``PassResult`` field of a pass but the two that depend on the plan (its comm
        overlap, micro-batches in flight), with its stage ``groups``; kept in the plan base
        for its other plans (other comm overlap) unless ``points_key`` is None."""
        pkey = (mode, points_key)
        fields = self.base.pass_parts.get(pkey) if points_key is not None else None
        if fields is not None:
            return fields
        layer_arrays, layer_comm, extras, transfer, shared = self._pass_parts(
            mode, q, kv, steps, points_key
        )
        groups = shared.groups = pass_groups(
            self.stage_kind_counts, layer_arrays, extras, self.ctx.row_groups
        )
        fields = {
            "stage_layers": self.base.stage_layers,
            "counts": self.stage_kind_counts,
            "layer": layer_arrays,
            "comm": layer_comm,
            "extras": extras,
            "transfer": transfer,
            "steps": steps,
            "row_groups": self.ctx.row_groups,
            "shared": shared,
            "_comm_totals": shared.comm_totals,  # already summed: no cached-property call
            "groups": groups,  # found once: the base's other plans read it
        }
        if points_key is not None:
            self.base.pass_parts[pkey] = fields
        return fields

    def _pass_parts(
        self, mode: str, q: int, kv: np.ndarray, steps: StepWeights, points_key: Hashable | None
    ) -> tuple[dict, dict, dict, Cost, PassFigures]:
        """(layer arrays by kind, collectives by kind, extras by stage, transfer, a memo of the
        figures that follow from them alone) of one pass."""
        ctx, plan, shape = self.ctx, self.plan, self.shape
        layer_arrays: dict[LayerKind, StageArrays] = {}
        layer_comm: dict[LayerKind, dict[str, Cost]] = {}
        # Plans that differ only in what does not change a layer's cost share it (the
        # comm-overlap choice, dp versus ep placement with equal shapes, …).
        # small interned ids: a key never hashes the shard or the schemes again
        shard_key = (self.base.shard_id, mode)
        comm_key = (self.base.comm_id, mode)
        layer_cache = ctx.layer_cache if points_key is not None else {}
        opts = None  # how this chip kind carries the collectives (asked once, on a miss)
        comm_totals: dict[LayerKind, float] = {}  # Σ of one layer's collectives, by kind
        comm_cache, totals_memo = ctx.comm_cache, ctx.comm_totals
        for kind in self.distinct_kinds:
            priced = layer_cache.get((shard_key, kind, points_key))  # ``_layer``'s hit inline
            if priced is None:
                priced = self._layer(kind, mode, q, kv, steps, points_key, layer_cache)
            layer_arrays[kind] = priced
            ckey = (comm_key, kind)
            comm = comm_cache.get(ckey)
            if comm is None:
                if opts is None:
                    opts = ctx.pricer.collective_options(self.base.load(mode))
                comm = layer_collectives(
                    ctx.priced_net,
                    shape,
                    kind,
                    mode,
                    q,
                    dense=self.dense,
                    moe=self.moe,
                    cp=plan.cp,
                    input_seq_len=ctx.workload.input_seq_len,
                    load=opts.load,
                    rows=self._rows,
                    micro=self.shard.micro,
                    shared_with_experts=opts.shared_with_experts,
                    reduce_bytes=opts.reduce_bytes,
                    distinct_ranks=opts.distinct_ranks,
                    combine_bytes=opts.combine_bytes,
                )
                comm_cache[ckey] = comm
            layer_comm[kind] = comm
            total = totals_memo.get(ckey)
            if total is None:  # once per collectives (``PassResult._comm_totals``'s sum)
                total = 0
                for c in comm.values():
                    total += c.seconds
                totals_memo[ckey] = total
            comm_totals[kind] = total
        ekey = (shard_key, plan.pp, points_key)
        extras_cache = ctx.extras_cache if points_key is not None else {}
        cached = extras_cache.get(ekey)
        if cached is None:
            cached = (
                ctx.pricer.extras(  # embedding, LM head (, step overhead) by stage index
                    shape,
                    mode,
                    q,
                    steps,
                    plan.pp - 1,
                    extras_cache,
                    (shard_key, "priced", points_key),
                ),
                pipeline_transfer(ctx.priced_net, self.dense, shape, q),
            )
            extras_cache[ekey] = cached
        extras, transfer = cached
        return layer_arrays, layer_comm, extras, transfer, PassFigures.with_comm_totals(comm_totals)

    @cached
    def prefill(self) -> PassResult:
        return self._run_pass("prefill", self.shard.q_prefill, self.prefill_kv, ONE_STEP, ())

    def prefill_fields(self) -> dict:
        """``pass_fields`` of the prefill (shared by the plans of this base)."""
        fields = self.base.pass_parts.get(PREFILL_KEY)
        if fields is None:
            q = self.shard.q_prefill
            fields = self.pass_fields("prefill", q, self.prefill_kv, ONE_STEP, ())
        return fields

    @property
    def prefill_kv(self) -> np.ndarray:
        """The prefill's KV length as a one-point array (one per context, read-only)."""
        ctx = self.ctx
        kv = ctx.prefill_kv
        if kv is None:
            kv = ctx.prefill_kv = np.array([float(ctx.workload.input_seq_len)])
            kv.setflags(write=False)
        return kv

    @cached
    def decode(self) -> PassResult:
        """Every decode step: step j attends to ceil((S_in + j) / cp) tokens (§4.6), priced at
        the weighted points of a ``DecodeGrid`` (refined where a check fails)."""
        base = self.base
        grid = base.layer_grid  # the same for the plans that differ in comm overlap
        if grid is None:  # and for the plan bases of one priced shard (``shard_id``: its
            # fields, tp and cp, which fix the KV read per token and the layer prices)
            ctx = self.ctx
            grid = ctx.shard_grids.get(base.shard_id)
            if grid is None:
                grid = ctx.decode_grid(self.plan.cp, decode_kv_read_bytes(self.shape))
                grid = ctx.shard_grids[base.shard_id] = self._layer_grid(grid)
            base.layer_grid = grid
        if not grid.checks:  # nothing to check: the pass at the base grid's points
            fields = base.pass_parts.get(("decode", grid.token))  # ``_run_pass``'s hit inline
            if fields is None:
                return self._run_pass("decode", 1, grid.kv, grid.weights, grid.token)
            result = object.__new__(PassResult)
            d = result.__dict__
            d.update(fields)
            d["full_overlap"] = self.plan.comm_overlap == "full"
            d["in_flight"] = self.in_flight
            return result
        for tries in range(MAX_REFINES + 1):
            key = grid.token  # refined grids too: plans of one layer shape share their switches
            result = self._run_pass("decode", 1, grid.kv, grid.weights, key)
            failed = result.failed_checks(grid)
            if not failed:
                return result
            grid = self._refined(grid, failed, tries == MAX_REFINES - 1)
        raise AssertionError("unreachable: the last refinement enumerates every failed piece")
