"""The distributed estimate of one plan: pipelined prefill and decode passes (analytic-model §4.6).

``EstimateContext`` (``estimate.context``) holds what is fixed for a (model, NoC, memory, chip,
workload); ``PlanCost`` prices one plan: per-stage prefill and the whole decode (a few weighted
evaluation points standing for every generated token, ``estimate.decode``), priced by its base
``PlanPasses`` (``estimate.plan_passes``; a pass's sums in ``estimate.passes``), then TTFT, TPS,
footprints, NoC energy and warnings here.
``DistributedEstimate.to_dict()`` is the reference JSON (golden ``distributed.json`` outputs).
"""

from __future__ import annotations

from dataclasses import fields, replace
from math import ceil

from deepstack import NocProfile

from plena_opt.chip import ChipProfile
from plena_opt.estimate.attention_variants import linear_state_bytes
from plena_opt.estimate.cached import cached
from plena_opt.estimate.context import EstimateContext, shared_network
from plena_opt.estimate.layer import attention_weight_elements, dense_ffn_elements
from plena_opt.estimate.passes import PassResult, weighted_sum
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.plan_base import PlanBase, kv_cache_elements
from plena_opt.estimate.plan_passes import PlanPasses
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
    "PlanPasses",
    "estimate_distributed",
    "kv_cache_elements",
    "shared_network",
    "weighted_sum",
]

GIB = 2**30
# The priced fields of a stage (those of ``PhaseEstimate`` except the optional energy).
FIELDS = tuple(f.name for f in fields(PhaseEstimate) if f.name != "dram_energy_pj")


