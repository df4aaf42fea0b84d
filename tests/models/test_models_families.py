"""Model families beyond the reference: parameter counts by an independent formula per family,
layer patterns, nested configs, family field names (issue #12)."""

from __future__ import annotations

from typing import Any

import pytest

from plena_opt.models import ModelSpec, load_model
from plena_opt.models.params import count_parameters


def _spec(cfg: dict[str, Any]) -> ModelSpec:
    return ModelSpec.from_hf_config(cfg, "m")


BASE = {
    "hidden_size": 256,
    "num_hidden_layers": 6,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
}


def test_llama_gqa_parameters() -> None:
    spec = _spec({**BASE, "model_type": "llama", "tie_word_embeddings": False})
    h, hd, L, V = 256, 32, 6, 1000
    attn = h * 8 * hd * 2 + h * 2 * hd * 2
    layer = attn + 3 * h * 512 + 2 * h
    expected = L * layer + 2 * V * h + h
    counts = count_parameters(spec)
    assert counts.total == counts.active == expected
    assert spec.attention_kind == "GQA" and spec.kv_elements_per_token() == 2 * 2 * hd


def test_mla_with_shared_experts_parameters() -> None:
    cfg = {
        **BASE,
        "model_type": "deepseek_v3",
        "num_key_value_heads": 8,
        "q_lora_rank": 48,
        "kv_lora_rank": 64,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 32,
        "v_head_dim": 24,
        "n_routed_experts": 16,
        "num_experts_per_tok": 4,
        "n_shared_experts": 2,
        "moe_intermediate_size": 64,
        "first_k_dense_replace": 2,
        "moe_layer_freq": 1,
        "tie_word_embeddings": False,
    }
    spec = _spec(cfg)
    h, H = 256, 8
    attn = (
        h * 48
        + 48
        + 48 * H * (32 + 16)  # q down, q norm, q up
        + h * (64 + 16)
        + 64  # latent down, kv norm
        + 64 * H * (32 + 24)  # k_nope / v up
        + H * 24 * h  # output
    )
    expert = 3 * h * 64
    shared = 3 * h * 2 * 64
    dense_layer = attn + 2 * h + 3 * h * 512
    moe_total = attn + 2 * h + h * 16 + 16 * expert + shared
    moe_active = attn + 2 * h + h * 16 + 4 * expert + shared
    fixed = 2 * 1000 * h + h
    counts = count_parameters(spec)
    assert counts.total == fixed + 2 * dense_layer + 4 * moe_total
    assert counts.active == fixed + 2 * dense_layer + 4 * moe_active
    assert spec.attention_kind == "MLA" and spec.head_dim == 48
    assert spec.kv_elements_per_token() == 64 + 16
    assert spec.mlp_types == ("ffn",) * 2 + ("moe",) * 4


def test_qwen2_moe_shared_expert_gate_and_qkv_bias() -> None:
    cfg = {
        **BASE,
        "model_type": "qwen2_moe",
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 128,
        "tie_word_embeddings": False,
    }
    spec = _spec(cfg)
    h, hd = 256, 32
    attn = 2 * h * 8 * hd + 2 * h * 2 * hd + (8 * hd + 2 * 2 * hd)  # q/k/v biases, no o bias
    shared = 3 * h * 128 + h  # + the sigmoid gate
    common = 6 * (attn + 2 * h + h * 8 + shared) + 2 * 1000 * h + h
    counts = count_parameters(spec)
    assert counts.total == common + 6 * 8 * 3 * h * 64
    assert counts.active == common + 6 * 2 * 3 * h * 64
    assert spec.shared_expert_gate and spec.num_shared_experts == 1


def test_gemma2_alternating_window_tied_four_norms() -> None:
    cfg = {**BASE, "model_type": "gemma2", "head_dim": 64, "sliding_window": 128}
    spec = _spec(cfg)
    assert spec.layer_types == ("sliding_attention", "full_attention") * 3
    assert spec.tie_word_embeddings and spec.norms_per_layer == 4
    h = 256
    attn = 2 * h * 8 * 64 + 2 * h * 2 * 64
    assert count_parameters(spec).total == 6 * (attn + 4 * h + 3 * h * 512) + 1000 * h + h


def test_gemma3_pattern_and_qwen2_window_layers() -> None:
    cfg = {**BASE, "num_hidden_layers": 12, "model_type": "gemma3_text", "sliding_window": 64}
    spec = _spec({**cfg, "sliding_window_pattern": 6})
    assert spec.layer_types == (("sliding_attention",) * 5 + ("full_attention",)) * 2
    qwen = {**BASE, "model_type": "qwen2", "sliding_window": 64, "use_sliding_window": True}
    spec = _spec({**qwen, "max_window_layers": 4})
    assert spec.layer_types == ("full_attention",) * 4 + ("sliding_attention",) * 2
    off = _spec({**qwen, "use_sliding_window": False})
    assert off.sliding_layers == 0
    mistral = _spec({**BASE, "model_type": "mistral", "sliding_window": 64})
    assert mistral.sliding_layers == 6


def test_starcoder2_two_matrix_mlp_with_biases() -> None:
    cfg = {**BASE, "model_type": "starcoder2", "use_bias": True, "sliding_window": 64}
    spec = _spec(cfg)
    assert not spec.gated_mlp and spec.tie_word_embeddings and spec.sliding_layers == 6
    h, hd = 256, 32
    attn = 2 * h * 8 * hd + 2 * h * 2 * hd + (8 * hd + 2 * 2 * hd) + h
    mlp = 2 * h * 512 + 512 + h
    assert count_parameters(spec).total == 6 * (attn + mlp + 2 * h) + 1000 * h + h


