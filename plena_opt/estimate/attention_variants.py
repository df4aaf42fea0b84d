"""PLENA cost of the attention variants beyond softmax attention (docs/models.md).

* **Gated DeltaNet** (``linear_attention`` layers): the input projection ``h → q, k, v, z, β, a``
  and the output projection (split by heads over TP), the short depthwise convolution, the gated
  RMSNorm, and the delta-rule state update. Decode reads and writes every sequence's fixed state
  (``v_heads × d_k × d_v`` per layer) once per step: its cost does not grow with the context.
  Prefill runs the chunked form in chunks of ``GDN_CHUNK`` tokens.
* **DeepSeek sparse attention** (DSA): the lightning indexer's projections and its scores of every
  cached key (``index_n_heads × index_head_dim`` per key), then MLA over the ``index_topk`` keys it
  picks (``min(kv, index_topk)`` attended keys, like a sliding window of ``index_topk``).

Shapes are per device: Gated DeltaNet heads are split over the plan's TP
(``DeviceShard.linear_k_heads``/``linear_v_heads``); the indexer is replicated on every TP rank
(one key per token, as the MLA latent).
"""

from __future__ import annotations

from math import ceil
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from plena_opt.estimate.layer import LayerKind, LayerShape

# Tokens per chunk of the chunked gated delta rule in prefill. Source: flash-linear-attention
# ``chunk_gated_delta_rule`` (chunk size 64), the kernel vLLM and SGLang run for Qwen3-Next /
# Qwen3.5 prefill; assumed, not fitted.
GDN_CHUNK = 64


def _rows(s: LayerShape, q: int, mode: str) -> int:
    return q * s.shard.b_dev if mode == "prefill" else s.shard.b_dev


def linear_projection_cycles(s: LayerShape, q: int, mode: str) -> int:
    """Gated DeltaNet projections, short convolution and gated norm of one layer (cycles)."""
    m, d, p = s.model, s.shard, s.perf
    h, b = m.hidden_size, d.b_dev
    vh, kh = d.linear_v_heads, d.linear_k_heads
    vw = vh * m.linear_value_head_dim
    conv = 2 * kh * m.linear_key_head_dim + vw
    rows = _rows(s, q, mode)
    cyc = p._matmul(rows, h, conv + vw + 2 * vh) + p._matmul(rows, vw, h)
    cyc += m.linear_conv_kernel_dim * p.residual(conv, q, b, mode)  # one MAC pass per tap
    cyc += p.rms_layer(vw, q, b, mode) + p.residual(vw, q, b, mode)  # gated RMSNorm
    return int(cyc)


def linear_attention_cycles(s: LayerShape, mode: str, q: int, kv: np.ndarray) -> np.ndarray:
    """The delta-rule recurrence of one layer at each KV length (constant in the context).

    Decode, per sequence and value head: ``k·S``, the rank-1 state update and ``q·S`` (three
    ``1 × d_k`` by ``d_k × d_v`` products). Prefill, per chunk of ``GDN_CHUNK`` tokens: the
    intra-chunk scores and values, the queries' and keys' products with the state and the state
    update."""
    m, d, p = s.model, s.shard, s.perf
    dk, dv, heads = m.linear_key_head_dim, m.linear_value_head_dim, d.linear_v_heads
    if mode == "decode":
        per_head = 3 * p._matmul(1, dk, dv)
    else:
        c = min(GDN_CHUNK, q)
        per_chunk = (
            p._matmul(c, dk, c) + p._matmul(c, c, dv) + 2 * p._matmul(c, dk, dv)
        ) + p._matmul(dk, c, dv)
        per_head = ceil(q / c) * per_chunk
    return np.full(kv.shape, float(per_head * heads * d.b_dev))


def linear_state_elements(s: LayerShape) -> int:
    """Fixed state one device holds for its sequences in one Gated DeltaNet layer: the
    recurrent state (at ``linear_state_bytes`` each) and the convolution window (KV bytes)."""
    m, d = s.model, s.shard
    return d.b_dev * d.linear_v_heads * m.linear_key_head_dim * m.linear_value_head_dim


def linear_conv_elements(s: LayerShape) -> int:
    """Convolution-window elements one device holds for its sequences in one layer."""
    m, d = s.model, s.shard
    conv = 2 * d.linear_k_heads * m.linear_key_head_dim + d.linear_v_heads * m.linear_value_head_dim
    return d.b_dev * max(m.linear_conv_kernel_dim - 1, 0) * conv


def linear_state_bytes(s: LayerShape) -> float:
    """Bytes of one layer's fixed state on one device (read and written every decode step)."""
    conv = linear_conv_elements(s) * s.precision.kv_write_bytes
    return linear_state_elements(s) * s.model.linear_state_bytes + conv


def linear_weight_elements(s: LayerShape) -> int:
    """Gated DeltaNet weights one device holds for one layer (heads split over TP)."""
    m, d = s.model, s.shard
    h, vw = m.hidden_size, d.linear_v_heads * m.linear_value_head_dim
    conv = 2 * d.linear_k_heads * m.linear_key_head_dim + vw
    return h * (conv + vw + 2 * d.linear_v_heads) + conv * m.linear_conv_kernel_dim + vw * h


