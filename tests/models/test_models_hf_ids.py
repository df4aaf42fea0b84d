"""Hugging Face ids and quantised variants resolve to catalog entries with the checkpoint's
format; multimodal wrappers price their text model; the new catalog entries (issue 24)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError, PlenaNotFoundError
from plena_opt.models import ModelSpec, builtin_config, load_model, model_info
from plena_opt.models.catalog import resolve_model_id
from plena_opt.models.checkpoint import checkpoint_precision
from plena_opt.models.params import count_parameters
from plena_opt.validate.serving_rows import catalog_model

SERVING = Path(__file__).parents[1] / "shared" / "data" / "validation" / "serving"


@pytest.mark.parametrize(
    ("hf_id", "name", "fmt"),
    [
        ("nvidia/DeepSeek-R1-NVFP4", "deepseek-r1", "fp4"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-r1", "fp8"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2", "fp8"),
        ("Qwen/Qwen3-32B-FP8", "qwen3-32b", "fp8"),
        ("nvidia/Qwen3-32B-NVFP4", "qwen3-32b", "fp4"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", "bf16"),
        ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "llama-3.1-70b", "fp8"),
        ("openai/gpt-oss-120b", "gpt-oss-120b", "mxfp4"),
        ("moonshotai/Kimi-K2.5", "kimi-k2.5", "int4"),
        ("Qwen/Qwen3.5-397B-A17B-FP8", "qwen3.5-397b-a17b", "fp8"),
        ("zai-org/GLM-5-FP8", "glm-5", "fp8"),
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5", "fp8"),
    ],
)
def test_hf_ids_resolve_with_the_checkpoint_format(hf_id: str, name: str, fmt: str) -> None:
    found = resolve_model_id(hf_id)
    assert found is not None and (found.name, found.checkpoint_precision) == (name, fmt)
    spec = load_model(hf_id)
    assert spec.checkpoint_precision == fmt
    # the checkpoint's own fields differ (an NVIDIA NVFP4 DeepSeek keeps its MLA projections in
    # bf16: ``checkpoint_bf16_attention``; nvidia/Qwen3-32B-NVFP4 declares an fp8 KV cache:
    # ``checkpoint_kv_precision``), the architecture does not
    own = {"checkpoint_precision", "checkpoint_source", "checkpoint_bf16_attention",
           "checkpoint_kv_precision"}  # fmt: skip
    assert spec.model_dump(exclude=own) == load_model(name).model_dump(exclude=own)
    assert model_info(hf_id)["catalog_name"] == name
    assert load_model(hf_id) is spec  # one shared spec per entry and format (evaluator memos)


def test_unknown_ids_are_not_guessed() -> None:
    for bad in ("nvidia/Nothing-NVFP4", "deepseek-ai/DeepSeek-R2", "Qwen/Qwen3-33B"):
        assert resolve_model_id(bad) is None
        with pytest.raises(PlenaNotFoundError):
            load_model(bad)


def test_cli_model_flag_takes_a_quantised_hf_id(capsys) -> None:
    assert main(["models", "show", "nvidia/DeepSeek-R1-NVFP4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checkpoint_precision"] == "fp4" and doc["name"] == "deepseek-r1"


@pytest.mark.parametrize(
    ("quant", "fmt"),
    [
        (None, "bf16"),
        ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),
        ({"quant_method": "gptq", "bits": 4}, "int4"),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, None),
    ],
)
def test_checkpoint_format_from_quantization_config(quant, fmt: str) -> None:
    cfg = builtin_config("llama-3.1-8b")
    if quant is not None:
        cfg["quantization_config"] = quant
    if fmt is None:  # a format the product does not price is refused naming the field
        with pytest.raises(PlenaInputError, match="quantization_config"):
            ModelSpec.from_hf_config(cfg, "q")
        return
    assert checkpoint_precision(cfg)[0] == fmt
    spec = ModelSpec.from_hf_config(cfg, "q")
    assert spec.checkpoint_precision == fmt


def test_every_model_of_the_public_serving_measurements_resolves() -> None:
    with open(SERVING / "measured_serving_h100_b200.csv", newline="") as f:
        ids = {row["model_path"] for row in csv.DictReader(f)}
    assert ids and all(catalog_model(i) is not None for i in ids)
    assert catalog_model("nvidia/DeepSeek-R1-NVFP4") == ("deepseek-v3", "nvidia/DeepSeek-R1-NVFP4")


def test_multimodal_wrappers_price_the_text_model_and_name_the_vision_tower() -> None:
    k25, k2 = load_model("kimi-k2.5"), load_model("kimi-k2")
    keep = {"name", "not_modelled", "checkpoint_precision", "checkpoint_experts_only"}
    assert k25.model_dump(exclude=keep) == k2.model_dump(exclude=keep)
    assert any(n.startswith("vision_config") for n in k25.not_modelled)
    q35 = load_model("qwen3.5-397b-a17b")
    assert builtin_config("qwen3.5-397b-a17b")["model_type"] == "qwen3_5_moe"
    assert q35.model_type == "qwen3_5_moe_text"
    assert any(n.startswith("vision_config") for n in q35.not_modelled)


def test_kimi_k25_and_minimax_m25_counts_match_their_cards() -> None:
    # Kimi-K2.5 card: 1T total (one significant digit), 32B activated; MiniMax-M2.5 card: 230B
    # total, 10B activated without the embedding tables.
    k25 = count_parameters(load_model("kimi-k2.5"))
    assert round(k25.total / 1e12) == 1 and k25.active == pytest.approx(32e9, rel=0.03)
    m = load_model("minimax-m2.5")
    c = count_parameters(m)
    assert c.total == pytest.approx(230e9, rel=0.01)
    tables = 2 * m.vocab_size * m.hidden_size
    assert c.active - tables == pytest.approx(10e9, rel=0.03)
    for name in ("kimi-k2.5", "minimax-m2.5", "glm-5", "deepseek-v3.2", "qwen3.5-397b-a17b"):
        info = model_info(name)
        assert info["external"] and "card" in info["source"] and info["hf_id"]


@pytest.mark.parametrize("name", ["qwen3.5-397b-a17b", "deepseek-v3.2", "glm-5", "kimi-k2.5"])
def test_models_show_prints_the_new_fields_once(capsys, name: str) -> None:
    assert main(["models", "show", name]) == 0
    keys = [line.split(":", 1)[0] for line in capsys.readouterr().out.strip().splitlines()]
    assert len(keys) == len(set(keys))
    assert not any(
        k.startswith(("index_", "linear_num", "linear_key", "linear_value")) for k in keys
    )
    assert main(["models", "show", name, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    spec = load_model(name)
    assert ("index_topk" in doc["attention"]) == spec.is_sparse
    assert ("linear_attention" in doc) == bool(spec.linear_layers)
    assert ("intermediate_size" in doc) == (spec.moe_layers < spec.num_layers)
    assert doc["checkpoint_precision"] == spec.checkpoint_precision


def test_models_show_of_a_dense_model_has_no_sparse_or_linear_fields(capsys) -> None:
    assert main(["models", "show", "llama-3.1-8b", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    absent = ("index_topk", "linear_num_key_heads", "linear_state_bytes", "attn_output_gate")
    assert not any(k in doc for k in absent) and "linear_attention" not in doc