def test_falcon_field_names_multi_query_parallel() -> None:
    cfg = {
        "model_type": "falcon",
        "hidden_size": 256,
        "n_head": 8,
        "n_layer": 4,
        "vocab_size": 1000,
        "multi_query": True,
        "parallel_attn": True,
        "bias": False,
    }
    spec = _spec(cfg)
    assert (spec.num_heads, spec.num_kv_heads, spec.num_layers) == (8, 1, 4)
    assert spec.intermediate_size == 4 * 256 and not spec.gated_mlp and spec.parallel_block
    assert spec.attention_kind == "MQA"
    h, hd = 256, 32
    attn = 2 * h * 8 * hd + 2 * h * hd
    assert count_parameters(spec).total == 4 * (attn + 2 * h * 1024 + h) + 1000 * h + h
    new = _spec({**cfg, "new_decoder_architecture": True, "num_kv_heads": 2})
    assert new.num_kv_heads == 2


def test_chatglm_field_names() -> None:
    cfg = {
        "model_type": "chatglm",
        "hidden_size": 256,
        "num_layers": 4,
        "num_attention_heads": 8,
        "multi_query_attention": True,
        "multi_query_group_num": 2,
        "ffn_hidden_size": 512,
        "kv_channels": 32,
        "padded_vocab_size": 1000,
        "add_qkv_bias": True,
    }
    spec = _spec(cfg)
    assert (spec.num_layers, spec.num_kv_heads, spec.intermediate_size) == (4, 2, 512)
    assert (spec.vocab_size, spec.head_dim, spec.gated_mlp) == (1000, 32, True)
    assert spec.attention_bias and not spec.output_bias


def test_llama4_nested_chunked_shared_expert() -> None:
    text = {
        **BASE,
        "num_hidden_layers": 8,
        "model_type": "llama4_text",
        "head_dim": 32,
        "intermediate_size": 128,
        "intermediate_size_mlp": 512,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 2,
        "attention_chunk_size": 64,
    }
    spec = _spec({"model_type": "llama4", "text_config": text, "vision_config": {"x": 1}})
    assert spec.layer_types == (("chunked_attention",) * 3 + ("full_attention",)) * 2
    assert spec.mlp_types == ("ffn", "moe") * 4
    assert spec.intermediate_size == 512 and spec.moe_intermediate_size == 128
    assert spec.shared_expert_intermediate_size == 128
    assert any("vision" in n for n in spec.not_modelled)
    h = 256
    attn = 2 * h * 8 * 32 + 2 * h * 2 * 32
    dense = attn + 2 * h + 3 * h * 512
    moe = attn + 2 * h + 4 * h + 4 * 3 * h * 128 + 3 * h * 128
    assert count_parameters(spec).total == 4 * dense + 4 * moe + 2 * 1000 * h + h


def test_text_config_fields_from_the_top_level() -> None:
    text = {**BASE}
    spec = _spec({"model_type": "gemma3", "text_config": text, "tie_word_embeddings": True})
    assert spec.model_type == "gemma3" and spec.tie_word_embeddings


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        ("deepseek-v3", 671e9, 37e9),
        ("kimi-k2", 1.03e12, 32e9),
        ("mixtral-8x22b", 141e9, 39e9),
        ("qwen3-30b-a3b", 30.5e9, 3.3e9),
        ("gemma-2-27b", 27.2e9, 27.2e9),
        ("llama-4-scout", 107.8e9, 17e9),  # card: 109B incl. the vision encoder
        ("mixtral-8x7b", 46.7e9, 12.9e9),
        ("qwen3-235b-a22b", 235e9, 22e9),
    ],
)
def test_catalog_counts_match_model_cards(name: str, total: float, active: float) -> None:
    counts = count_parameters(load_model(name))
    assert counts.total == pytest.approx(total, rel=0.015)
    assert counts.active == pytest.approx(active, rel=0.03)


def test_uniform_model_is_one_run_whatever_its_depth() -> None:
    spec = _spec({**BASE, "num_hidden_layers": 4096})
    assert len(spec.layer_runs) == 1 and spec.layer_runs[0].count == 4096


def test_gemma3_text_config_saved_as_a_diff_uses_the_class_defaults() -> None:
    # google/gemma-3-4b: text_config holds only the values that differ from Gemma3TextConfig
    text = {
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "model_type": "gemma3_text",
        "num_hidden_layers": 34,
        "sliding_window": 1024,
    }
    spec = _spec({"model_type": "gemma3", "text_config": text, "vision_config": {}})
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim) == (8, 4, 256)
    assert spec.sliding_layers == 34 - 34 // 6 and spec.tie_word_embeddings
    # keras-hub gemma3_4b_text preset metadata: 3,880,099,328 parameters
    assert count_parameters(spec).total == pytest.approx(3_880_099_328, rel=1e-4)


def test_llama4_explicit_moe_layers_and_top_level_vision() -> None:
    spec = _spec(
        {**BASE, "model_type": "llama4_text", "moe_layers": [1, 3], "no_rope_layers": [1] * 6}
    )
    assert spec.mlp_types == ("ffn", "moe", "ffn", "moe", "ffn", "ffn")
    assert spec.chunked_layers == 6
    vl = _spec({**BASE, "model_type": "qwen2_5_vl", "vision_config": {"depth": 32}})
    assert any("vision" in n for n in vl.not_modelled)


def test_describe_adds_keys_only_for_features_beyond_the_reference() -> None:
    ds = load_model("deepseek-v3").describe()
    assert ds["attention"] == "MLA" and ds["kv_lora_rank"] == 512
    assert ds["shared_expert_intermediate_size"] == 2048
    scout = load_model("llama-4-scout").describe()
    assert scout["chunked_layers"] == 36 and scout["attention_chunk_size"] == 8192
    assert "attention" not in load_model("llama-3.1-8b").describe()
