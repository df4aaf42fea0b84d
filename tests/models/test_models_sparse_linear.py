"""DeepSeek sparse attention and Gated DeltaNet hybrids: read, counted, held and priced
(issue 24, "Models"). The configs are the catalog's (plena_opt/models/configs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepstack import load_noc_profile, switch_noc

from plena_opt.chip import load_chip
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.distributed import EstimateContext, PlanCost
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.memory import unbounded
from plena_opt.models import ModelSpec, builtin_config, load_model
from plena_opt.models.params import count_parameters
from plena_opt.models.summary import decode_attention_work


def _full_attention_reading(name: str) -> ModelSpec:
    """The same model with every layer read as full attention and no indexer (the dense twin)."""
    spec = load_model(name)
    runs = tuple(r.model_copy(update={"attention": "full_attention"}) for r in spec.layer_runs)
    return spec.model_copy(update={"layer_runs": runs, "index_topk": 0, "index_n_heads": 0,
                                   "index_head_dim": 0, "name": name + "-dense"})  # fmt: skip


def test_qwen35_layout_is_three_deltanet_layers_then_one_gated_attention() -> None:
    spec = load_model("qwen3.5-397b-a17b")
    assert spec.linear_layers == 45 and spec.num_layers == 60
    assert spec.layer_types[:4] == ("linear_attention",) * 3 + ("full_attention",)
    assert spec.attn_output_gate and spec.qk_norm and spec.shared_expert_gate
    assert (spec.num_experts, spec.top_k, spec.moe_layers) == (512, 10, 60)
    assert spec.kv_elements_per_token("linear_attention") == 0
    assert spec.linear_state_elements == 64 * 128 * 128
    assert spec.linear_conv_state_elements == 3 * (2 * 16 * 128 + 64 * 128)
    assert spec.linear_state_bytes == 4  # mamba_ssm_dtype float32
    assert spec.attention_kind == "GQA+GDN"


def test_qwen3_next_layers_follow_full_attention_interval_without_layer_types() -> None:
    assert "layer_types" not in builtin_config("qwen3-next-80b-a3b")
    spec = load_model("qwen3-next-80b-a3b")
    assert spec.linear_layers == 36
    assert [i for i, t in enumerate(spec.layer_types) if t == "full_attention"][:3] == [3, 7, 11]


def test_dsa_is_mla_plus_an_indexer_key_per_token() -> None:
    for name, heads in (("deepseek-v3.2", 64), ("glm-5", 32)):
        spec = load_model(name)
        assert spec.is_mla and spec.is_sparse
        assert (spec.index_n_heads, spec.index_head_dim, spec.index_topk) == (heads, 128, 2048)
        assert spec.kv_elements_per_token() == 512 + 64 + 128
        assert spec.attention_kind == "MLA+DSA"
    dense = load_model("deepseek-v3")
    assert not dense.is_sparse and dense.kv_elements_per_token() == 512 + 64


def test_dsa_decode_work_reads_all_indexer_keys_and_the_top_k_latents() -> None:
    spec = load_model("deepseek-v3.2")
    short, long = decode_attention_work(spec, 1024), decode_attention_work(spec, 65536)
    assert short.kv_elements_read == 1024 * (576 + 128)
    assert long.kv_elements_read == 2048 * 576 + 65536 * 128
    dense = decode_attention_work(load_model("deepseek-v3"), 65536)
    assert long.flops < dense.flops / 4


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"linear_key_head_dim": None}, "linear_key_head_dim"),
        ({"model_type": "newfam"}, "linear_num_value_heads"),  # not a Gated DeltaNet family
        ({"linear_num_value_heads": 24}, "linear_num_value_heads"),  # not a multiple of 16
    ],
)
def test_deltanet_configs_missing_or_odd_fields_are_refused(patch: dict, field: str) -> None:
    cfg = builtin_config("qwen3.5-397b-a17b")
    cfg["text_config"] = {**cfg["text_config"], **patch}
    with pytest.raises(PlenaInputError) as err:
        ModelSpec.from_hf_config(cfg, "q")
    assert err.value.field == field


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"index_head_dim": None}, "index_head_dim"),
        ({"index_topk": None}, "index_topk"),  # the class default is not guessed
        ({"index_topk_freq": 4}, "index_topk_freq"),  # GLM-5.2: indexers shared across layers
        ({"kv_lora_rank": None, "q_lora_rank": None}, "index_topk"),  # DSA without MLA
    ],
)
def test_dsa_configs_missing_or_unmodelled_fields_are_refused(patch: dict, field: str) -> None:
    cfg = {**builtin_config("glm-5"), **patch}
    with pytest.raises(PlenaInputError) as err:
        ModelSpec.from_hf_config(cfg, "g")
    assert err.value.field == field


def _plena(model: ModelSpec, isl: int, plan: Plan) -> PlanCost:
    w = Workload(batch_size=8, input_seq_len=isl, output_seq_len=8)
    return PlanCost(EstimateContext(model, switch_noc(plan.world_size), unbounded(), w), plan)


def test_deltanet_state_is_fixed_and_only_full_attention_layers_grow() -> None:
    spec = load_model("qwen3-next-80b-a3b")
    plan = Plan(tp=2, ep=4)
    short, long = (_plena(spec, n, plan).footprint[1] for n in (4096, 8192))
    prec = _plena(spec, 4096, plan).ctx.precision
    b_dev = 8 // 4  # ep ranks act as data parallel for attention
    kv_per_token = 12 * 2 * (2 // 2) * 256 * b_dev * prec.kv_write_bytes  # 12 full layers
    assert long - short == pytest.approx(4096 * kv_per_token)
    state = (
        36
        * b_dev
        * (
            (32 // 2) * 128 * 128 * spec.linear_state_bytes
            + 3 * (2 * 8 * 128 + 16 * 128) * prec.kv_write_bytes
        )
    )
    assert short == pytest.approx(4104 * kv_per_token + state)
    dense = _full_attention_reading("qwen3-next-80b-a3b")
    assert _plena(dense, 8192, plan).footprint[1] > 2.5 * long  # 48 vs 12 layers of KV


@pytest.mark.parametrize("where", ["plena", "h200"])
def test_hybrid_decode_grows_with_context_slower_than_its_full_attention_reading(where) -> None:
    def tps(model: ModelSpec, isl: int) -> float:
        if where == "plena":
            return _plena(model, isl, Plan(tp=2, ep=4)).tps
        chip = load_chip("h200-sxm")
        w = Workload(batch_size=16, input_seq_len=isl, output_seq_len=64)
        ev = Evaluator(model, load_noc_profile("hgx-h200x8"), gpu_memory(chip), w, chip)
        return ev.evaluate(Plan(tp=2, ep=4)).tps

    hybrid = load_model("qwen3-next-80b-a3b")
    dense = _full_attention_reading("qwen3-next-80b-a3b")
    slow_down = tps(hybrid, 1024) / tps(hybrid, 32768)
    assert slow_down < tps(dense, 1024) / tps(dense, 32768)
    assert tps(hybrid, 32768) > tps(dense, 32768)


@pytest.mark.parametrize("where", ["plena", "h200"])
def test_dsa_pays_for_its_indexer_at_short_context_and_wins_at_long(where: str) -> None:
    def cost(model: ModelSpec, isl: int) -> Any:
        plan = Plan(tp=8)
        if where == "plena":
            return _plena(model, isl, plan)
        chip = load_chip("h200-sxm")
        w = Workload(batch_size=16, input_seq_len=isl, output_seq_len=64, precision="fp8")
        return Evaluator(model, load_noc_profile("hgx-h200x8"), gpu_memory(chip), w, chip
                         ).evaluate(plan)  # fmt: skip

    sparse, dense = load_model("deepseek-v3.2"), _full_attention_reading("deepseek-v3.2")
    assert cost(sparse, 1024).tps < cost(dense, 1024).tps  # keys ≤ top-k: the indexer is extra
    assert cost(sparse, 32768).tps > cost(dense, 32768).tps


def test_counts_match_the_model_cards() -> None:
    # Cards: Qwen3.5-397B-A17B 397B / 17B activated; Qwen3-Next-80B-A3B 80B / 3B activated (both
    # with the embedding); DeepSeek-V3.2 671B main model (685B with its MTP module); GLM-5 744B
    # (40B active); MiniMax-M2.5 230B / 10B activated (without the embedding tables).
    cards = {"qwen3.5-397b-a17b": 397e9, "qwen3-next-80b-a3b": 80e9, "deepseek-v3.2": 671e9,
             "glm-5": 744e9, "minimax-m2.5": 230e9}  # fmt: skip
    # The serving measurements' dense models and gpt-oss: Llama-3.1-8B / 70B cards 8B / 70B,
    # Qwen3-32B card 32.8B, gpt-oss-120b card 117B (116.8B in the OpenAI model card table).
    cards |= {"llama-3.1-8b": 8e9, "llama-3.1-70b": 70e9, "qwen3-32b": 32.8e9,
              "gpt-oss-120b": 116.8e9}  # fmt: skip
    for name, total in cards.items():
        assert count_parameters(load_model(name)).total == pytest.approx(total, rel=0.01), name
    assert count_parameters(load_model("qwen3.5-397b-a17b")).active == pytest.approx(17e9, rel=0.03)
    spec = load_model("qwen3-next-80b-a3b")
    tables = 2 * spec.vocab_size * spec.hidden_size
    assert round((count_parameters(spec).active - tables) / 1e9) == 3


def test_disaggregated_transfer_carries_the_deltanet_state_and_the_indexer_keys() -> None:
    from plena_opt.estimate.disaggregated import kv_bytes_per_sequence

    def per_sequence(spec: ModelSpec) -> tuple[int, float]:
        w = Workload(batch_size=1, input_seq_len=4096, output_seq_len=4)
        ctx = EstimateContext(spec, switch_noc(8), unbounded(), w)
        return kv_bytes_per_sequence(ctx), ctx.precision.kv_write_bytes

    qn = load_model("qwen3-next-80b-a3b")
    got, kvb = per_sequence(qn)
    state = 36 * (32 * 128 * 128 * qn.linear_state_bytes + 3 * (2 * 16 * 128 + 32 * 128) * kvb)
    assert got == pytest.approx(12 * 4096 * 2 * 2 * 256 * kvb + state, abs=1)
    v32, kvb = per_sequence(load_model("deepseek-v3.2"))
    assert v32 == pytest.approx(61 * 4096 * (576 + 128) * kvb, abs=1)


QWEN35_27B = Path(__file__).parents[1] / "data" / "qwen3.5-27b"


def test_dense_qwen35_vl_wrapper_prices_its_hybrid_text_model() -> None:
    spec = load_model(path=QWEN35_27B)
    assert spec.family == "llama" and spec.linear_layers == 48 and not spec.num_experts
    assert any(n.startswith("vision_config") for n in spec.not_modelled)
    assert count_parameters(spec).total == pytest.approx(27e9, rel=0.01)  # card: 27B
    chip = load_chip("h200-sxm")
    w = Workload(batch_size=8, input_seq_len=2048, output_seq_len=64)
    ev = Evaluator(spec, load_noc_profile("hgx-h200x8"), gpu_memory(chip), w, chip)
    assert ev.evaluate(Plan(tp=8)).tps > 0
    with pytest.raises(PlenaInputError) as err:
        ev.evaluate(Plan(tp=2, cp=4))
    assert err.value.field == "cp"
