"""One transformer layer on one device: compute cycles and DRAM traffic (analytic-model §4.4).

A layer is one roofline stage: the attention half plus the MLP half (dense FFN or routed
experts). Decode cycles are doubled by the caller's ``DECODE_ISSUE_FACTOR`` (spec §2.1, §6).
Traffic is a pair of ordered dicts ``(reads, writes)`` of bytes per component; ``price_stage``
quantises each component separately (§3.3), so the component split is part of the model.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import ceil
from typing import TYPE_CHECKING

import numpy as np

from plena_opt.chip import PerfModel
from plena_opt.estimate import attention_variants as V  # no import of this module at run time
from plena_opt.estimate.moe_load import MoeLoad, moe_cycles
from plena_opt.estimate.shard import DeviceShard
from plena_opt.memory import HbmStoragePrecision
from plena_opt.models import ModelSpec

DECODE_ISSUE_FACTOR = 2  # "issue + memory access pipeline" factor on transformer blocks (§2.1)


_KINDS: dict[tuple[str, bool], LayerKind] = {}  # every ``LayerKind`` made, by its fields


@dataclass(frozen=True, eq=False, init=False)
class LayerKind:
    """What distinguishes layers for costing: attention type and MLP type.

    Interned: equal fields give the same object, so equality and hashing are by identity (the C
    defaults: every memo key of a plan holds a kind, and a dict lookup then calls no Python)."""

    attention: str  # full_attention / sliding_attention / chunked_attention
    moe: bool

    if TYPE_CHECKING:  # set by ``__new__``, not fields: what the attention type means, kept as
        # plain attributes (read per stage and layer on the cold path, not properties)
        sliding: bool  # a sliding-window layer
        chunked: bool  # a chunked (block-local) layer
        linear: bool  # a Gated DeltaNet (linear-attention) layer: fixed state, no KV cache

    def __new__(cls, attention: str, moe: bool) -> LayerKind:
        kind = _KINDS.get((attention, moe))
        if kind is None:
            kind = object.__new__(cls)
            kind.__dict__.update(
                attention=attention,
                moe=moe,
                sliding=attention == "sliding_attention",
                chunked=attention == "chunked_attention",
                linear=attention == "linear_attention",
            )
            kind = _KINDS.setdefault((attention, moe), kind)  # one object even when threads race
        return kind

    def __reduce__(self) -> tuple:
        return LayerKind, (self.attention, self.moe)  # str hashes differ between processes


def layer_kind_runs(model: ModelSpec) -> list[tuple[LayerKind, int]]:
    """``(kind, count)`` runs of consecutive layers, in order (memory independent of layers)."""
    return [
        (LayerKind(attention=r.attention, moe=r.mlp == "moe"), r.count) for r in model.layer_runs
    ]


def stage_counts(runs: list[tuple[LayerKind, int]], layers: int, pp: int) -> list[Counter]:
    """Per pipeline stage of ``ceil(layers / pp)`` layers, how many layers of each kind it holds
    (kinds in first-seen order within the stage)."""
    per_stage = ceil(layers / pp)
    counts = [Counter() for _ in range(pp)]
    start = 0
    for kind, n in runs:
        end = start + n
        first, last = start // per_stage, (end - 1) // per_stage
        for stage in range(first, min(last, pp - 1) + 1):
            lo, hi = max(start, stage * per_stage), min(end, (stage + 1) * per_stage)
            if hi > lo:
                counts[stage][kind] += hi - lo
        start = end
    return counts


@dataclass(frozen=True)
class LayerShape:
    """Everything a layer cost needs that does not vary with the KV length."""

    model: ModelSpec
    shard: DeviceShard
    perf: PerfModel
    precision: HbmStoragePrecision
    tp: int

    @classmethod
    def unchecked(
        cls, model: ModelSpec, shard: DeviceShard, perf: PerfModel,
        precision: HbmStoragePrecision, tp: int,
    ) -> LayerShape:  # fmt: skip
        """``LayerShape(model, shard, perf, precision, tp)`` without the frozen ``__init__``'s
        ``object.__setattr__`` per field (one per plan base on the cold path)."""
        shape = object.__new__(cls)
        shape.__dict__.update(model=model, shard=shard, perf=perf, precision=precision, tp=tp)
        return shape


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
    if kind.linear:  # Gated DeltaNet projections, convolution and gated norm
        base += V.linear_projection_cycles(s, q, mode)
    elif m.is_mla:  # per-device shapes already; the latent down-projection is replicated
        base += p.mla_projection(
            h,
            d.heads,
            m.q_lora_rank,
            m.kv_lora_rank,
            m.qk_rope_head_dim,
            m.head_dim,
            m.v_head_dim,
            q,
            b,
            mode,
        )
        base += V.indexer_projection_cycles(s, q, mode)  # DSA; 0 otherwise
    else:
        base += p.projection(h, m.num_heads, m.num_kv_heads, m.head_dim, q, b, mode) / s.tp
        base += V.gate_projection_cycles(s, q, mode)  # gated attention's query gate; 0 else
    base += p.residual(h, q, b, mode)
    for _ in range(m.norms_per_layer - 1):  # 1: one norm shared by a parallel block
        base += p.rms_layer(h, q, b, mode)  # 4: Gemma's post-attention / post-FFN norms too
    if kind.moe:
        base += moe_cycles(p, m, load, d.expert_ffn, mode)
        if d.shared_ffn:  # shared experts: a dense FFN over the plan's tp (docs/models.md)
            base += p.feed_forward(h, d.shared_ffn, q, b, mode)
    elif m.gated_mlp:
        base += p.feed_forward(h, d.ffn, q, b, mode)
    else:
        base += p.feed_forward_plain(h, d.ffn, q, b, mode)
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
    if kind.linear:
        return V.linear_attention_cycles(s, mode, q, kv)
    if m.is_mla:
        return _mla_attention_cycles(s, mode, q, kv)
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
    if kind.chunked and mode == "prefill":
        c = m.attention_chunk_size
        full, rest = divmod(q, c)
        cyc = full * p.flash_attention(*args, c, c, d.b_dev, mode) if full else 0
        cyc += p.flash_attention(*args, rest, rest, d.b_dev, mode) if rest else 0
        return np.full(kv.shape, float(cyc))
    if mode == "decode":
        per_tile = p.flash_attention(*args, 1, 1, d.b_dev, mode)
        tiles = chunked_attended(kv, m.attention_chunk_size) if kind.chunked else kv
        tiles = tiles / p.MLEN
        np.ceil(tiles, out=tiles)
        tiles *= per_tile
        return tiles
    if len(kv) == 1:  # the prefill point: one length, no need to find the distinct ones
        return np.array([float(p.flash_attention(*args, q, int(kv[0]), d.b_dev, mode))])
    uniq, inverse = np.unique(kv, return_inverse=True)
    vals = np.array([p.flash_attention(*args, q, int(a), d.b_dev, mode) for a in uniq], dtype=float)
    return vals[inverse]


def chunked_attended(kv: np.ndarray, chunk: int) -> np.ndarray:
    """Decode keys attended in a chunked layer: the current chunk so far (``kv mod C`` cached
    tokens plus the new one), never more than ``C``."""
    return np.mod(kv, chunk) + 1


def _mla_attention_cycles(s: LayerShape, mode: str, q: int, kv: np.ndarray) -> np.ndarray:
    """MLA: absorbed form in decode (linear in KV tiles), decompress + flash in prefill. Under
    DSA the indexer scores every key and the attention reads ``min(kv, index_topk)``."""
    m, d, p = s.model, s.shard, s.perf
    index = V.indexer_cycles(s, mode, q, kv) if m.is_sparse else 0.0
    kv = V.sparse_attended(s, kv)
    if mode == "decode":
        per_tile = p.mla_decode_attention_tc(d.heads, m.kv_lora_rank, m.qk_rope_head_dim, d.b_dev)
        tiles = kv / p.MLEN
        np.ceil(tiles, out=tiles)
        tiles *= per_tile
        tiles += p.mla_decode_absorb(
            d.heads, m.qk_nope_head_dim, m.kv_lora_rank, m.v_head_dim, d.b_dev
        )
        return tiles + index
    uniq, inverse = np.unique(kv, return_inverse=True)
    vals = np.array(
        [
            p.mla_prefill_attention(
                d.heads, m.qk_nope_head_dim, m.v_head_dim, m.kv_lora_rank, q, int(a), d.b_dev
            )
            for a in uniq
        ],
        dtype=float,
    )
    return vals[inverse] + index


def layer_traffic(
    s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray, cp: int, load: MoeLoad | None
) -> tuple[dict[str, np.ndarray | float], dict[str, float]]:
    """DRAM bytes of one layer: ``(reads, writes)`` by component (§4.4)."""
    m, prec = s.model, s.precision
    weights = attention_weight_bytes(s, kind) + mlp_weight_bytes(s, kind, load)
    r = ceil(q / s.perf.MLEN) if mode == "prefill" else 1
    if kind.linear or m.is_sparse:
        return V.variant_traffic(s, kind, mode, q, kv, weights, spill_elements(s, q))
    if kind.sliding:
        attended = np.minimum(kv, m.sliding_window)
    elif kind.chunked:
        c = m.attention_chunk_size
        attended = chunked_attended(kv, c) if mode == "decode" else np.minimum(kv, c)
    else:
        attended = kv
    tokens = q if mode == "prefill" else 1 / cp
    kv_read = attended * (r * kv_elements_per_token(s))
    kv_read *= prec.kv_read_bytes
    kv_write = kv_elements_per_token(s) * tokens * prec.kv_write_bytes
    reads: dict[str, np.ndarray | float] = {"weights": weights, "kv_cache": kv_read}
    writes: dict[str, float] = {"kv_cache": kv_write}
    if mode == "prefill":
        sites = 3 + (2 if m.family == "moe" else 1)
        spill = sites * spill_elements(s, q) * prec.activation_bytes
        reads["activation_spill"] = spill
        writes["activation_spill"] = spill
    return reads, writes


def kv_elements_per_token(s: LayerShape) -> int:
    """KV-cache elements one device holds per cached token and layer: K and V of its KV heads,
    or one MLA latent (replicated on every TP rank)."""
    m, d = s.model, s.shard
    if m.is_mla:
        return d.b_dev * m.kv_latent_dim
    return 2 * d.b_dev * d.kv_heads * m.head_dim


def decode_kv_read_bytes(s: LayerShape) -> float:
    """Decode KV-cache read bytes per attended token of one layer (as ``layer_traffic``)."""
    return float(kv_elements_per_token(s)) * s.precision.kv_read_bytes


def spill_elements(s: LayerShape, q: int) -> int:
    """Activation elements beyond vector SRAM at one spill site (prefill only)."""
    return max(0, s.model.hidden_size * s.shard.b_dev * q - s.perf.VS)


def attention_weight_elements(s: LayerShape, kind: LayerKind | None = None) -> int:
    """Q, O, K, V projection weights held by one device (elements).

    MLA: the down-projections (``h→q_lora``, ``h→kv_lora+rope``) are replicated over TP; the
    up-projections and the output projection are split by heads.
    """
    m, d = s.model, s.shard
    h = m.hidden_size
    if kind is not None and kind.linear:
        return V.linear_weight_elements(s)
    if m.is_mla:
        H, qk = d.heads, m.head_dim
        q = h * m.q_lora_rank + m.q_lora_rank * H * qk if m.q_lora_rank else h * H * qk
        kv = h * m.kv_latent_dim + m.kv_lora_rank * H * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + H * m.v_head_dim * h + V.indexer_weight_elements(s)
    gate = h * d.heads * m.head_dim if m.attn_output_gate else 0  # Qwen3-Next/3.5 query gate
    return 2 * h * d.heads * m.head_dim + 2 * h * d.kv_heads * m.head_dim + gate


def attention_weight_bytes(s: LayerShape, kind: LayerKind | None = None) -> float:
    return attention_weight_elements(s, kind) * s.precision.weight_bytes


def dense_ffn_elements(s: LayerShape) -> int:
    """Dense FFN weights on one device: 3 matrices if gated, 2 if not."""
    return (3 if s.model.gated_mlp else 2) * s.model.hidden_size * s.shard.ffn


def mlp_weight_bytes(s: LayerShape, kind: LayerKind, load: MoeLoad | None) -> float:
    """MLP weights read per pass: router + experts with at least one token (+ the shared
    experts' TP shard), or the dense FFN."""
    m, d = s.model, s.shard
    h = m.hidden_size
    if kind.moe:
        elems = h * m.num_experts + load.active_experts * 3 * h * d.expert_ffn
        if d.shared_ffn:
            elems += 3 * h * d.shared_ffn
        return elems * s.precision.weight_bytes
    if not m.gated_mlp:
        return dense_ffn_elements(s) * s.precision.weight_bytes
    return 3 * h * d.ffn * s.precision.weight_bytes