def indexer_weight_elements(s: LayerShape) -> int:
    """DSA indexer weights (replicated over TP): ``wq_b``, ``wk``, ``weights_proj``."""
    m = s.model
    if not m.is_sparse:
        return 0
    n, dim, h = m.index_n_heads, m.index_head_dim, m.hidden_size
    return (m.q_lora_rank or h) * n * dim + h * dim + h * n


def indexer_projection_cycles(s: LayerShape, q: int, mode: str) -> int:
    """DSA indexer projections of one layer: queries from the Q latent, the shared key, the
    per-head weights and the key store (cycles; 0 without DSA)."""
    m, p = s.model, s.perf
    if not m.is_sparse:
        return 0
    rows, h = _rows(s, q, mode), m.hidden_size
    n, dim = m.index_n_heads, m.index_head_dim
    cyc = p._matmul(rows, m.q_lora_rank or h, n * dim) + p._matmul(rows, h, dim + n)
    return int(cyc + ((rows * dim) // p._chunk) * p._store)


def indexer_cycles(s: LayerShape, mode: str, q: int, kv: np.ndarray) -> np.ndarray:
    """The lightning indexer's scores over every cached key and the top-k pick, per KV length.

    Decode: per sequence and tile of ``MLEN`` keys, ``index_n_heads × d`` by ``d × MLEN`` scores,
    ReLU and the weighted head sum, and a vector top-k pass. Prefill: the ``q`` queries against
    the ``kv`` keys per head, and a top-k pass per query."""
    m, d, p = s.model, s.shard, s.perf
    n, dim = m.index_n_heads, m.index_head_dim
    if mode == "decode":
        per_tile = p._matmul(n, dim, p.MLEN) + n * p._vb + p._vtopk * ceil(p.MLEN / p.VLEN)
        tiles = np.ceil(kv / p.MLEN)
        return tiles * float(per_tile * d.b_dev)
    uniq, inverse = np.unique(kv, return_inverse=True)
    vals = [
        d.b_dev * (n * p._matmul(q, dim, int(a)) + q * ceil(int(a) / p.VLEN) * (p._vtopk + p._vb))
        for a in uniq
    ]
    return np.array(vals, dtype=float)[inverse]


def sparse_attended(s: LayerShape, kv: np.ndarray) -> np.ndarray:
    """Keys the attention reads per query: all of them, or ``index_topk`` under DSA."""
    m = s.model
    return np.minimum(kv, m.index_topk) if m.is_sparse else kv


def gate_projection_cycles(s: LayerShape, q: int, mode: str) -> int:
    """The output gate's half of a gated full-attention layer's query projection
    (``attn_output_gate``: Qwen3-Next, Qwen3.5); 0 otherwise."""
    m = s.model
    if not m.attn_output_gate:
        return 0
    return int(s.perf._matmul(_rows(s, q, mode), m.hidden_size, s.shard.heads * m.head_dim))


def variant_traffic(
    s: LayerShape, kind: LayerKind, mode: str, q: int, kv: np.ndarray, weights: float, spill: int
) -> tuple[dict[str, np.ndarray | float], dict[str, float]]:
    """DRAM bytes ``(reads, writes)`` of a Gated DeltaNet or DSA layer (as ``layer_traffic``).

    Gated DeltaNet: the fixed state is read and written once per pass, whatever the context.
    DSA: the MLA latents of the ``min(kv, index_topk)`` attended keys and the indexer keys of
    all ``kv`` are read (prefill: once per ``MLEN`` query tile); each new token writes both.
    ``spill``: activation elements beyond vector SRAM at one spill site (``layer.spill_elements``;
    prefill only)."""
    m, d, prec = s.model, s.shard, s.precision
    prefill = mode == "prefill"
    if kind.linear:
        state = linear_state_bytes(s)
        reads: dict[str, np.ndarray | float] = {
            "weights": weights,
            "kv_cache": np.full(kv.shape, state),
        }
        writes: dict[str, float] = {"kv_cache": state}
    else:
        r = ceil(q / s.perf.MLEN) if prefill else 1
        tokens = q if prefill else 1
        lat, dim = d.b_dev * m.kv_latent_dim, d.b_dev * m.index_head_dim
        reads = {
            "weights": weights,
            "kv_cache": sparse_attended(s, kv) * (r * lat * prec.kv_read_bytes),
            "indexer_keys": kv * (r * dim * prec.kv_read_bytes),
        }
        writes = {
            "kv_cache": lat * tokens * prec.kv_write_bytes,
            "indexer_keys": dim * tokens * prec.kv_write_bytes,
        }
    if prefill:
        sites = 3 + (2 if m.family == "moe" else 1)
        spilled = sites * spill * prec.activation_bytes
        reads["activation_spill"] = spilled
        writes["activation_spill"] = spilled
    return reads, writes
