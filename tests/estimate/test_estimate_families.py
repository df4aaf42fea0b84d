"""Pricing of MLA, shared experts, chunked attention and two-matrix MLPs (issue #12)."""

from __future__ import annotations

from math import ceil
from typing import Any

import numpy as np
import pytest
from deepstack import switch_noc

from plena_opt.chip import PerfModel
from plena_opt.estimate import Plan, Workload, estimate_distributed
from plena_opt.estimate.distributed import EstimateContext, PlanCost
from plena_opt.estimate.layer import LayerKind, _attention_cycles, layer_traffic
from plena_opt.memory import HbmStoragePrecision, unbounded
from plena_opt.models import ModelSpec, builtin_config
from plena_opt.models.summary import decode_attention_work

PREC = HbmStoragePrecision.default()
MLA_CFG: dict[str, Any] = {
    "model_type": "deepseek_v3",
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "intermediate_size": 2048,
    "vocab_size": 4096,
    "q_lora_rank": 256,
    "kv_lora_rank": 128,
    "qk_rope_head_dim": 32,
    "qk_nope_head_dim": 64,
    "v_head_dim": 64,
}
BASE_DENSE: dict[str, Any] = {
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 2048,
    "vocab_size": 4096,
}
WL = {"batch_size": 8, "input_seq_len": 512, "output_seq_len": 4}


def _cost(model: ModelSpec, plan: Plan, devices: int = 8, **w: Any) -> PlanCost:
    ctx = EstimateContext(model, switch_noc(devices), unbounded(), Workload(**(WL | w)))
    return PlanCost(ctx, plan)


def _gqa_reading(cfg: dict[str, Any]) -> dict[str, Any]:
    """The same model read as plain multi-head attention (the MLA fields dropped)."""
    out = {k: v for k, v in cfg.items() if "lora" not in k and not k.startswith(("qk_", "v_"))}
    return out | {"head_dim": cfg["v_head_dim"]}


def test_mla_kv_bytes_per_token_by_hand() -> None:
    spec = ModelSpec.from_hf_config(MLA_CFG, "mla")
    cost = _cost(spec, Plan(tp=8))
    held = WL["input_seq_len"] + WL["output_seq_len"]
    # one latent of kv_lora_rank + qk_rope_head_dim per token and layer, replicated over tp
    expected = 4 * WL["batch_size"] * held * (128 + 32) * PREC.kv_write_bytes
    assert cost.footprint[1] == pytest.approx(expected, rel=1e-12)


