"""Unsupported architectures refused by field, size ranges, nesting (issues #12 and #10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.models import ModelSpec, load_model
from plena_opt.models.limits import SIZE_LIMITS

BASE = {
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "intermediate_size": 512,
    "vocab_size": 1000,
}


@pytest.mark.parametrize(
    ("patch", "field", "what"),
    [
        (  # linear-attention heads outside the Gated DeltaNet families
            {"model_type": "newfam", "linear_num_value_heads": 32},
            "linear_num_value_heads",
            "linear-attention",
        ),
        (
            {"layer_types": ["linear_attention", "full_attention"] * 2},
            "layer_types",
            "linear-attention layers are not modelled",
        ),
        (  # Nemotron-H
            {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*-"},
            "hybrid_override_pattern",
            "Mamba",
        ),
        ({"model_type": "minimax", "attn_type_list": [0, 1, 0, 1]}, "attn_type_list", "lightning"),
        (  # DeepSeek sparse attention without MLA
            {"model_type": "deepseek_v32", "index_topk": 2048, "index_n_heads": 64},
            "index_topk",
            "sparse attention",
        ),
        ({"block_configs": [{"attention": {}}] * 4}, "block_configs", "DeciLM"),
        ({"model_type": "mamba"}, "model_type", "state-space"),
        ({"swa_num_key_value_heads": 8}, "swa_num_key_value_heads", "per layer kind"),
        ({"v_head_dim": 16}, "v_head_dim", "outside MLA"),
        ({"attention_chunk_size": 64}, "attention_chunk_size", "which layers are chunked"),
        ({"model_type": "newfam", "sliding_window": 64}, "sliding_window", "which layers"),
        ({"model_type": "starcoder2", "num_experts": 4}, "model_type", "two-matrix"),
    ],
)
def test_unmodelled_architectures_are_refused_by_field(
    patch: dict[str, Any], field: str, what: str
) -> None:
    with pytest.raises(PlenaInputError) as info:
        ModelSpec.from_hf_config({**BASE, **patch}, "m")
    assert info.value.field == field
    assert str(info.value).startswith((f"{field}:", f"{field}[")) and what in str(info.value)
    assert "not modelled" in str(info.value) or "not given" in str(info.value)


def test_all_softmax_attn_type_list_is_accepted() -> None:
    spec = ModelSpec.from_hf_config({**BASE, "attn_type_list": [1, 1, 1, 1]}, "m")
    assert spec.num_layers == 4


@pytest.mark.parametrize(
    "field",
    ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size", "intermediate_size"],
)
def test_sizes_above_their_range_name_field_and_range(field: str) -> None:
    hi = SIZE_LIMITS[field][1]
    with pytest.raises(PlenaInputError) as info:
        ModelSpec.from_hf_config({**BASE, field: hi + 1}, "m")
    assert info.value.field == field and f"at most {hi}" in str(info.value)


@pytest.mark.parametrize("experts", [10**30, 10**10, 65537])
def test_huge_expert_counts_are_clear_errors(experts: int) -> None:
    with pytest.raises(PlenaInputError) as info:
        ModelSpec.from_hf_config({**BASE, "num_experts": experts, "num_experts_per_tok": 2}, "m")
    assert info.value.field == "num_experts" and "at most 65536" in str(info.value)


def test_billion_layers_refused_before_any_allocation() -> None:
    with pytest.raises(PlenaInputError, match="num_hidden_layers must be at most 4096"):
        ModelSpec.from_hf_config({**BASE, "num_hidden_layers": 10**9}, "m")


def test_deep_nesting_in_a_dict_config() -> None:
    deep: Any = 1
    for _ in range(200):
        deep = {"a": deep}
    with pytest.raises(PlenaInputError, match="nested deeper than 64"):
        ModelSpec.from_hf_config({**BASE, "extra": deep}, "m")


@pytest.mark.parametrize("command", [["models", "show"], ["estimate"]])
def test_cli_deeply_nested_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"a":' * 50_000 + "1" + "}" * 50_000)
    assert main([*command, "--model-path", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "nested deeper than 64" in err
    assert "Traceback" not in err


def test_cli_refusal_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, "hybrid_override_pattern": "M*M*"}))
    assert main(["models", "show", "--model-path", str(tmp_path)]) == 2  # a model directory
    err = capsys.readouterr().err
    assert err.startswith("error: hybrid_override_pattern: hybrid Mamba")


def test_models_show_reports_architecture_and_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "show", "deepseek-v3", "--json"]) == 0
    detail = json.loads(capsys.readouterr().out)
    assert detail["attention"]["kind"] == "MLA"
    assert detail["attention"]["kv_elements_per_token_per_layer"] == 512 + 64
    assert detail["layers_by_kind"] == {"full_attention/ffn": 3, "full_attention/moe": 58}
    assert detail["experts"]["shared"] == 1 and detail["experts"]["top_k"] == 8
    assert detail["parameters_total"] == pytest.approx(671e9, rel=0.01)
    assert detail["parameters_active"] == pytest.approx(37e9, rel=0.03)
    spec = load_model("deepseek-v3")
    assert detail["layers"] == spec.num_layers == 61


def test_switched_off_fields_are_not_refusals() -> None:
    cfg = {**BASE, "num_kv_shared_layers": 0, "index_topk": None, "block_configs": []}
    assert ModelSpec.from_hf_config(cfg, "m").num_layers == 4


def test_a_huge_non_integer_v_head_dim_is_a_short_type_error() -> None:
    import pytest

    from plena_opt.errors import PlenaTypeError
    from plena_opt.models import ModelSpec
    from plena_opt.models.catalog import builtin_config

    cfg = {**builtin_config("llama-3.1-8b"), "v_head_dim": {"x": "y" * 10_000}}
    with pytest.raises(PlenaTypeError) as info:
        ModelSpec.from_hf_config(cfg, "fuzz")
    assert info.value.field == "v_head_dim" and len(str(info.value)) < 200
