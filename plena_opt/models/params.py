"""Parameter counts of a ``ModelSpec``: total and active per token (docs/models.md).

Counts include the embedding, the LM head (unless tied), every projection, router, bias and norm
weight of the decoder; they exclude what the spec does not price (vision towers, MTP layers).
``active`` counts the experts one token uses (``top_k`` routed + the shared ones).
"""

from __future__ import annotations

from dataclasses import dataclass

from plena_opt.models.model_spec import ModelSpec


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts (elements)."""

    total: int
    active: int
    embedding: int
    lm_head: int
    attention_per_layer: int


def indexer_parameters(m: ModelSpec) -> int:
    """DSA lightning indexer of one layer (DeepSeek-V3.2 ``Indexer``): queries from the Q
    latent (``q_lora_rank → heads·dim``), one shared key ``h → dim`` with a LayerNorm (weight and
    bias), and the per-head weights ``h → heads``."""
    if not m.is_sparse:
        return 0
    n, d, h = m.index_n_heads, m.index_head_dim, m.hidden_size
    q_in = m.q_lora_rank or h
    return q_in * n * d + h * d + 2 * d + h * n


def linear_attention_parameters(m: ModelSpec) -> int:
    """One Gated DeltaNet layer (transformers ``Qwen3NextGatedDeltaNet``): the q/k/v/z input
    projection, the b/a (β and decay) projection, the depthwise convolution over q, k and v,
    ``dt_bias`` and ``A_log`` per value head, the gated RMSNorm and the output projection."""
    h, nv, dv = m.hidden_size, m.linear_num_value_heads, m.linear_value_head_dim
    conv = m.linear_conv_channels
    qkvz = h * (conv + nv * dv)
    return qkvz + h * 2 * nv + conv * m.linear_conv_kernel_dim + 2 * nv + dv + nv * dv * h


def layer_attention_parameters(m: ModelSpec, attention: str) -> int:
    """The attention half's weights of one layer of type ``attention``."""
    if attention == "linear_attention":
        return linear_attention_parameters(m)
    return attention_parameters(m)


def attention_parameters(m: ModelSpec) -> int:
    """Q/K/V/O projection weights (+ biases, q/k norms, MLA low-rank norms, the DSA indexer, the
    output gate's half of the query projection) of one softmax-attention layer."""
    h, H = m.hidden_size, m.num_heads
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * H * qk
        else:
            q = h * H * qk
        kv = h * m.kv_latent_dim + m.kv_lora_rank
        kv += m.kv_lora_rank * H * (m.qk_nope_head_dim + m.v_head_dim)
        out = H * m.v_head_dim * h + (h if m.output_bias else 0)
        return q + kv + out + indexer_parameters(m)
    q, kvw = H * m.head_dim, m.num_kv_heads * m.head_dim
    total = h * q + 2 * h * kvw + q * h
    if m.attn_output_gate:
        total += h * q
    if m.attention_bias:
        total += q + 2 * kvw
    if m.output_bias:
        total += h
    if m.qk_norm:
        total += 2 * m.head_dim
    return total


def ffn_parameters(m: ModelSpec, width: int, *, bias: bool | None = None) -> int:
    """One dense MLP of ``width``: 3 matrices if gated (SwiGLU/GeGLU), else 2."""
    h = m.hidden_size
    matrices = 3 if m.gated_mlp else 2
    total = matrices * h * width
    if m.mlp_bias if bias is None else bias:
        total += (matrices - 1) * width + h
    return total


def _shared(m: ModelSpec) -> int:
    if not m.shared_expert_intermediate_size:
        return 0
    gate = m.hidden_size if m.shared_expert_gate else 0
    return ffn_parameters(m, m.shared_expert_intermediate_size) + gate


def count_parameters(m: ModelSpec) -> ParameterCounts:
    """Total and per-token active parameters of ``m``."""
    h = m.hidden_size
    norms = m.norms_per_layer * h
    dense = ffn_parameters(m, m.intermediate_size)
    expert = ffn_parameters(m, m.moe_intermediate_size)
    router = h * m.num_experts
    moe_total = router + m.num_experts * expert + _shared(m)
    moe_active = router + m.top_k * expert + _shared(m)
    moe, layers = m.moe_layers, m.num_layers
    emb = m.vocab_size * h
    head = 0 if m.tie_word_embeddings else m.vocab_size * h
    fixed = emb + head + h  # + the final norm
    attn = sum(r.count * layer_attention_parameters(m, r.attention) for r in m.layer_runs)
    body = attn + layers * norms + (layers - moe) * dense
    return ParameterCounts(
        total=fixed + body + moe * moe_total,
        active=fixed + body + moe * moe_active,
        embedding=emb,
        lm_head=head,
        attention_per_layer=attention_parameters(m),
    )
