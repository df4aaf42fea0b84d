"""What the product understood of a model: the ``models show`` document (JSON-ready)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plena_opt.models.model_spec import ModelSpec
from plena_opt.models.params import count_parameters


def layers_by_kind(spec: ModelSpec) -> dict[str, int]:
    """Layer counts by ``<attention>/<mlp>`` kind, e.g. ``{"full_attention/moe": 58, …}``."""
    out: dict[str, int] = {}
    for run in spec.layer_runs:
        key = f"{run.attention}/{run.mlp}"
        out[key] = out.get(key, 0) + run.count
    return out


REFERENCE_CONTEXT = 4096  # cached tokens at which ``models show`` states the decode work


@dataclass(frozen=True)
class DecodeAttentionWork:
    """Attention work of one decode token in one full-attention layer (whole model, no TP).

    ``flops`` counts 2 per multiply-add of the score and value products (MLA: in the absorbed
    form, including folding ``W_UK`` into the query and ``W_UV`` into the output);
    ``kv_elements_read`` is the cache read for it. Projections are not included.
    """

    flops: int
    kv_elements_read: int


def decode_attention_work(spec: ModelSpec, kv: int) -> DecodeAttentionWork:
    """Decode attention FLOPs and KV elements read per token per layer at ``kv`` cached tokens."""
    H = spec.num_heads
    if spec.is_mla:  # DSA: the indexer scores all kv keys, the attention reads the top-k
        r, rope = spec.kv_lora_rank, spec.qk_rope_head_dim
        att = min(kv, spec.index_topk) if spec.is_sparse else kv
        macs = H * (spec.qk_nope_head_dim * r + att * (r + rope) + att * r + r * spec.v_head_dim)
        macs += spec.index_n_heads * spec.index_head_dim * kv
        return DecodeAttentionWork(2 * macs, att * spec.kv_latent_dim + kv * spec.index_head_dim)
    macs = H * kv * spec.head_dim * 2  # scores and values
    return DecodeAttentionWork(2 * macs, kv * 2 * spec.num_kv_heads * spec.head_dim)


def architecture(spec: ModelSpec) -> dict[str, Any]:
    """Family, layers by kind, attention, experts, embeddings and parameter counts."""
    counts = count_parameters(spec)
    attention: dict[str, Any] = {
        "kind": spec.attention_kind,
        "heads": spec.num_heads,
        "kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "kv_elements_per_token_per_layer": spec.kv_elements_per_token(),
    }
    work = decode_attention_work(spec, REFERENCE_CONTEXT)
    attention[f"decode_flops_per_token_per_layer_at_{REFERENCE_CONTEXT}"] = work.flops
    attention[f"decode_kv_elements_read_per_layer_at_{REFERENCE_CONTEXT}"] = work.kv_elements_read
    if spec.is_mla:
        attention.update(
            q_lora_rank=spec.q_lora_rank,
            kv_lora_rank=spec.kv_lora_rank,
            qk_rope_head_dim=spec.qk_rope_head_dim,
            qk_nope_head_dim=spec.qk_nope_head_dim,
            v_head_dim=spec.v_head_dim,
        )
    if spec.sliding_layers:
        attention["sliding_window"] = spec.sliding_window
    if spec.chunked_layers:
        attention["attention_chunk_size"] = spec.attention_chunk_size
    if spec.is_sparse:
        attention.update(
            sparse="DeepSeek sparse attention",
            index_n_heads=spec.index_n_heads,
            index_head_dim=spec.index_head_dim,
            index_topk=spec.index_topk,
        )
    if spec.attn_output_gate:
        attention["output_gate"] = True
    linear = None
    if spec.linear_layers:
        linear = {
            "kind": "Gated DeltaNet",
            "layers": spec.linear_layers,
            "key_heads": spec.linear_num_key_heads,
            "value_heads": spec.linear_num_value_heads,
            "key_head_dim": spec.linear_key_head_dim,
            "value_head_dim": spec.linear_value_head_dim,
            "conv_kernel": spec.linear_conv_kernel_dim,
            "state_elements_per_sequence_per_layer": spec.linear_state_elements,
            "state_bytes_per_element": spec.linear_state_bytes,
            "conv_state_elements_per_sequence_per_layer": spec.linear_conv_state_elements,
        }
    experts = None
    if spec.num_experts:
        experts = {
            "routed": spec.num_experts,
            "top_k": spec.top_k,
            "shared": spec.num_shared_experts,
            "shared_intermediate_size": spec.shared_expert_intermediate_size,
            "expert_intermediate_size": spec.moe_intermediate_size,
            "moe_layers": spec.moe_layers,
            "dense_layers": spec.num_layers - spec.moe_layers,
        }
    return {
        "model_type": spec.model_type,
        "pricing_family": spec.family,
        "layers": spec.num_layers,
        "layers_by_kind": layers_by_kind(spec),
        "attention": attention,
        "linear_attention": linear,
        "mlp": "gated (3 matrices)" if spec.gated_mlp else "non-gated (2 matrices)",
        "parallel_attention_mlp": spec.parallel_block,
        "experts": experts,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "parameters_total": counts.total,
        "parameters_active": counts.active,
        "not_modelled": list(spec.not_modelled),
    }


# ``models show`` merges the spec, the catalog row and ``architecture``: the spec's spellings of
# fields the row also carries are dropped (one name per quantity: ``layers``, ``heads``,
# ``kv_heads``, ``experts_per_token``, ``family``, ``mlp``, ``parallel_attention_mlp``,
# ``attention``), and so are the fields of features the model
# does not have (experts on a dense model, MLA ranks without MLA, a window no layer uses).
SHOW_DUPLICATES = (
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "top_k",
    "pricing_family",
    "gated_mlp",
    "parallel_block",
    "attention_kind",
    "linear_attention_layers",  # = layers_by_kind and linear_attention.layers
    "index_topk",  # the DSA fields are shown in ``attention``
    "index_n_heads",
    "index_head_dim",
    "linear_num_key_heads",  # the Gated DeltaNet fields are shown in ``linear_attention``
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "linear_state_bytes",
    "attn_output_gate",
)  # = mlp, parallel_…, attention
MOE_FIELDS = ("moe_intermediate_size", "num_experts", "experts_per_token", "moe_layers",
              "shared_expert_intermediate_size", "num_shared_experts", "shared_expert_gate",
              "experts")  # fmt: skip
SHARED_FIELDS = ("shared_expert_intermediate_size", "num_shared_experts", "shared_expert_gate")
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
SLIDING_FIELDS = ("sliding_window", "sliding_layers")
SPARSE_FIELDS = ("index_n_heads", "index_head_dim", "index_topk")
LINEAR_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                 "linear_value_head_dim", "linear_conv_kernel_dim", "linear_state_bytes",
                 "linear_attention", "linear_attention_layers")  # fmt: skip
CHUNK_FIELDS = ("attention_chunk_size", "chunked_layers")


def show_fields(detail: dict[str, Any], spec: ModelSpec) -> dict[str, Any]:
    """``detail`` without duplicate spellings and without the fields of absent features."""
    drop = set(SHOW_DUPLICATES)
    if not spec.num_experts:
        drop.update(MOE_FIELDS)
    if not spec.shared_expert_intermediate_size and not spec.num_shared_experts:
        drop.update(SHARED_FIELDS)
    if not spec.is_mla:
        drop.update(MLA_FIELDS)
    if not spec.sliding_layers:
        drop.update(SLIDING_FIELDS)
    if not spec.chunked_layers:
        drop.update(CHUNK_FIELDS)
    if not spec.linear_layers:
        drop.update(LINEAR_FIELDS)
    if spec.moe_layers == spec.num_layers:  # no dense MLP layer: no dense width to show
        drop.add("intermediate_size")
    return {k: v for k, v in detail.items() if k not in drop}
