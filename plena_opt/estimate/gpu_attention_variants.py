"""GPU kernels of the attention variants beyond softmax attention (``estimate/gpu_layers.py``
prices the others; docs/models.md).

* **Gated DeltaNet** layer: the fused input projection (q, k, v, z, β, a), the causal short
  convolution (reads the projected rows and the cached window, writes the new window), the
  delta-rule recurrence and the gated RMSNorm, and the output projection. In decode the
  recurrence streams every sequence's fixed state in and out once (memory-bound:
  ``v_heads·d_k·d_v`` elements at ``linear_state_bytes``); in prefill it runs the chunked form
  (``attention_variants.GDN_CHUNK``-token chunks) whose products are priced as GEMMs.
* **DSA**: the lightning indexer's projections, its key-cache write and its scores of every
  cached key (an MQA-shaped pass of ``index_n_heads`` heads over one ``index_head_dim`` key per
  token), before MLA attends ``min(kv, index_topk)`` keys (``gpu_layers.mla_attention``).
"""

from __future__ import annotations

import numpy as np

from plena_opt.chip.gpu import GpuPerfModel, KernelTime
from plena_opt.estimate.attention_variants import (
    GDN_CHUNK,
    linear_conv_elements,
    linear_state_elements,
)
from plena_opt.estimate.layer import LayerShape


def gated_deltanet(p: GpuPerfModel, s: LayerShape, mode: str, q: int, T: int) -> list[KernelTime]:
    """The kernels of one Gated DeltaNet layer on one device for ``T`` new tokens."""
    m, d, ab = s.model, s.shard, p.ab
    h, dk, dv = m.hidden_size, m.linear_key_head_dim, m.linear_value_head_dim
    vh, kh = d.linear_v_heads, d.linear_k_heads
    vw, conv = vh * dv, 2 * kh * dk + vh * dv
    state = linear_state_elements(s) * m.linear_state_bytes
    window = linear_conv_elements(s) * p.kvb
    ks = [p.gemm(T, conv + vw + 2 * vh, h)]
    ks.append(p.elementwise(T * conv * ab + window, T * conv * ab + window))  # conv
    if mode == "decode":  # read and write every sequence's state once
        ks.append(p.elementwise(state + T * (conv + 2 * vh) * ab, state + T * vw * ab))
    else:
        rows = T * vh
        c = min(GDN_CHUNK, q)
        ks += [p.gemm(rows, dv, dk), p.gemm(rows, dv, dk), p.gemm(rows, dv, dk)]
        ks += [p.gemm(rows, c, dk), p.gemm(rows, dv, c), p.elementwise(state, state)]
    ks.append(p.elementwise(2 * T * vw * ab, T * vw * ab))  # gated RMSNorm
    ks.append(p.gemm(T, h, vw))
    return ks


def dsa_indexer(
    p: GpuPerfModel, s: LayerShape, mode: str, q: int, kv: np.ndarray, T: int
) -> list[KernelTime]:
    """The DSA indexer of one layer (replicated over TP); ``[]`` without DSA."""
    m, d = s.model, s.shard
    if not m.is_sparse:
        return []
    n, dim, h = m.index_n_heads, m.index_head_dim, m.hidden_size
    ks = [p.gemm(T, n * dim, m.q_lora_rank or h), p.gemm(T, dim + n, h)]
    ks.append(p.elementwise(2 * T * dim * p.ab, T * dim * p.kvb))  # k norm, RoPE, cache write
    if mode == "prefill":  # scores only (no P·V): half the head width gives 2·n·dim per key,
        ks.append(p.attention_prefill(d.b_dev, n, 1, dim // 2, q, kv))  # and K read once
    else:
        ks.append(p.attention_decode(d.b_dev, n, 1, dim, kv, latent=dim))
    return ks


def sparse_kv(s: LayerShape, kv: np.ndarray) -> np.ndarray:
    """Keys MLA attends per query: ``min(kv, index_topk)`` under DSA, else all."""
    m = s.model
    return np.minimum(kv, m.index_topk) if m.is_sparse else kv
