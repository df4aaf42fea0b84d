"""A pass priced step by step: each layer at each step, each stage, the period (§3.3, §4.6).

Arrays run over steps (the prefill is one step; a decode of n tokens is n steps, step ``j``
attending to ``ceil((S_in + j) / cp)`` tokens): one entry per generated token, no compression.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from plena_opt.estimate.comm import Cost
from plena_opt.estimate.layer import LayerKind, layer_cycles, layer_traffic
from plena_opt.estimate.pricing import StepWeights
from plena_opt.estimate.reference.collectives import layer_collectives, pipeline_transfer
from plena_opt.estimate.reference.layout import PlanLayout
from plena_opt.memory import Memory


@dataclass(frozen=True)
class LayerPrice:
    """One layer (or an embedding / LM head) on one device, per step: seconds (the roofline
    of compute and DRAM seconds), quantised read and write bytes, and ``seconds`` where the
    memory bounds it (else 0; a GPU decides that per kernel)."""

    seconds: np.ndarray
    compute_seconds: np.ndarray
    memory_seconds: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    memory_bound_seconds: np.ndarray


@dataclass(frozen=True)
class PassPrice:
    """A pipelined pass, per step: one priced layer of each kind, its collectives by name,
    the extras (embedding, LM head) by stage, the boundary transfer and each stage's seconds
    ``stages[stage, step]``."""

    layers: dict[LayerKind, LayerPrice]
    collectives: dict[LayerKind, dict[str, Cost]]
    extras: dict[int, list[LayerPrice]]
    transfer: Cost
    stages: np.ndarray


def decode_kv_lengths(input_len: int, output_len: int, cp: int) -> np.ndarray:
    """KV length of each decode step: step j attends to ``ceil((S_in + j) / cp)`` tokens."""
    j = np.arange(output_len, dtype=np.int64)
    return ((input_len + j + cp - 1) // cp).astype(float)


def quantised_bytes(parts: Mapping[str, np.ndarray | float], memory: Memory, n: int) -> np.ndarray:
    """Σ of the positive traffic components, each rounded up to the memory's transfer
    granularity on its own (bytes per step)."""
    total = np.zeros(n)
    for value in parts.values():
        v = np.maximum(np.broadcast_to(np.asarray(value, dtype=float), (n,)), 0.0)
        total += memory.quantize_array(v, nonnegative=True)
    return total


def roofline(compute: np.ndarray, memory: np.ndarray, policy: str) -> np.ndarray:
    """A stage's time from its compute and DRAM times: the slower of the two under
    ``stage-roofline`` (they overlap), their sum under ``serial`` (§3.3)."""
    return np.maximum(compute, memory) if policy == "stage-roofline" else compute + memory


def price_traffic(
    lay: PlanLayout, cycles: np.ndarray | float, reads: Mapping, writes: Mapping, n: int
) -> LayerPrice:
    """Cycles at the compute clock against quantised bytes at the memory's bandwidth."""
    ctx = lay.ctx
    mem = ctx.memory
    r, w = quantised_bytes(reads, mem, n), quantised_bytes(writes, mem, n)
    t_c = np.broadcast_to(np.asarray(cycles, dtype=float) / ctx.compute_hz, (n,))
    t_m = (r + w) / mem.usable_bandwidth_bytes_per_s
    seconds = roofline(t_c, t_m, ctx.workload.overlap_policy)
    return LayerPrice(seconds, t_c, t_m, r, w, np.where(t_m > t_c, seconds, 0.0))


def _from_stage_arrays(st) -> LayerPrice:
    fields = ("seconds", "compute_seconds", "memory_seconds", "read_bytes", "write_bytes")
    return LayerPrice(*(getattr(st, f) for f in fields), st.memory_bound_seconds)


def layer_price(lay: PlanLayout, kind: LayerKind, mode: str, q: int, kv: np.ndarray) -> LayerPrice:
    """One layer of ``kind`` at each KV length of ``kv`` (``q`` new tokens per sequence):
    PLENA from its ISA cycles and DRAM traffic, a GPU from its kernel curves."""
    ctx, n = lay.ctx, len(kv)
    load = lay.loads.get(mode)
    if ctx.pricer.kind != "plena":  # another chip kind: its pricer's own layer (a GPU's kernels)
        steps = StepWeights(np.ones(n), n)
        priced = ctx.pricer.layer(lay.shape, kind, mode, q, kv.copy(), load, steps, lay.plan.cp)
        return _from_stage_arrays(priced)
    cycles = layer_cycles(lay.shape, kind, mode, q, kv.copy(), load)
    reads, writes = layer_traffic(lay.shape, kind, mode, q, kv.copy(), lay.plan.cp, load)
    return price_traffic(lay, cycles, reads, writes, n)


