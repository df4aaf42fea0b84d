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


@pytest.mark.parametrize("leaf", ["Qwen2.5-72B-Instruct", "Qwen2.5-72B-Instruct/config.json"])
def test_a_study_is_named_as_models_show_names_the_model(tmp_path, capsys, leaf: str) -> None:
    """``…/Qwen2.5-72B-Instruct`` was studied as ``qwen2-…`` (``Path.stem`` cut ``.5-72B…``)."""
    from plena_opt.estimate.problem import ProblemSpec
    from plena_opt.search.request import SearchRequest
    from plena_opt.search.run.runner import default_study_name

    folder = tmp_path / "Qwen2.5-72B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": 152064}))  # fmt: skip
    path = str(tmp_path / leaf)
    assert main(["models", "show", "--model-path", path, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["name"]
    request = SearchRequest(problem=ProblemSpec(model=None, model_path=path, noc="hgx-h200x8"))
    assert shown == "Qwen2.5-72B-Instruct"
    assert default_study_name(request).startswith(shown + "-hgx-h200x8-")
