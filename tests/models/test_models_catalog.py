"""Built-in model catalog: shipped configs, golden ``model`` descriptions, loading by name/path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plena_opt.errors import PlenaInputError, PlenaNotFoundError, PlenaTypeError
from plena_opt.models import ModelSpec, builtin_config, list_models, load_model, model_info
from tests.conftest import load_golden

REQUIRED = {
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.3-70b",
    "llama-3.2-1b",
    "estimated-llama-3.1-405b",
    "llama-3.1-405b",
    "qwen3-32b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "qwen3-235b-a22b",
    "mixtral-8x7b",
    "fictional-moe-128",
    "fictional-24-head",
}


def test_catalog_holds_the_required_models() -> None:
    assert REQUIRED <= set(list_models())
    for name in list_models():
        spec = load_model(name)
        assert spec.name == name
        assert model_info(name)["source"] != "unknown"


@pytest.mark.parametrize("golden", ["distributed", "single_chip", "invalid_plans"])
def test_golden_configs_shipped_with_identical_values(shared_dir: Path, golden: str) -> None:
    models = load_golden(golden)["models"]
    assert models
    for name, cfg in models.items():
        assert builtin_config(name) == cfg, name


def test_describe_matches_every_golden_model_field(shared_dir: Path) -> None:
    seen = {}
    for case in load_golden("distributed")["cases"]:
        seen[case["inputs"]["model"]] = case["output"]["model"]
    assert len(seen) >= 5
    for name, described in seen.items():
        assert load_model(name).describe() == described


def test_spec_2_3_values() -> None:
    est = load_model("estimated-llama-3.1-405b")
    real = load_model("llama-3.1-405b")
    assert (est.vocab_size, real.vocab_size) == (128000, 128256)
    for spec in (est, real):
        assert (spec.hidden_size, spec.num_layers, spec.num_heads, spec.num_kv_heads) == (
            16384,
            126,
            128,
            8,
        )
        assert (spec.head_dim, spec.intermediate_size, spec.family) == (128, 53248, "llama")
    q32 = load_model("qwen3-32b")
    assert (q32.hidden_size, q32.num_heads, q32.head_dim, q32.intermediate_size) == (
        5120,
        64,
        128,
        25600,
    )
    assert load_model("llama-3.3-70b").describe() == {
        **load_model("llama-3.1-70b").describe(),
        "name": "llama-3.3-70b",
    }
    oss = load_model("gpt-oss-120b")
    assert (oss.num_layers, oss.num_experts, oss.top_k, oss.sliding_layers) == (36, 128, 4, 18)
    assert (oss.hidden_size, oss.head_dim, oss.vocab_size, oss.sliding_window) == (
        2880,
        64,
        201088,
        128,
    )
    assert oss.layer_types[:2] == ("sliding_attention", "full_attention")
    assert model_info("gpt-oss-120b")["external"] is True
    assert model_info("gpt-oss-20b")["external"] is False


def test_public_moe_configs() -> None:
    qwen = load_model("qwen3-235b-a22b")
    assert qwen.describe() == {
        "name": "qwen3-235b-a22b",
        "family": "moe",
        "layers": 94,
        "hidden_size": 4096,
        "heads": 64,
        "kv_heads": 4,
        "head_dim": 128,
        "moe_layers": 94,
        "num_experts": 128,
        "experts_per_token": 8,
        "sliding_layers": 0,
    }
    assert (qwen.intermediate_size, qwen.moe_intermediate_size, qwen.vocab_size) == (
        12288,
        1536,
        151936,
    )
    assert qwen.tie_word_embeddings is False
    mix = load_model("mixtral-8x7b")
    assert (mix.num_experts, mix.top_k, mix.moe_layers, mix.sliding_window) == (8, 2, 32, 0)
    assert (mix.hidden_size, mix.num_heads, mix.num_kv_heads, mix.head_dim) == (4096, 32, 8, 128)
    assert (mix.moe_intermediate_size, mix.vocab_size) == (14336, 32000)


def test_model_spec_is_frozen_and_loads_are_shared() -> None:
    spec = load_model("llama-3.1-8b")
    with pytest.raises(ValueError):
        spec.hidden_size = 1  # type: ignore[misc]
    assert load_model("llama-3.1-8b") is spec
    assert isinstance(spec, ModelSpec)


def test_builtin_config_is_a_copy() -> None:
    builtin_config("llama-3.1-8b")["hidden_size"] = 1
    assert builtin_config("llama-3.1-8b")["hidden_size"] == 4096


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(PlenaNotFoundError) as info:
        load_model("llama-9")
    assert info.value.field == "model"
    assert "llama-9" in str(info.value) and "llama-3.1-8b" in str(info.value)


def test_needs_a_name_or_path() -> None:
    with pytest.raises(PlenaInputError, match="model-path"):
        load_model()
    with pytest.raises(PlenaTypeError):
        load_model(8)  # type: ignore[arg-type]


def test_load_from_path(tmp_path: Path) -> None:
    folder = tmp_path / "My-Model"
    folder.mkdir()
    cfg = dict(builtin_config("fictional-moe-128"), num_experts_per_tok=2)
    (folder / "config.json").write_text(json.dumps(cfg))
    spec = load_model(path=folder / "config.json")
    assert spec.name == "My-Model" and spec.top_k == 2
    (tmp_path / "other.json").write_text(json.dumps(cfg))
    assert load_model(path=str(tmp_path / "other.json")).name == "other"
    assert load_model("custom", path=tmp_path / "other.json").name == "custom"


@pytest.mark.parametrize(
    ("content", "error", "fragment"),
    [
        (None, PlenaInputError, "cannot read model config"),
        ("{oops", PlenaInputError, "not valid JSON"),
        (b"\xff\xfe\x00", PlenaInputError, "not valid JSON"),
        ("[1, 2]", PlenaTypeError, "JSON object"),
        ("{}", PlenaInputError, "missing hidden_size"),
    ],
)
def test_bad_model_files_name_the_path(
    tmp_path: Path, content: str | bytes | None, error: type[Exception], fragment: str
) -> None:
    path = tmp_path / "broken.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(error, match=fragment) as info:
        load_model(path=path)
    if fragment != "missing hidden_size":
        assert str(path) in str(info.value) and info.value.field == "model_path"
