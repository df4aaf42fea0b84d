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


def attention_parameters(m: ModelSpec) -> int:
    """Q/K/V/O projection weights (+ biases, q/k norms, MLA low-rank norms) of one layer."""
    h, H = m.hidden_size, m.num_heads
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * H * qk
        else:
            q = h * H * qk
        kv = h * m.kv_latent_dim + m.kv_lora_rank
        kv += m.kv_lora_rank * H * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + H * m.v_head_dim * h + (h if m.output_bias else 0)
    q, kvw = H * m.head_dim, m.num_kv_heads * m.head_dim
    total = h * q + 2 * h * kvw + q * h
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
    attn = attention_parameters(m) + m.norms_per_layer * h
    dense = ffn_parameters(m, m.intermediate_size)
    expert = ffn_parameters(m, m.moe_intermediate_size)
    router = h * m.num_experts
    moe_total = router + m.num_experts * expert + _shared(m)
    moe_active = router + m.top_k * expert + _shared(m)
    moe, layers = m.moe_layers, m.num_layers
    emb = m.vocab_size * h
    head = 0 if m.tie_word_embeddings else m.vocab_size * h
    fixed = emb + head + h  # + the final norm
    body = layers * attn + (layers - moe) * dense
    return ParameterCounts(
        total=fixed + body + moe * moe_total,
        active=fixed + body + moe * moe_active,
        embedding=emb,
        lm_head=head,
        attention_per_layer=attention_parameters(m),
    )