def stage_extras(lay: PlanLayout, mode: str, q: int, n: int) -> dict[int, list[LayerPrice]]:
    """The embedding (prefill, first stage) and the LM head (last stage, in the phases
    ``lm_head_phases`` names) on one device; a GPU adds its per-step overheads."""
    ctx, d = lay.ctx, lay.shard
    if ctx.pricer.kind != "plena":
        steps = StepWeights(np.ones(n), n)
        extras = ctx.pricer.extras(lay.shape, mode, q, steps, lay.pp - 1, {}, None)
        return {i: [_from_stage_arrays(e) for e in exs] for i, exs in extras.items()}
    h, prec, perf = ctx.model.hidden_size, ctx.precision, ctx.perf
    out: dict[int, list[LayerPrice]] = {}
    if mode == "prefill":
        rows = {"embedding_rows": d.b_dev * q * h * prec.activation_bytes}
        emb = price_traffic(lay, perf.embeddings(h, q, d.b_dev, "prefill"), rows, {}, n)
        out.setdefault(0, []).append(emb)
    lm_prefill, lm_decode = ctx.lm_head_phases()
    if (mode == "prefill" and lm_prefill) or (mode == "decode" and lm_decode):
        weights = {"lm_head_weights": d.vocab * h * prec.weight_bytes}
        lm = price_traffic(lay, perf.lm_head(h, d.vocab, d.b_dev), weights, {}, n)
        out.setdefault(lay.pp - 1, []).append(lm)
    return out


def layer_with_collectives(layer_seconds: np.ndarray, comm: float, full: bool) -> np.ndarray:
    """A layer's seconds with its collectives: their sum, or the slower of the two when the
    collectives run under the layer's compute (``comm_overlap = full``, §4.6)."""
    return np.maximum(layer_seconds, comm) if full else layer_seconds + comm


def stage_seconds(
    lay: PlanLayout,
    layers: Mapping[LayerKind, LayerPrice],
    collectives: Mapping[LayerKind, Mapping[str, Cost]],
    extras: Mapping[int, list[LayerPrice]],
    n: int,
) -> np.ndarray:
    """Each stage's seconds per step ``[pp, n]``: Σ over its layers of layer-with-collectives,
    plus its extras."""
    rows = np.zeros((lay.pp, n))
    for i, counts in enumerate(lay.stages):
        for kind, count in counts.items():
            comm = sum(c.seconds for c in collectives[kind].values())
            rows[i] += count * layer_with_collectives(layers[kind].seconds, comm, lay.full_overlap)
        for ex in extras.get(i, []):
            rows[i] += ex.seconds
    return rows


def price_pass(lay: PlanLayout, mode: str, q: int, kv: np.ndarray) -> PassPrice:
    """Every stage of one pass at the KV lengths ``kv`` (one per step)."""
    n = len(kv)
    layers = {k: layer_price(lay, k, mode, q, kv) for k in lay.ctx.distinct_kinds}
    collectives = {k: layer_collectives(lay, k, mode, q) for k in lay.ctx.distinct_kinds}
    extras = stage_extras(lay, mode, q, n)
    stages = stage_seconds(lay, layers, collectives, extras, n)
    return PassPrice(layers, collectives, extras, pipeline_transfer(lay, q), stages)


def prefill_pass(lay: PlanLayout) -> PassPrice:
    """The prefill: ``q_prefill = ceil(S_in / cp)`` tokens per sequence over a KV of S_in."""
    kv = np.array([float(lay.ctx.workload.input_seq_len)])
    return price_pass(lay, "prefill", lay.shard.q_prefill, kv)


def decode_pass(lay: PlanLayout) -> PassPrice:
    """Every decode step: one token per sequence at ``decode_kv_lengths``."""
    w = lay.ctx.workload
    return price_pass(
        lay, "decode", 1, decode_kv_lengths(w.input_seq_len, w.output_seq_len, lay.plan.cp)
    )


def pass_latency(p: PassPrice) -> np.ndarray:
    """One micro-batch through the pipeline, per step: Σ stages + (pp − 1) transfers."""
    return p.stages.sum(axis=0) + (len(p.stages) - 1) * p.transfer.seconds


def decode_period(p: PassPrice, in_flight: int) -> np.ndarray:
    """Seconds between a micro-batch's tokens, per step: the slowest stage + one transfer;
    with fewer micro-batches in flight than stages, at least (Σ stages + pp transfers) /
    in-flight (a token waits for its own trip round the pipeline, docs/deviations.md §5)."""
    period = p.stages.max(axis=0) + p.transfer.seconds
    if in_flight:
        loop = (p.stages.sum(axis=0) + len(p.stages) * p.transfer.seconds) / in_flight
        period = np.maximum(period, loop)
    return period
