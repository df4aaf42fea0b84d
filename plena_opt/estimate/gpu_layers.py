"""The kernels of one layer on a GPU (the lists ``estimate/gpu.py`` prices), by layer family.

Attention half: GQA (MHA/GQA/MQA; full, sliding or chunked) or MLA (DeepSeek: absorbed latent
attention in decode, decompressed K/V in prefill, as vLLM runs it). MLP half: gated or plain
dense FFN, or routed experts (+ the shared experts' dense FFN). Norm kernels follow the model's
``norms_per_layer``; ``qk_norm`` adds one kernel over Q and K.
"""

from __future__ import annotations

import numpy as np

from plena_opt.chip.gpu import GpuPerfModel, KernelTime
from plena_opt.estimate.layer import LayerKind, LayerShape, chunked_attended


def norms(p: GpuPerfModel, s: LayerShape, T: int) -> list[KernelTime]:
    """The layer's RMSNorms, each fused with its residual add."""
    h, ab = s.model.hidden_size, p.ab
    norm = p.elementwise(2 * T * h * ab + h * 2, 2 * T * h * ab)
    return [norm] * s.model.norms_per_layer


def attended(s: LayerShape, kind: LayerKind, kv: np.ndarray) -> np.ndarray:
    """Keys a decode query attends (sliding window, attention chunk or all); prefill counts its
    (query, key) pairs in ``_gqa_prefill``."""
    m = s.model
    if kind.sliding:
        return np.minimum(kv, m.sliding_window)
    if kind.chunked:
        return chunked_attended(kv, m.attention_chunk_size)
    return kv


def gqa_attention(p: GpuPerfModel, s: LayerShape, kind: LayerKind, mode: str, q: int,
                  kv: np.ndarray, T: int) -> list[KernelTime]:  # fmt: skip
    """QKV GEMM, (QK-norm), RoPE, KV-cache write, attention, O GEMM."""
    m, d, ab = s.model, s.shard, p.ab
    h, hd = m.hidden_size, m.head_dim
    qk = T * (d.heads + d.kv_heads) * hd * ab
    gate = d.heads * hd if m.attn_output_gate else 0  # Qwen3-Next/3.5 gated attention
    ks = [p.gemm(T, (d.heads + 2 * d.kv_heads) * hd + gate, h)]
    if m.qk_norm:
        ks.append(p.elementwise(qk, qk))
    ks.append(p.elementwise(qk, qk))  # RoPE
    ks.append(p.elementwise(2 * T * d.kv_heads * hd * ab, 2 * T * d.kv_heads * hd * p.kvb))
    if mode == "prefill":
        ks.append(_gqa_prefill(p, s, kind, q, kv))
    else:
        a = attended(s, kind, kv)
        past = np.asarray(kv) > m.sliding_window if kind.sliding else False
        ks.append(p.attention_decode(d.b_dev, d.heads, d.kv_heads, hd, a, past_window=past))
    ks.append(p.gemm(T, h, d.heads * hd))
    return ks


def _gqa_prefill(p: GpuPerfModel, s: LayerShape, kind: LayerKind, q: int,
                 kv: np.ndarray) -> KernelTime:  # fmt: skip
    """Causal prefill attention of ``q`` new tokens ending at ``kv`` keys. A sliding-window
    layer's query at position j (1-based) attends min(j, window) keys and the kernel reads the
    last q + window keys at most (FlashAttention's local attention); a chunked layer's query
    attends its chunk so far, (j − 1) mod chunk + 1 keys (Llama 4's chunked attention)."""
    m, d = s.model, s.shard
    if not (kind.sliding or kind.chunked):
        return p.attention_prefill(d.b_dev, d.heads, d.kv_heads, m.head_dim, q, kv)
    kv = np.asarray(kv, dtype=float)
    if kind.sliding:
        w = m.sliding_window
        read = np.minimum(kv, q + w)
        return p.attention_prefill_topk(d.b_dev, d.heads, d.kv_heads, m.head_dim, q, read, w)
    c = m.attention_chunk_size

    def upto(n: np.ndarray) -> np.ndarray:  # sum of (j − 1) mod c + 1 for j = 1..n
        r = np.mod(n, c)
        return np.floor_divide(n, c) * (c * (c + 1) / 2.0) + r * (r + 1) / 2.0

    keys = upto(kv) - upto(np.maximum(kv - q, 0))
    read = np.minimum(kv, np.mod(kv - q, c) + q)  # from the first query's chunk start
    return p.attention_prefill_keys(d.b_dev, d.heads, d.kv_heads, m.head_dim, q, read, keys)


