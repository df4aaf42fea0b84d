"""A plan's headline figures from its step-by-step passes: TTFT, TPS, energy (§4.6, §4.8)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.plan import Plan
from plena_opt.estimate.reference.layout import PlanLayout, plan_layout
from plena_opt.estimate.reference.steps import (
    PassPrice,
    decode_pass,
    decode_period,
    pass_latency,
    prefill_pass,
)
from plena_opt.memory import DEFAULT_MEMORY_ENERGY

PJ = 1e-12  # joules per picojoule


@dataclass(frozen=True)
class ReferenceMetrics:
    """Seconds, tokens/s, pJ and J per generated token of one plan, priced step by step.

    ``energy_per_token_joules`` is priced for PLENA chips (DRAM + NoC, + compute where the chip
    states its power); None on a GPU chip (its board-power model is not restated here)."""

    prefill_latency_seconds: float
    first_decode_latency_seconds: float
    ttft_seconds: float
    decode_seconds: float
    decode_step_seconds: float
    tps: float
    tps_per_sequence: float
    noc_energy_pj_per_decode_token: float | None
    energy_per_token_joules: float | None


@dataclass(frozen=True)
class DecodeSums:
    """Sums over every decode step of one layer of each kind (fields of ``LayerPrice``;
    ``overlap_excess``: what full overlap hides of the collectives, 0 otherwise) and of the
    pipeline (``decode_seconds`` = Σ periods, their mean, the mean Σ of stage seconds, and the
    first step's latency)."""

    seconds: float
    compute_seconds: float
    memory_seconds: float
    memory_bound_seconds: float
    read_bytes: float
    write_bytes: float
    overlap_excess: float
    decode_seconds: float
    period_mean: float
    stage_mean: float
    first_latency: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def ttft(prefill: PassPrice, decode: PassPrice) -> float:
    """Time to first token: the prefill's latency plus the first decode step's (s)."""
    return float(pass_latency(prefill)[0]) + float(pass_latency(decode)[0])


def tokens_per_second(micro: int, output_len: int, decode_seconds: float) -> float:
    """Generated tokens per second of the whole pipeline: a micro-batch of ``micro``
    sequences leaves a token every period."""
    return micro * output_len / decode_seconds


def tokens_per_second_per_sequence(lay: PlanLayout, decode_seconds: float) -> float:
    """One sequence's tokens per second: it waits through ``pp`` micro-batches per token (or
    the micro-batches in flight, when fewer)."""
    cycle = lay.in_flight or lay.pp
    return lay.ctx.workload.output_seq_len / (cycle * decode_seconds)


def noc_energy_per_decode_token(lay: PlanLayout, decode: PassPrice) -> float | None:
    """NoC energy per generated token (pJ): (Σ layers Σ collectives E / pp + the boundary
    transfers' E) / micro (§4.8); None without NoC energy coefficients."""
    ctx = lay.ctx
    if ctx.noc.energy is None:
        return None
    if lay.plan.world_size == 1:
        return 0.0
    total = 0.0
    for kind, count in ctx.kind_totals.items():
        total += count * sum((c.energy_pj or 0.0) for c in decode.collectives[kind].values())
    transfer = decode.transfer.energy_pj or 0.0
    return (total / lay.pp + transfer) / lay.shard.micro


def pass_field_total(lay: PlanLayout, p: PassPrice, name: str) -> float:
    """Σ over every step, stage and layer of one ``LayerPrice`` field of a pass (one device of
    each stage; collectives not included): the single-chip report's phase totals."""
    total = sum(float(getattr(ex, name).sum()) for exs in p.extras.values() for ex in exs)
    for kind, count in lay.ctx.kind_totals.items():
        total += count * float(getattr(p.layers[kind], name).sum())
    return total


def plena_energy_per_token(lay: PlanLayout, decode: PassPrice, decode_s: float) -> float | None:
    """Joules per generated token on a PLENA chip: every device of a stage moves that stage's
    DRAM bytes (the memory's energy, or the cited HBM default without one), plus the NoC, plus
    busy/idle compute power where the chip states it."""
    ctx, plan = lay.ctx, lay.plan
    out = ctx.workload.output_seq_len
    reads = pass_field_total(lay, decode, "read_bytes")
    writes = pass_field_total(lay, decode, "write_bytes")
    dram = ctx.memory.energy_pj(reads, writes)
    if dram is None:
        dram = DEFAULT_MEMORY_ENERGY.energy_pj(reads, writes)
    dram *= plan.world_size / plan.pp / (lay.shard.micro * out)
    energy = (dram + (noc_energy_per_decode_token(lay, decode) or 0.0)) * PJ
    power = ctx.chip.power
    if power is not None:
        busy = pass_field_total(lay, decode, "compute_seconds") * plan.world_size / plan.pp
        idle = max(decode_s * plan.world_size - busy, 0.0)
        energy += (busy * power.busy_watts + idle * power.idle_watts) / (lay.shard.micro * out)
    return energy


def reference_metrics(ctx: EstimateContext, plan: Plan) -> ReferenceMetrics:
    """Price ``plan`` on ``ctx``'s problem step by step (raises ``PlenaInputError`` for an
    illegal plan)."""
    lay = plan_layout(ctx, plan)
    prefill, decode = prefill_pass(lay), decode_pass(lay)
    out = ctx.workload.output_seq_len
    decode_s = float(decode_period(decode, lay.in_flight).sum())
    return ReferenceMetrics(
        prefill_latency_seconds=float(pass_latency(prefill)[0]),
        first_decode_latency_seconds=float(pass_latency(decode)[0]),
        ttft_seconds=ttft(prefill, decode),
        decode_seconds=decode_s,
        decode_step_seconds=decode_s / out,
        tps=tokens_per_second(lay.shard.micro, out, decode_s),
        tps_per_sequence=tokens_per_second_per_sequence(lay, decode_s),
        noc_energy_pj_per_decode_token=noc_energy_per_decode_token(lay, decode),
        energy_per_token_joules=(
            None if ctx.pricer.kind != "plena" else plena_energy_per_token(lay, decode, decode_s)
        ),
    )


def decode_sums(ctx: EstimateContext, plan: Plan) -> DecodeSums:
    """Every decode step priced on its own and summed plainly (one layer of each kind, and the
    pipeline): what ``estimate.decode``'s weighted points must reproduce."""
    lay = plan_layout(ctx, plan)
    decode = decode_pass(lay)
    sums = dict.fromkeys(
        ("seconds", "compute_seconds", "memory_seconds", "memory_bound_seconds"), 0.0
    ) | {"read_bytes": 0.0, "write_bytes": 0.0, "overlap_excess": 0.0}
    for kind, la in decode.layers.items():
        for name in ("seconds", "compute_seconds", "memory_seconds", "memory_bound_seconds"):
            sums[name] += float(getattr(la, name).sum())
        sums["read_bytes"] += float(la.read_bytes.sum())
        sums["write_bytes"] += float(la.write_bytes.sum())
        if lay.full_overlap:  # what full overlap hides (decode attribution); 0 otherwise
            comm = sum(c.seconds for c in decode.collectives[kind].values())
            sums["overlap_excess"] += float(np.maximum(comm - la.seconds, 0.0).sum())
    period = decode_period(decode, lay.in_flight)
    return DecodeSums(
        **sums,
        decode_seconds=float(period.sum()),
        period_mean=float(period.mean()),
        stage_mean=float(decode.stages.mean(axis=1).sum()),
        first_latency=float(pass_latency(decode)[0]),
    )