class PlanCost(PlanPasses):
    """Everything the analytic model says about one legal plan: the passes (``PlanPasses``),
    headline metrics, footprints, NoC energy, warnings and the reference report."""

    # -- headline metrics -------------------------------------------------------------------
    @cached
    def decode_seconds(self) -> float:
        return self.decode.period_total

    @property
    def ttft_seconds(self) -> float:
        return self.prefill.latency_at(0) + self.decode.latency_at(0)

    @property
    def tps(self) -> float:
        return self.shard.micro * self.ctx.workload.output_seq_len / self.decode_seconds

    @property
    def tps_per_sequence(self) -> float:
        cycle = self.in_flight or self.plan.pp  # micro-batches a sequence waits through
        return self.ctx.workload.output_seq_len / (cycle * self.decode_seconds)

    @property
    def footprint(self) -> tuple[float, float]:
        """(weight bytes, KV bytes) of the fullest stage on one device (§4.6)."""
        fp = self.base.footprint
        if fp is None:
            fp = self.base.footprint = self._fullest_stage()
        return fp

    def _fullest_stage(self) -> tuple[float, float]:
        """The first stage of the largest footprint (only the first stage of each distinct
        layout is priced: stages of equal layer counts and tables hold equal bytes)."""
        pp = self.plan.pp
        memo = self.ctx.row_groups.footprint_stages
        stages = memo.get(pp)
        if stages is None:
            first: dict[tuple, int] = {}
            for i, counts in enumerate(self.stage_kind_counts):
                first.setdefault((tuple(counts.items()), i == 0, i == pp - 1), i)
            stages = memo[pp] = sorted(first.values())
        best = None
        for wb, kb in self.stage_footprints(stages=stages):
            if best is None or wb + kb > best[0] + best[1]:
                best = (wb, kb)
        return best

    def stage_footprints(
        self, b_dev: int | None = None, stages: list[int] | None = None
    ) -> list[tuple[float, float]]:
        """(weight bytes, KV bytes) on one device of every pipeline stage, or of ``stages``
        (indices) (§4.6), with ``b_dev`` sequences per device (default: the plan's own)."""
        ctx, d, m, plan = self.ctx, self.shard, self.ctx.model, self.plan
        b_dev = d.b_dev if b_dev is None else b_dev
        h, prec = m.hidden_size, ctx.precision
        attn = attention_weight_elements(self.shape)
        physical = m.num_experts + ctx.workload.eplb_redundant  # EPLB replicas (estimate.eplb)
        experts = (physical // max(d.ep_moe, 1)) * 3 * h * d.expert_ffn
        moe_w = h * m.num_experts + experts + 3 * h * d.shared_ffn
        dense_w = dense_ffn_elements(self.shape)
        held = ceil((ctx.workload.input_seq_len + ctx.workload.output_seq_len) / plan.cp)
        shard = d if b_dev == d.b_dev else replace(d, b_dev=b_dev)
        shape = self.shape if shard is d else replace(self.shape, shard=shard)
        out = []
        all_counts = self.stage_kind_counts
        kv_of: dict = {}  # a kind's KV elements per layer: the same in every stage
        last = plan.pp - 1
        last_table = not (plan.pp == 1 and m.tie_word_embeddings)
        dense_wb = ctx.pricer.dense_weight_bytes  # an experts-only checkpoint format
        kept = ctx.pricer.bf16_attention  # MLA projections the checkpoint keeps in bf16
        for i in range(len(all_counts)) if stages is None else stages:
            welem = 0
            kvelem = 0
            state = 0.0  # Gated DeltaNet layers: a fixed state per sequence (attention_variants)
            for kind, n in all_counts[i].items():
                layer_attn = attention_weight_elements(shape, kind) if kind.linear else attn
                welem += n * (layer_attn + (moe_w if kind.moe else dense_w))
                kv = kv_of.get(kind)
                if kv is None:
                    kv = kv_of[kind] = kv_cache_elements(m, shard, kind, held)
                kvelem += n * kv
                if kind.linear:
                    state += n * linear_state_bytes(shape)
            tables = 0
            if i == 0:
                tables += 1
            if i == last and last_table:
                tables += 1
            welem += tables * d.vocab * h
            wbytes = welem * prec.weight_bytes
            if dense_wb is not None:
                moe_layers = sum(n for kind, n in all_counts[i].items() if kind.moe)
                quant = moe_layers * experts
                wbytes = quant * prec.weight_bytes + (welem - quant) * dense_wb
            if kept:
                o_proj = 0 if kept == "all" else d.heads * m.v_head_dim * h
                layers = sum(n for kind, n in all_counts[i].items() if not kind.linear)
                wbytes += layers * (attn - o_proj) * (2.0 - prec.weight_bytes)
            out.append((wbytes, kvelem * prec.kv_write_bytes + state))
        return out

    @property
    def fits_in_memory(self) -> bool | None:
        cap = self.ctx.memory.capacity_bytes
        if cap is None:
            return None
        wb, kb = self.footprint
        return wb + kb <= cap

    @cached
    def noc_energy_pj_per_decode_token(self) -> float | None:
        """(Σ_layers Σ_collectives E / pp + E(p2p, all boundaries)) / micro, pJ (§4.8)."""
        if self.ctx.noc.energy is None:
            return None
        if self.plan.world_size == 1:
            return 0.0
        shared = self.decode.shared  # the same for the plans that differ in comm overlap
        hit = shared.noc_energy
        if hit is None:
            comm = self.decode.comm
            total = 0.0
            for kind, count in self.ctx.kind_totals.items():
                total += count * sum((c.energy_pj or 0.0) for c in comm[kind].values())
            transfer = self.decode.transfer.energy_pj or 0.0
            hit = shared.noc_energy = (total / self.plan.pp + transfer) / self.shard.micro
        return hit

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
        out = list(self.base.plan_warnings)
        if self.in_flight:
            out.append(
                f"{self.in_flight} micro-batches of {self.shard.micro} for pp={self.plan.pp} "
                "stages: a micro-batch's next token waits for its own trip through the pipeline, "
                "so decode is priced at (sum of stages + pp transfers) / micro-batches per token "
                "when that exceeds the slowest stage (docs/deviations.md §5)"
            )
        if self.fits_in_memory is False:
            out.append(self.capacity_warning(single_chip=False))
        tail = ctx.input_warnings  # the same for every plan of the context: built once
        if tail is None:
            tail = ctx.input_warnings = [
                *ctx._memory_warnings,
                *m.not_modelled,  # parts of the model that are not priced (vision tower, …)
                *ctx.pricer.chip_warnings(m),  # what this chip kind does not price
            ]
        out.extend(tail)
        return out

    def moe_report(self) -> dict | None:
        m, d = self.ctx.model, self.shard
        if not m.num_experts:
            return None
        return {
            "tp": d.tp_moe,
            "ep": d.ep_moe,
            "dp": self.plan.dp,
            "experts_per_rank": (m.num_experts + self.ctx.workload.eplb_redundant) // d.ep_moe,
            "prefill": self.base.load("prefill").to_dict(),
            "decode": self.base.load("decode").to_dict(),
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
            chip=ctx.pricer.describe(),
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