def mla_attention(p: GpuPerfModel, s: LayerShape, mode: str, q: int, kv: np.ndarray, T: int,
                  w: GpuPerfModel | None = None, o: GpuPerfModel | None = None
                  ) -> list[KernelTime]:  # fmt: skip
    """MLA: latent down-projections (replicated over TP), per-head up-projections, attention.

    Decode absorbs the K/V up-projections into the query and output (two per-head batched
    GEMMs) and attends over the cached latent; prefill decompresses K and V for every cached
    token and runs multi-head attention. ``w`` / ``o``: the formats of the Q/KV projections and
    of o_proj where the checkpoint keeps them apart from ``p`` (``Workload.bf16_attention``)."""
    from plena_opt.estimate import gpu_attention_variants as V

    m, d, ab = s.model, s.shard, p.ab
    w, o = w or p, o or p
    h, H, rope, nope = m.hidden_size, d.heads, m.qk_rope_head_dim, m.qk_nope_head_dim
    lat, lora, v = m.kv_latent_dim, m.kv_lora_rank, m.v_head_dim
    ks: list[KernelTime] = []
    if m.q_lora_rank:
        ks += [w.gemm(T, m.q_lora_rank, h), p.elementwise(2 * T * m.q_lora_rank * ab, 0)]
        ks.append(w.gemm(T, H * m.head_dim, m.q_lora_rank))
    else:
        ks.append(w.gemm(T, H * m.head_dim, h))
    ks += [w.gemm(T, lat, h), p.elementwise(2 * T * lat * ab, T * lat * p.kvb)]  # norm, cache
    ks.append(p.elementwise(T * (H + 1) * rope * ab, T * (H + 1) * rope * ab))  # RoPE
    ks += V.dsa_indexer(p, s, mode, q, kv, T)  # DeepSeek sparse attention; [] otherwise
    if mode == "prefill" and m.is_sparse:  # sparse MLA on the latent (absorbed), top-k keys
        ks.append(w.grouped_gemm(T, H, lora, nope))
        ks.append(p.attention_prefill_topk(d.b_dev, H, 1, lat, q, kv, m.index_topk))
        ks.append(w.grouped_gemm(T, H, v, lora))
        return [*ks, o.gemm(T, h, H * v)]
    kv = V.sparse_kv(s, kv)
    if mode == "prefill":
        rows = int(d.b_dev * float(np.max(kv)))
        ks.append(w.gemm(rows, H * (nope + v), lora))  # decompress K_nope and V
        ks.append(p.attention_prefill(d.b_dev, H, H, m.head_dim, q, kv))
    else:
        ks.append(w.grouped_gemm(T, H, lora, nope))  # q_nope · W_UK per head
        ks.append(p.attention_decode(d.b_dev, H, 1, lat, kv, latent=lat))
        ks.append(w.grouped_gemm(T, H, v, lora))  # latent output · W_UV per head
    ks.append(o.gemm(T, h, H * v))
    return ks


def dense_ffn(p: GpuPerfModel, s: LayerShape, T: int, width: int) -> list[KernelTime]:
    """Gate/up GEMM (up only when not gated), activation, down GEMM over ``width``."""
    if width <= 0:
        return []
    h, ab = s.model.hidden_size, p.ab
    up = 2 * width if s.model.gated_mlp else width
    act = p.elementwise(up * T * ab, T * width * ab)
    return [p.gemm(T, up, h), act, p.gemm(T, h, width)]
