"""``models show`` prints each quantity once, and no fields of features the model lacks."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main


def _show(capsys: pytest.CaptureFixture[str], name: str, *extra: str) -> str:
    assert main(["models", "show", name, *extra]) == 0
    return capsys.readouterr().out


def _keys(text: str) -> list[str]:
    return [line.split(":", 1)[0] for line in text.strip().splitlines()]


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-32b", "qwen3-30b-a3b", "deepseek-v3"])
def test_every_field_is_printed_once(capsys: pytest.CaptureFixture[str], name: str) -> None:
    keys = _keys(_show(capsys, name))
    assert len(keys) == len(set(keys))
    for spelling in ("num_layers", "num_heads", "num_kv_heads", "top_k", "pricing_family"):
        assert spelling not in keys  # printed as layers, heads, kv_heads, experts_per_token, family
    assert {"layers", "heads", "kv_heads", "family", "parameters_total"} <= set(keys)


def test_a_dense_model_shows_no_expert_or_mla_fields(capsys: pytest.CaptureFixture[str]) -> None:
    keys = set(_keys(_show(capsys, "llama-3.1-8b")))
    absent = ("moe_intermediate_size", "top_k", "experts_per_token", "num_experts", "moe_layers",
              "num_shared_experts", "kv_lora_rank", "sliding_window")  # fmt: skip
    for field in absent:
        assert field not in keys, field
    doc = json.loads(_show(capsys, "llama-3.1-8b", "--json"))
    assert "moe_intermediate_size" not in doc and "top_k" not in doc
    assert doc["layers"] == 32 and doc["intermediate_size"] == 14336


def test_a_moe_model_keeps_its_expert_fields(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_show(capsys, "qwen3-30b-a3b", "--json"))
    assert doc["num_experts"] == 128 and doc["experts_per_token"] == 8
    assert doc["moe_intermediate_size"] == 768 and "num_shared_experts" not in doc
    mla = json.loads(_show(capsys, "deepseek-v3", "--json"))
    assert mla["kv_lora_rank"] == 512 and mla["num_shared_experts"] == 1
