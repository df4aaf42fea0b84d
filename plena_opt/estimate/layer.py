"""One transformer layer on one device: compute cycles and DRAM traffic (analytic-model §4.4).

A layer is one roofline stage: the attention half plus the MLP half (dense FFN or routed
experts). Decode cycles are doubled by the caller's ``DECODE_ISSUE_FACTOR`` (spec §2.1, §6).
Traffic is a pair of ordered dicts ``(reads, writes)`` of bytes per component; ``price_stage``
quantises each component separately (§3.3), so the component split is part of the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

import numpy as np

from plena_opt.chip import PerfModel
from plena_opt.estimate.moe_load import MoeLoad, moe_cycles
from plena_opt.estimate.shard import DeviceShard
from plena_opt.memory import HbmStoragePrecision
from plena_opt.models import ModelSpec

DECODE_ISSUE_FACTOR = 2  # "issue + memory access pipeline" factor on transformer blocks (§2.1)


@dataclass(frozen=True)
class LayerKind:
    """What distinguishes layers for costing: attention type and MLP type."""

    sliding: bool
    moe: bool


def layer_kinds(model: ModelSpec) -> list[LayerKind]:
    """The kind of every layer, in order."""
    return [
        LayerKind(sliding=lt == "sliding_attention", moe=mt == "moe")
        for lt, mt in zip(model.layer_types, model.mlp_types, strict=True)
    ]


@dataclass(frozen=True)
class LayerShape:
    """Everything a layer cost needs that does not vary with the KV length."""

    model: ModelSpec
    shard: DeviceShard
    perf: PerfModel
    precision: HbmStoragePrecision
    tp: int


def layer_cycles(
    s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray, load: MoeLoad | None
) -> np.ndarray:
    """Cycles of one layer (attention half + MLP half) at each KV length in ``kv``.

    Attention half: rms + projection/tp (fractional, not rounded, §6) + attention + residual.
    MLP half: rms + dense FFN or routed experts (+ residual for the moe family).
    Decode cycles include the ×2 issue factor.
    """
    m, d, p = s.model, s.shard, s.perf
    h, b = m.hidden_size, d.b_dev
    base = p.rms_layer(h, q, b, mode)
    base += p.projection(h, m.num_heads, m.num_kv_heads, m.head_dim, q, b, mode) / s.tp
    base += p.residual(h, q, b, mode)
    base += p.rms_layer(h, q, b, mode)
    if kind.moe:
        base += moe_cycles(p, m, load, d.expert_ffn, mode)
    else:
        base += p.feed_forward(h, d.ffn, q, b, mode)
    if m.family == "moe":
        base += p.residual(h, q, b, mode)
    cyc = _attention_cycles(s, kind, mode, q, kv)  # a fresh array: updated in place
    cyc += base
    if mode == "decode":
        cyc *= DECODE_ISSUE_FACTOR
    return cyc


def _attention_cycles(
    s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray
) -> np.ndarray:
    """Attention cycles per KV length.

    Decode flash attention is linear in ceil(kv/MLEN) (§1.4); sliding attention depends on kv
    only through min(kv, W), so each distinct value is priced once.
    """
    m, d, p = s.model, s.shard, s.perf
    args = (d.heads, d.kv_heads, m.head_dim)
    if kind.sliding:
        w = m.sliding_window
        attended = np.minimum(kv, w) if mode == "decode" else kv
        uniq, inverse = np.unique(attended, return_inverse=True)
        vals = np.array(
            [p.sliding_window_attention(*args, q, int(a), d.b_dev, w, 1, mode) for a in uniq],
            dtype=float,
        )
        return vals[inverse]
    if mode == "decode":
        per_tile = p.flash_attention(*args, 1, 1, d.b_dev, mode)
        tiles = kv / p.MLEN
        np.ceil(tiles, out=tiles)
        tiles *= per_tile
        return tiles
    uniq, inverse = np.unique(kv, return_inverse=True)
    vals = np.array([p.flash_attention(*args, q, int(a), d.b_dev, mode) for a in uniq], dtype=float)
    return vals[inverse]


def layer_traffic(
    s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray, cp: int, load: MoeLoad | None
) -> tuple[dict[str, np.ndarray | float], dict[str, float]]:
    """DRAM bytes of one layer: ``(reads, writes)`` by component (§4.4)."""
    m, d, prec = s.model, s.shard, s.precision
    weights = attention_weight_bytes(s) + mlp_weight_bytes(s, kind, load)
    r = ceil(q / s.perf.MLEN) if mode == "prefill" else 1
    attended = np.minimum(kv, m.sliding_window) if kind.sliding else kv
    kv_read = attended * (r * 2 * d.b_dev * d.kv_heads * m.head_dim)
    kv_read *= prec.kv_read_bytes
    tokens = q if mode == "prefill" else 1 / cp
    kv_write = 2 * d.b_dev * d.kv_heads * m.head_dim * tokens * prec.kv_write_bytes
    reads: dict[str, np.ndarray | float] = {"weights": weights, "kv_cache": kv_read}
    writes: dict[str, float] = {"kv_cache": kv_write}
    if mode == "prefill":
        sites = 3 + (2 if m.family == "moe" else 1)
        spill = sites * spill_elements(s, q) * prec.activation_bytes
        reads["activation_spill"] = spill
        writes["activation_spill"] = spill
    return reads, writes


def spill_elements(s: LayerShape, q: int) -> int:
    """Activation elements beyond vector SRAM at one spill site (prefill only)."""
    return max(0, s.model.hidden_size * s.shard.b_dev * q - s.perf.VS)


def attention_weight_elements(s: LayerShape) -> int:
    """Q, O, K, V projection weights held by one device (elements)."""
    m, d = s.model, s.shard
    return 2 * m.hidden_size * d.heads * m.head_dim + 2 * m.hidden_size * d.kv_heads * m.head_dim


def attention_weight_bytes(s: LayerShape) -> float:
    return attention_weight_elements(s) * s.precision.weight_bytes


def mlp_weight_bytes(s: LayerShape, kind: LayerKind, load: MoeLoad | None) -> float:
    """MLP weights read per pass: router + experts with at least one token, or the dense FFN."""
    m, d = s.model, s.shard
    h = m.hidden_size
    if kind.moe:
        elems = h * m.num_experts + load.active_experts * 3 * h * d.expert_ffn
        return elems * s.precision.weight_bytes
    return 3 * h * d.ffn * s.precision.weight_bytes