def test_gqa_kv_bytes_per_token_by_hand() -> None:
    spec = ModelSpec.from_hf_config(_gqa_reading(MLA_CFG), "gqa")
    cost = _cost(spec, Plan(tp=8))
    held = WL["input_seq_len"] + WL["output_seq_len"]
    expected = 4 * WL["batch_size"] * held * 2 * (16 // 8) * 64 * PREC.kv_write_bytes
    assert cost.footprint[1] == pytest.approx(expected, rel=1e-12)


def test_mla_absorbed_decode_cycles_and_bytes_by_hand() -> None:
    spec = ModelSpec.from_hf_config(MLA_CFG, "mla")
    cost = _cost(spec, Plan(tp=2), devices=2)
    p = PerfModel()
    kv = np.array([1000.0, 5000.0])
    cyc = _attention_cycles(cost.shape, LayerKind("full_attention", False), "decode", 1, kv)
    H, b, lat, rank, nope, v = 16 // 2, 8, 128 + 32, 128, 64, 64
    M, B = p.MLEN, p.BLEN
    mm, isa = p.I("M_MM"), p.I

    def matmul(rows: int, k: int, n: int) -> int:  # rows x k times k x n on the array
        return -(-rows // B) * -(-k // M) * -(-n // B) * mm

    per_tile = b * (
        matmul(H, lat, M)  # scores against the shared latent (keys: kv_lora + rope)
        + isa("H_PREFETCH_M")
        + H * (4 * isa("V_BASIC") + 2 * isa("S_BASIC") + isa("S_EXP_FP"))
        + matmul(H, M, rank)  # probabilities x latent values
        + H * (2 * isa("V_BASIC") + 1)
    )
    absorb = H * (matmul(b, nope, rank) + matmul(b, rank, v))  # W_UK into q, W_UV out
    for i, n in enumerate(kv):
        assert cyc[i] == ceil(n / M) * per_tile + absorb
    reads, writes = layer_traffic(
        cost.shape, LayerKind("full_attention", False), "decode", 1, kv, 1, None
    )
    assert np.allclose(reads["kv_cache"], kv * b * lat * PREC.kv_read_bytes, rtol=1e-12)
    assert writes["kv_cache"] == pytest.approx(b * lat * PREC.kv_write_bytes)
    h = 1024
    weights = (
        h * 256
        + 256 * H * 96  # q down (replicated) + q up (this rank's heads)
        + h * lat
        + rank * H * (nope + v)  # latent down (replicated) + k_nope/v up
        + H * v * h  # output
        + 3 * h * ceil(2048 / 2)  # dense FFN shard
    )
    assert reads["weights"] == pytest.approx(weights * PREC.weight_bytes, rel=1e-12)


def test_deepseek_v3_on_8_devices_saves_kv_versus_gqa_reading() -> None:
    cfg = builtin_config("deepseek-v3")
    mla = ModelSpec.from_hf_config(cfg, "deepseek-v3")
    gqa = ModelSpec.from_hf_config(_gqa_reading(cfg), "deepseek-v3-as-gqa")
    plan = Plan(tp=8)
    w = Workload(batch_size=8, input_seq_len=1024, output_seq_len=4)
    noc = switch_noc(8)
    a = estimate_distributed(mla, noc, unbounded(), plan, w)
    b = estimate_distributed(gqa, noc, unbounded(), plan, w)
    # GQA: K and V of 128/8 heads x 128 per device; MLA: one replicated 512 + 64 latent
    ratio = b.kv_cache_bytes_per_device / a.kv_cache_bytes_per_device
    assert ratio == pytest.approx(2 * (128 // 8) * 128 / (512 + 64), rel=1e-12)
    assert (
        a.first_token_decode["stages"][0]["read_bytes"]
        < b.first_token_decode["stages"][0]["read_bytes"]
    )


def test_shared_experts_are_tp_split_and_replicated_over_ep() -> None:
    base = {
        **MLA_CFG,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 256,
        "first_k_dense_replace": 1,
    }
    with_shared = ModelSpec.from_hf_config({**base, "n_shared_experts": 2}, "s")
    without = ModelSpec.from_hf_config(base, "n")
    plan = Plan(tp=2, ep=4)
    diff = _cost(with_shared, plan).footprint[0] - _cost(without, plan).footprint[0]
    # 3 MoE layers x gated FFN of 2 x 256 split over tp=2 (not divided by ep)
    assert diff == pytest.approx(3 * 3 * 1024 * ceil(512 / 2) * PREC.weight_bytes, rel=1e-12)
    comm = _cost(with_shared, plan).decode.comm[LayerKind("full_attention", True)]
    plain = _cost(without, plan).decode.comm[LayerKind("full_attention", True)]
    assert comm["tp_all_reduce"].seconds == pytest.approx(2 * plain["tp_all_reduce"].seconds)


def test_chunked_layers_hold_and_attend_one_chunk() -> None:
    cfg = {
        **builtin_config("llama-3.1-8b"),
        "num_hidden_layers": 4,
        "layer_types": ["chunked_attention", "full_attention"] * 2,
        "attention_chunk_size": 128,
    }
    spec = ModelSpec.from_hf_config(cfg, "c")
    cost = _cost(spec, Plan(), devices=1)
    held = WL["input_seq_len"] + WL["output_seq_len"]
    per_token = 2 * 8 * 128 * WL["batch_size"] * PREC.kv_write_bytes
    assert cost.footprint[1] == pytest.approx(2 * (held + 128) * per_token, rel=1e-12)
    kv = np.array([512.0, 600.0])
    reads, _ = layer_traffic(
        cost.shape, LayerKind("chunked_attention", False), "decode", 1, kv, 1, None
    )
    attended = np.array([512 % 128 + 1, 600 % 128 + 1])
    assert np.allclose(
        reads["kv_cache"], attended * per_token / PREC.kv_write_bytes * PREC.kv_read_bytes
    )


def test_two_matrix_mlp_weights() -> None:
    cfg = {**builtin_config("llama-3.1-8b"), "model_type": "starcoder2", "num_hidden_layers": 2}
    gated = ModelSpec.from_hf_config({**cfg, "model_type": "llama"}, "g")
    plain = ModelSpec.from_hf_config(cfg, "p")
    diff = (
        _cost(gated, Plan(), devices=1).footprint[0] - _cost(plain, Plan(), devices=1).footprint[0]
    )
    assert diff == pytest.approx(2 * 4096 * 14336 * PREC.weight_bytes, rel=1e-12)
    a = _cost(gated, Plan(), devices=1)
    b = _cost(plain, Plan(), devices=1)
    assert b.decode_seconds < a.decode_seconds


def test_mla_absorbed_decode_flops_and_bytes_per_token_by_hand() -> None:
    spec = ModelSpec.from_hf_config(builtin_config("deepseek-v3"), "deepseek-v3")
    kv = 4096
    work = decode_attention_work(spec, kv)
    H, r, rope, nope, v = 128, 512, 64, 128, 128
    absorb_q = 2 * H * nope * r  # q_nope · W_UK per head
    scores = 2 * H * kv * (r + rope)  # against the shared latent key
    values = 2 * H * kv * r  # probabilities · latent values
    absorb_out = 2 * H * r * v  # latent output · W_UV per head
    assert work.flops == absorb_q + scores + values + absorb_out
    assert work.kv_elements_read == kv * (r + rope)
    gqa = ModelSpec.from_hf_config(_gqa_reading(builtin_config("deepseek-v3")), "gqa")
    plain = decode_attention_work(gqa, kv)
    assert plain.flops == 2 * 2 * H * kv * 128 and plain.kv_elements_read == kv * 2 * H * 128
    # the absorbed form reads 57x less cache for ~2.2x the attention FLOPs
    assert plain.kv_elements_read / work.kv_elements_read == pytest.approx(2 * H * 128 / 576)


def test_norms_per_layer_are_priced() -> None:
    from plena_opt.estimate.layer import DECODE_ISSUE_FACTOR, layer_cycles

    cfg = {**BASE_DENSE, "layer_types": ["full_attention"] * 2}
    four = _cost(ModelSpec.from_hf_config({**cfg, "model_type": "gemma2"}, "g2"), Plan(), 1)
    two = _cost(ModelSpec.from_hf_config({**cfg, "model_type": "gemma"}, "g1"), Plan(), 1)
    one = _cost(ModelSpec.from_hf_config({**cfg, "model_type": "cohere"}, "c"), Plan(), 1)
    kind, kv = LayerKind("full_attention", False), np.array([300.0])
    cyc = [layer_cycles(c.shape, kind, "decode", 1, kv, None)[0] for c in (four, two, one)]
    rms = PerfModel().rms_layer(1024, 1, WL["batch_size"], "decode") * DECODE_ISSUE_FACTOR
    assert cyc[0] - cyc[1] == 2 * rms and cyc[1] - cyc[2] == rms


def test_context_parallelism_is_refused_for_mla_and_chunked_layers() -> None:
    from plena_opt.errors import PlenaInputError

    chunked = {
        **BASE_DENSE,
        "layer_types": ["chunked_attention", "full_attention"],
        "attention_chunk_size": 64,
    }
    for cfg in (MLA_CFG, chunked):
        spec = ModelSpec.from_hf_config(cfg, "m")
        with pytest.raises(PlenaInputError, match="context parallelism") as info:
            _cost(spec, Plan(cp=2), devices=2)
        assert info.value.field == "cp"


@pytest.mark.parametrize("pp", [1, 2, 3, 5, 7, 13])
def test_stage_counts_from_runs_equal_counting_every_layer(pp: int) -> None:
    from collections import Counter

    from plena_opt.estimate.layer import layer_kind_runs, stage_counts

    for name in ("gemma-2-27b", "deepseek-v3", "llama-4-scout", "gpt-oss-20b", "llama-3.1-8b"):
        spec = ModelSpec.from_hf_config(builtin_config(name), name)
        runs = layer_kind_runs(spec)
        every = [k for k, n in runs for _ in range(n)]
        per = ceil(len(every) / pp)
        naive = [Counter(every[i * per : (i + 1) * per]) for i in range(pp)]
        got = stage_counts(runs, spec.num_layers, pp)
        assert got == naive
        assert [list(c) for c in got] == [list(c) for c in naive]  # same first-seen order
