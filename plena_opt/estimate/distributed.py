"""The distributed estimate of one plan: pipelined prefill and decode passes (analytic-model §4.6).

``EstimateContext`` (``estimate.context``) holds what is fixed for a (model, NoC, memory, chip,
workload); ``PlanCost`` prices one plan: per-stage prefill, the whole decode (a few weighted
evaluation points standing for every generated token, ``decode_steps``; passes in
``estimate.passes``), TTFT, TPS, footprints, NoC energy and warnings.
``DistributedEstimate.to_dict()`` is the reference JSON (golden ``distributed.json`` outputs).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import fields, replace
from functools import cached_property
from math import ceil

import numpy as np
from deepstack import NocProfile

from plena_opt.chip import ChipProfile
from plena_opt.estimate.comm import Cost, layer_collectives, pipeline_transfer
from plena_opt.estimate.context import EstimateContext, shared_network
from plena_opt.estimate.decode_checks import failed_pieces
from plena_opt.estimate.decode_steps import MAX_REFINES, DecodeGrid
from plena_opt.estimate.layer import (
    LayerKind,
    attention_weight_elements,
    decode_kv_read_bytes,
    dense_ffn_elements,
    layer_cycles,
    layer_traffic,
)
from plena_opt.estimate.passes import PassResult, weighted_sum
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.plan_base import PlanBase, kv_cache_elements
from plena_opt.estimate.pricing import ONE_STEP, StageArrays, StepWeights, price_arrays
from plena_opt.estimate.results import DistributedEstimate
from plena_opt.memory import Memory, PhaseEstimate
from plena_opt.models import ModelSpec

# Re-exported for the modules and tests that import them from here.
__all__ = [
    "FIELDS",
    "DistributedEstimate",
    "EstimateContext",
    "PassResult",
    "PlanBase",
    "PlanCost",
    "estimate_distributed",
    "kv_cache_elements",
    "shared_network",
    "weighted_sum",
]

GIB = 2**30
# The priced fields of a stage (those of ``PhaseEstimate`` except the optional energy).
FIELDS = tuple(f.name for f in fields(PhaseEstimate) if f.name != "dram_energy_pj")


class PlanCost:
    """Everything the analytic model says about one legal plan."""

    def __init__(self, ctx: EstimateContext, plan: Plan, *, validate: bool = True) -> None:
        self.ctx = ctx
        self.plan = plan
        # Everything but the passes is the same for plans that differ only in comm overlap.
        key = (plan.tp, plan.ep, plan.dp, plan.pp, plan.cp, plan.moe_tp_mode, validate)
        base = ctx.plan_bases.get(key)
        if base is None:
            base = ctx.plan_bases[key] = PlanBase(ctx, plan, validate)
        self.base = base
        self.plan_warnings = base.plan_warnings
        self.shard = base.shard
        self.priced_shard = base.priced_shard
        self.shape = base.shape
        self.dense = base.dense
        self.moe = base.moe
        self.stage_ranges = base.stage_ranges
        self.stage_kind_counts = base.stage_kind_counts
        self.distinct_kinds = ctx.distinct_kinds
        self.loads = base.loads
        self._rows = base.rows

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
        load = self.loads.get(mode)
        if ctx.gpu is not None:
            priced = ctx.gpu.layer(shape, kind, mode, q, kv, load, steps)
        else:
            cyc = layer_cycles(shape, kind, mode, q, kv, load)
            reads, writes = layer_traffic(shape, kind, mode, q, kv, self.plan.cp, load)
            priced = price_arrays(
                cyc, reads, writes, ctx.memory, ctx.compute_hz, ctx.workload.overlap_policy, steps
            )
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
            signs = []
            for kind in self.distinct_kinds:
                la = self._layer(
                    kind, "decode", 1, grid.kv, grid.weights, grid.token, ctx.layer_cache
                )
                signs.append(la.memory_seconds - la.compute_seconds)
            failed = failed_pieces(grid, signs, np.zeros((0, len(grid.kv))))
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
        ctx, plan, shape = self.ctx, self.plan, self.shape
        load = self.loads.get(mode)
        layer_arrays: dict[LayerKind, StageArrays] = {}
        layer_comm: dict[LayerKind, dict[str, Cost]] = {}
        # Plans that differ only in what does not change a layer's cost share it (the
        # comm-overlap choice, dp versus ep placement with equal shapes, …).
        # small interned ids: a key never hashes the shard or the schemes again
        shard_key = (self.base.shard_id, mode)
        comm_key = (self.base.comm_id, mode)
        layer_cache = ctx.layer_cache if points_key is not None else {}
        for kind in self.distinct_kinds:
            layer_arrays[kind] = self._layer(kind, mode, q, kv, steps, points_key, layer_cache)
            ckey = (comm_key, kind)
            comm = ctx.comm_cache.get(ckey)
            if comm is None:
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
                    load=ctx.gpu.collective_load(load) if ctx.gpu else load,
                    rows=self._rows,
                    micro=self.shard.micro,
                    shared_with_experts=ctx.gpu is not None,
                )
                ctx.comm_cache[ckey] = comm
            layer_comm[kind] = comm
        ekey = (shard_key, plan.pp, points_key)
        extras_cache = ctx.extras_cache if points_key is not None else {}
        cached = extras_cache.get(ekey)
        if cached is None:
            cached = (
                self._extras(mode, q, steps, extras_cache, (shard_key, "priced", points_key)),
                pipeline_transfer(ctx.priced_net, self.dense, shape, q),
            )
            extras_cache[ekey] = cached
        extras, transfer = cached
        result = PassResult(
            [len(r) for r in self.stage_ranges],
            self.stage_kind_counts,
            layer_arrays,
            layer_comm,
            extras,
            transfer,
            plan.comm_overlap == "full",
            steps,
            ctx.row_groups,
        )
        return result

    def _extras(
        self, mode: str, q: int, steps: StepWeights, cache: dict, key: tuple
    ) -> dict[int, list[StageArrays]]:
        """Embedding (prefill, first stage) and LM head (last stage) as separate stages; the
        priced pair is kept in ``cache`` under ``key`` for plans of another depth."""
        ctx = self.ctx
        if ctx.gpu is not None:
            return ctx.gpu.extras(self.shape, mode, q, steps, self.plan.pp - 1)
        pair = cache.get(key)
        if pair is None:
            pair = cache[key] = self._price_extras(mode, q, steps)
        emb, lm = pair
        out: dict[int, list[StageArrays]] = {}
        if emb is not None:
            out.setdefault(0, []).append(emb)
        if lm is not None:
            out.setdefault(self.plan.pp - 1, []).append(lm)
        return out

    def _price_extras(
        self, mode: str, q: int, steps: StepWeights
    ) -> tuple[StageArrays | None, StageArrays | None]:
        """(embedding, LM head) of one device, each None where the phase does not price it."""
        ctx, d = self.ctx, self.shard
        h, prec, perf = ctx.model.hidden_size, ctx.precision, ctx.perf
        price = lambda cyc, reads: price_arrays(  # noqa: E731
            cyc, reads, {}, ctx.memory, ctx.compute_hz, ctx.workload.overlap_policy, steps
        )
        emb = lm = None
        if mode == "prefill":
            emb = price(
                perf.embeddings(h, q, d.b_dev, "prefill"),
                {"embedding_rows": d.b_dev * q * h * prec.activation_bytes},
            )
        lm_prefill, lm_decode = ctx.lm_head_phases()
        if (mode == "prefill" and lm_prefill) or (mode == "decode" and lm_decode):
            lm = price(
                perf.lm_head(h, d.vocab, d.b_dev),
                {"lm_head_weights": d.vocab * h * prec.weight_bytes},
            )
        return emb, lm

    @cached_property
    def prefill(self) -> PassResult:
        q = self.shard.q_prefill
        kv = np.array([float(self.ctx.workload.input_seq_len)])
        return self._run_pass("prefill", q, kv, ONE_STEP, ())

    @cached_property
    def decode(self) -> PassResult:
        """Every decode step: step j attends to ceil((S_in + j) / cp) tokens (§4.6), priced at
        the weighted points of a ``DecodeGrid`` (refined where a check fails)."""
        grid = self.ctx.decode_grid(self.plan.cp, decode_kv_read_bytes(self.shape))
        grid = self._layer_grid(grid)
        for tries in range(MAX_REFINES + 1):
            key = grid.token  # refined grids too: plans of one layer shape share their switches
            result = self._run_pass("decode", 1, grid.kv, grid.weights, key)
            failed = result.failed_checks(grid)
            if not failed:
                return result
            grid = self._refined(grid, failed, tries == MAX_REFINES - 1)
        raise AssertionError("unreachable: the last refinement enumerates every failed piece")

    # -- headline metrics -------------------------------------------------------------------
    @cached_property
    def decode_seconds(self) -> float:
        return self.decode.steps.total(self.decode.period)

    @property
    def ttft_seconds(self) -> float:
        return self.prefill.latency_at(0) + self.decode.latency_at(0)

    @property
    def tps(self) -> float:
        return self.shard.micro * self.ctx.workload.output_seq_len / self.decode_seconds

    @property
    def tps_per_sequence(self) -> float:
        return self.ctx.workload.output_seq_len / (self.plan.pp * self.decode_seconds)

    @property
    def footprint(self) -> tuple[float, float]:
        """(weight bytes, KV bytes) of the fullest stage on one device (§4.6)."""
        fp = self.base.footprint
        if fp is None:
            fp = self.base.footprint = self._fullest_stage()
        return fp

    def _fullest_stage(self) -> tuple[float, float]:
        best = None
        for wb, kb in self.stage_footprints():
            if best is None or wb + kb > best[0] + best[1]:
                best = (wb, kb)
        return best

    def stage_footprints(self, b_dev: int | None = None) -> list[tuple[float, float]]:
        """(weight bytes, KV bytes) of every pipeline stage on one device (§4.6), with
        ``b_dev`` sequences per device (default: the plan's own)."""
        ctx, d, m, plan = self.ctx, self.shard, self.ctx.model, self.plan
        b_dev = d.b_dev if b_dev is None else b_dev
        h, prec = m.hidden_size, ctx.precision
        attn = attention_weight_elements(self.shape)
        moe_w = h * m.num_experts + (m.num_experts // max(d.ep_moe, 1)) * 3 * h * d.expert_ffn
        moe_w += 3 * h * d.shared_ffn
        dense_w = dense_ffn_elements(self.shape)
        held = ceil((ctx.workload.input_seq_len + ctx.workload.output_seq_len) / plan.cp)
        shard = d if b_dev == d.b_dev else replace(d, b_dev=b_dev)
        out = []
        for i, counts in enumerate(self.stage_kind_counts):
            welem = 0
            kvelem = 0
            for kind, n in counts.items():
                welem += n * (attn + (moe_w if kind.moe else dense_w))
                kvelem += n * kv_cache_elements(m, shard, kind, held)
            tables = 0
            if i == 0:
                tables += 1
            if i == plan.pp - 1 and not (plan.pp == 1 and m.tie_word_embeddings):
                tables += 1
            welem += tables * d.vocab * h
            out.append((welem * prec.weight_bytes, kvelem * prec.kv_write_bytes))
        return out

    @property
    def fits_in_memory(self) -> bool | None:
        cap = self.ctx.memory.capacity_bytes
        return None if cap is None else sum(self.footprint) <= cap

    @cached_property
    def noc_energy_pj_per_decode_token(self) -> float | None:
        """(Σ_layers Σ_collectives E / pp + E(p2p, all boundaries)) / micro, pJ (§4.8)."""
        if self.ctx.noc.energy is None:
            return None
        if self.plan.world_size == 1:
            return 0.0
        comm = self.decode.comm
        total = 0.0
        for kind, count in self.ctx.kind_totals.items():
            total += count * sum((c.energy_pj or 0.0) for c in comm[kind].values())
        transfer = self.decode.transfer.energy_pj or 0.0
        return (total / self.plan.pp + transfer) / self.shard.micro

    def capacity_warning(self, single_chip: bool) -> str:
        """The reference's words for weights + KV cache over capacity (distributed and
        single-chip estimates word it differently)."""
        wb, kb = self.footprint
        cap = self.ctx.memory.capacity_bytes / GIB
        if single_chip:
            return (
                f"weights ({wb / GIB:.2f} GiB) and KV cache ({kb / GIB:.2f} GiB) exceed the "
                f"memory capacity ({cap:.2f} GiB)"
            )
        return (
            f"a device of the fullest stage holds weights ({wb / GIB:.2f} GiB) and KV cache "
            f"({kb / GIB:.2f} GiB) beyond its memory capacity ({cap:.2f} GiB)"
        )

    @property
    def warnings(self) -> list[str]:
        """The plan's warnings (the same list for plans that differ only in comm overlap)."""
        out = self.base.warnings
        if out is None:
            out = self.base.warnings = self._warnings()
        return out

    def _warnings(self) -> list[str]:
        ctx, m = self.ctx, self.ctx.model
        out = list(self.plan_warnings)
        if self.fits_in_memory is False:
            out.append(self.capacity_warning(single_chip=False))
        out.extend(ctx._memory_warnings)
        out.extend(m.not_modelled)  # parts of the model that are not priced (vision tower, …)
        if ctx.gpu is not None:
            out.extend(ctx.gpu.warnings)
        width = m.head_dim * m.num_heads
        if width != m.hidden_size and not m.is_mla and ctx.gpu is None:
            out.append(
                f"head_dim * num_attention_heads ({width}) differs from hidden_size "
                f"({m.hidden_size}); weight traffic uses the true projection shapes, PerfModel's "
                "projection cycles assume hidden-wide Q/O"
            )
        return out

    def moe_report(self) -> dict | None:
        m, d = self.ctx.model, self.shard
        if not m.num_experts:
            return None
        return {
            "tp": d.tp_moe,
            "ep": d.ep_moe,
            "dp": self.plan.dp,
            "experts_per_rank": m.num_experts // d.ep_moe,
            "prefill": self.loads["prefill"].to_dict(),
            "decode": self.loads["decode"].to_dict(),
        }

    def to_estimate(self) -> DistributedEstimate:
        ctx, w = self.ctx, self.ctx.workload
        wb, kb = self.footprint
        return DistributedEstimate(
            model=ctx.model.describe(),
            plan=self.plan.to_dict(),
            noc=ctx.noc.describe(),
            memory=ctx.memory.describe(),
            precision=ctx.precision.to_dict(),
            batch_size=w.batch_size,
            micro_batch=self.shard.micro,
            sequences_per_device=self.shard.b_dev,
            input_seq_len=w.input_seq_len,
            output_seq_len=w.output_seq_len,
            overlap_policy=w.overlap_policy,
            comm_overlap=self.plan.comm_overlap,
            routing=w.routing if ctx.model.num_experts else None,
            include_lm_head=w.include_lm_head,
            compute_frequency_hz=ctx.compute_hz,
            ttft_seconds=self.ttft_seconds,
            tps=self.tps,
            tps_per_sequence=self.tps_per_sequence,
            prefill=self.prefill.report(0),
            first_token_decode=self.decode.report(0),
            decode_seconds=self.decode_seconds,
            weight_bytes_per_device=wb,
            kv_cache_bytes_per_device=kb,
            memory_capacity_bytes=ctx.memory.capacity_bytes,
            fits_in_memory=self.fits_in_memory,
            moe=self.moe_report(),
            noc_energy_pj_per_decode_token=self.noc_energy_pj_per_decode_token,
            warnings=list(self.warnings),
            chip=None if ctx.gpu is None else ctx.gpu.describe(),
        )


def estimate_distributed(
    model: ModelSpec,
    noc: NocProfile,
    memory: Memory,
    plan: Plan,
    workload: Workload,
    chip: ChipProfile | None = None,
) -> DistributedEstimate:
    """Estimate one plan (convenience wrapper over ``EstimateContext`` and ``PlanCost``)."""
    return PlanCost(EstimateContext(model, noc, memory, workload, chip), plan).to_estimate()
