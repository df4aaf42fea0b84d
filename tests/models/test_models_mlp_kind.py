"""The MLP kind (gated: 3 matrices, or two-matrix) of every family comes from its documented
architecture or its config; a named family whose MLP kind is unknown is refused (issue 24)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.models import ModelSpec
from plena_opt.models.params import count_parameters

# tiiuae/falcon-40b config.json as published with the original remote code (model card: 60
# layers, d_model 8192, head_dim 64, vocabulary 65024; 128 query heads in 8 KV groups;
# https://huggingface.co/tiiuae/falcon-40b). Its MLP is 4·d_model wide, two-matrix (GELU).
FALCON_40B: dict[str, Any] = {
    "alibi": False,
    "apply_residual_connection_post_layernorm": False,
    "architectures": ["RWForCausalLM"],
    "bias": False,
    "bos_token_id": 11,
    "eos_token_id": 11,
    "hidden_size": 8192,
    "layer_norm_epsilon": 1e-05,
    "model_type": "RefinedWeb",
    "n_head": 128,
    "n_head_kv": 8,
    "n_layer": 60,
    "parallel_attn": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 65024,
}
# The Hub's count for tiiuae/falcon-40b (41.8 B) stores the LM head as its own tensor; the
# model ties it to the embedding (transformers ``FalconForCausalLM._tied_weights_keys``).
FALCON_40B_HUB_PARAMETERS = 41.8e9

BASE: dict[str, Any] = {
    "hidden_size": 256,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
}


def test_falcon_40b_is_read_with_its_two_matrix_mlp_and_grouped_kv() -> None:
    spec = ModelSpec.from_hf_config(FALCON_40B, "falcon-40b")
    assert spec.model_type == "falcon" and not spec.gated_mlp
    assert spec.num_kv_heads == 8 and spec.intermediate_size == 4 * 8192
    assert spec.parallel_block and spec.norms_per_layer == 2 and spec.tie_word_embeddings
    total = count_parameters(spec).total
    head = spec.vocab_size * spec.hidden_size  # tied: counted once here, twice on the Hub
    assert abs(total + head - FALCON_40B_HUB_PARAMETERS) / FALCON_40B_HUB_PARAMETERS < 0.01


def test_falcon_7b_spelling_is_multi_query() -> None:
    cfg = {**FALCON_40B, "model_type": "RefinedWebModel", "n_head": 71, "hidden_size": 4544,
           "n_layer": 32}  # fmt: skip
    del cfg["n_head_kv"]
    spec = ModelSpec.from_hf_config(cfg, "falcon-7b")
    assert spec.model_type == "falcon" and not spec.gated_mlp and spec.num_kv_heads == 1


def test_models_show_falcon_40b(tmp_path, capsys) -> None:
    (tmp_path / "config.json").write_text(json.dumps(FALCON_40B))
    assert main(["models", "show", "--model-path", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert 40.5e9 < doc["parameters_total"] < 42e9


@pytest.mark.parametrize("model_type", ["newfam", "RefinedWebX"])
def test_a_family_whose_mlp_kind_is_unknown_is_refused(model_type: str) -> None:
    with pytest.raises(PlenaInputError) as err:
        ModelSpec.from_hf_config({**BASE, "model_type": model_type}, "m")
    assert err.value.field == "model_type" and "gated" in str(err.value)


def test_the_config_can_say_the_mlp_is_gated() -> None:
    spec = ModelSpec.from_hf_config({**BASE, "model_type": "newfam", "hidden_act": "swiglu"}, "m")
    assert spec.gated_mlp


@pytest.mark.parametrize(
    ("model_type", "gated"),
    [("llama", True), ("qwen3", True), ("starcoder2", False), ("nemotron", False)],
)
def test_documented_families_keep_their_mlp_kind(model_type: str, gated: bool) -> None:
    assert ModelSpec.from_hf_config({**BASE, "model_type": model_type}, "m").gated_mlp is gated


# microsoft/Phi-3.5-MoE-instruct config.json (model card values): sliding_window equals
# max_position_embeddings (131072), so no layer ever drops a key.
PHI35_MOE: dict[str, Any] = {
    "model_type": "phimoe",
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "vocab_size": 32064,
    "max_position_embeddings": 131072,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize("window", [131072, 262144])
def test_a_window_covering_the_whole_context_is_full_attention(window: int) -> None:
    spec = ModelSpec.from_hf_config({**PHI35_MOE, "sliding_window": window}, "phi-3.5-moe")
    assert spec.sliding_window == 0 and spec.sliding_layers == 0
    assert spec.num_experts == 16 and spec.top_k == 2 and spec.gated_mlp


def test_a_window_shorter_than_the_context_is_still_read_or_refused() -> None:
    with pytest.raises(PlenaInputError) as err:  # phimoe names no rule for which layers slide
        ModelSpec.from_hf_config({**PHI35_MOE, "sliding_window": 4096}, "m")
    assert err.value.field == "sliding_window"
    with pytest.raises(PlenaInputError) as err:
        ModelSpec.from_hf_config({**PHI35_MOE, "max_position_embeddings": 0}, "m")
    assert err.value.field == "max_position_embeddings"
