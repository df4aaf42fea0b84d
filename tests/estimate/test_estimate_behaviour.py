"""Behaviours of analytic-model §7 (parity, communication, pipelining, CP, MoE, footprints)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from deepstack import Network, switch_noc
from deepstack import moe as ds_moe

from plena_opt.chip import PerfModel, load_chip
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, Workload, estimate_decoder_latency, estimate_distributed
from plena_opt.estimate.moe_load import busiest_rank_load, moe_cycles
from plena_opt.estimate.shard import dense_scheme, moe_parallel
from plena_opt.memory import FixedBandwidthMemory, load_memory, unbounded
from plena_opt.models import ModelSpec, load_model

L8 = load_model("llama-3.1-8b")
GPT = load_model("gpt-oss-20b")
FICT = load_model("fictional-moe-128")
UNB = unbounded()


def est(model, noc, plan=None, memory=UNB, **w):
    kw = {"batch_size": 8, "input_seq_len": 256, "output_seq_len": 3} | w
    return estimate_distributed(model, noc, memory, plan or Plan(), Workload(**kw))


# --- 7.1 one device equals one chip ------------------------------------------------------------
MEMORIES = {
    "unbounded": UNB,
    "fixed": FixedBandwidthMemory(1.234e12, None, name="fixed"),
    "stacked": load_memory("fictional_stacked_dram"),
}


@pytest.mark.parametrize("mem", MEMORIES)
@pytest.mark.parametrize("lm", [False, True])
def test_one_device_equals_single_chip(mem, lm):
    memory = MEMORIES[mem]
    d = est(
        L8,
        switch_noc(1),
        memory=memory,
        batch_size=4,
        input_seq_len=1024,
        output_seq_len=6,
        include_lm_head=lm,
    )
    s = estimate_decoder_latency(
        L8, memory, batch_size=4, input_seq_len=1024, output_seq_len=6, include_lm_head=lm
    )
    for a, b in [
        (d.ttft_seconds, s.ttft_seconds),
        (d.tps, s.tps),
        (d.weight_bytes_per_device, s.weight_footprint_bytes),
        (d.kv_cache_bytes_per_device, s.kv_cache_footprint_bytes),
        (d.prefill["stages"][0]["read_bytes"], s.prefill["read_bytes"]),
        (d.prefill["stages"][0]["write_bytes"], s.prefill["write_bytes"]),
    ]:
        assert math.isclose(a, b, rel_tol=1e-12)
    assert math.isclose(d.tps_per_sequence, d.tps / 4, rel_tol=1e-12)
    assert d.prefill["stages"][0]["comm_seconds"] == {}
    assert d.first_token_decode["stages"][0]["comm_seconds"] == {}
    assert d.noc_energy_pj_per_decode_token == 0.0


# --- 7.2 communication ---------------------------------------------------------------------------
def test_tp8_decode_has_only_tp_all_reduce_equal_to_the_network_cost():
    noc = switch_noc(8)
    d = est(L8, noc, Plan(tp=8), batch_size=4, output_seq_len=2)
    stage = d.first_token_decode["stages"][0]
    assert set(stage["comm_seconds"]) == {"tp_all_reduce"}
    ar = Network(noc).all_reduce(dense_scheme(Plan(tp=8)), "tp", int(4 * 4096 * 1.125))
    assert math.isclose(stage["comm_seconds"]["tp_all_reduce"], 2 * 32 * ar.seconds, rel_tol=1e-12)
    assert math.isclose(
        stage["seconds"], stage["compute_seconds"] + 2 * 32 * ar.seconds, rel_tol=1e-12
    )


def test_non_power_of_two_tp_uses_ring():
    cfg = {
        "hidden_size": 1536,
        "num_attention_heads": 24,
        "num_key_value_heads": 6,
        "num_hidden_layers": 2,
        "intermediate_size": 4096,
        "vocab_size": 32000,
    }
    model = ModelSpec.from_hf_config(cfg, "fictional-24-head")
    noc = switch_noc(6)
    ar = Network(noc).all_reduce(dense_scheme(Plan(tp=6)), "tp", int(4 * 1536 * 1.125))
    assert ar.algorithm == "ring"
    d = est(model, noc, Plan(tp=6), batch_size=4, output_seq_len=2)
    got = d.first_token_decode["stages"][0]["comm_seconds"]["tp_all_reduce"]
    assert math.isclose(got, 2 * 2 * ar.seconds, rel_tol=1e-12)


def test_full_comm_overlap_is_faster_but_bounded_by_compute_and_comm():
    noc = switch_noc(8)
    none = est(L8, noc, Plan(tp=8), batch_size=4)
    full = est(L8, noc, Plan(tp=8, comm_overlap="full"), batch_size=4)
    s_none, s_full = none.first_token_decode["stages"][0], full.first_token_decode["stages"][0]
    assert s_full["seconds"] < s_none["seconds"]
    comm = sum(s_full["comm_seconds"].values())
    assert s_full["seconds"] >= max(s_full["compute_seconds"], comm) * (1 - 1e-12)
    assert full.tps > none.tps


def test_pipeline_transfer_is_positive_and_routed():
    noc = switch_noc(4, groups=2)
    d = est(L8, noc, Plan(tp=2, pp=2))
    p2p = Network(noc).pipeline_p2p(dense_scheme(Plan(tp=2, pp=2)), int(4 * 256 * 4096 * 1.125))
    assert d.prefill["transfer_seconds"] == pytest.approx(p2p.seconds, rel=1e-12)
    assert d.first_token_decode["transfer_seconds"] > 0


def test_cp2_combines_attention_and_halves_kv():
    noc = switch_noc(2)
    one = est(L8, switch_noc(1), batch_size=4, output_seq_len=2)
    cp = est(L8, noc, Plan(cp=2), batch_size=4, output_seq_len=2)
    net = Network(noc)
    scheme = dense_scheme(Plan(cp=2))
    comb = net.all_reduce(scheme, "cp", int(4 * 32 * 128 * 1.125)).seconds
    gath = net.all_gather(scheme, "cp", int(2 * 4 * 256 * 8 * 128 * 1.125)).seconds
    dec = cp.first_token_decode["stages"][0]["comm_seconds"]
    pre = cp.prefill["stages"][0]["comm_seconds"]
    assert dec["cp_attention_combine"] == pytest.approx(32 * comb, rel=1e-12)
    assert pre["cp_kv_all_gather"] == pytest.approx(32 * gath, rel=1e-12)
    assert cp.prefill["stages"][0]["compute_seconds"] < one.prefill["stages"][0]["compute_seconds"]
    assert cp.kv_cache_bytes_per_device == pytest.approx(one.kv_cache_bytes_per_device / 2)


def test_noc_energy_per_token_and_none_without_coefficients():
    d = est(L8, switch_noc(8), Plan(tp=8), batch_size=4)
    ar = Network(switch_noc(8)).all_reduce(dense_scheme(Plan(tp=8)), "tp", int(4 * 4096 * 1.125))
    assert d.noc_energy_pj_per_decode_token == pytest.approx(2 * 32 * ar.noc_energy_pj / 4)
    plain = est(L8, switch_noc(8, energy=False), Plan(tp=8), batch_size=4)
    assert plain.noc_energy_pj_per_decode_token is None
    assert plain.tps == d.tps


# --- 7.3 model -----------------------------------------------------------------------------------
def test_dp_replicates_throughput():
    one = est(L8, switch_noc(1), batch_size=4)
    dp = est(L8, switch_noc(4), Plan(dp=4), batch_size=16)
    assert dp.ttft_seconds == pytest.approx(one.ttft_seconds, rel=1e-12)
    assert dp.tps == pytest.approx(4 * one.tps, rel=1e-12)
    assert dp.tps_per_sequence == pytest.approx(one.tps_per_sequence, rel=1e-12)
    assert dp.sequences_per_device == 4


def test_pp2_pipelining_formulas():
    d = est(L8, switch_noc(2), Plan(pp=2), batch_size=7)
    assert d.micro_batch == 4
    assert [s["layers"] for s in d.prefill["stages"]] == [16, 16]
    for ps in (d.prefill, d.first_token_decode):
        secs = [s["seconds"] for s in ps["stages"]]
        assert ps["period_seconds"] == pytest.approx(max(secs) + ps["transfer_seconds"])
        assert ps["latency_seconds"] == pytest.approx(sum(secs) + ps["transfer_seconds"])
    assert d.prefill["bottleneck_stage"] == 0  # the embedding stage sits on stage 0
    assert d.ttft_seconds == pytest.approx(
        d.prefill["latency_seconds"] + d.first_token_decode["latency_seconds"]
    )
    assert d.tps == pytest.approx(4 * 3 / d.decode_seconds)
    assert d.tps_per_sequence == pytest.approx(3 / (2 * d.decode_seconds))
    assert any("multiple of pp=2" in w for w in d.warnings)


def test_stage_layouts_and_empty_stage_warning():
    assert [s["layers"] for s in est(L8, switch_noc(3), Plan(pp=3)).prefill["stages"]] == [
        11,
        11,
        10,
    ]
    d = est(L8, switch_noc(12), Plan(pp=12), batch_size=12, output_seq_len=1)
    assert [s["layers"] for s in d.prefill["stages"]] == [3] * 10 + [2, 0]
    assert any("empty" in w for w in d.warnings)


def test_footprints_split_with_tp_and_pp():
    one = est(L8, switch_noc(1))
    tp2 = est(L8, switch_noc(2), Plan(tp=2))
    assert tp2.weight_bytes_per_device == pytest.approx(one.weight_bytes_per_device / 2)
    assert tp2.kv_cache_bytes_per_device == pytest.approx(one.kv_cache_bytes_per_device / 2)
    pp2 = est(L8, switch_noc(2), Plan(pp=2))
    assert pp2.weight_bytes_per_device == pytest.approx(one.weight_bytes_per_device / 2, rel=0.01)
    tp8 = est(L8, switch_noc(8), Plan(tp=8))
    tp16 = est(L8, switch_noc(16), Plan(tp=16))
    assert tp16.kv_cache_bytes_per_device == tp8.kv_cache_bytes_per_device
    assert any("KV heads are replicated" in w for w in tp16.warnings)


def test_gpt_oss_kv_footprint_counts_sliding_window():
    d = est(GPT, switch_noc(1), batch_size=2, input_seq_len=1000, output_seq_len=3)
    expected = 12 * 2 * 2 * 8 * 64 * (1003 + min(1003, 128)) * 1.125
    assert d.kv_cache_bytes_per_device == pytest.approx(expected, rel=1e-12)


def test_capacity_decides_fit():
    one = est(L8, switch_noc(1))
    need = one.weight_bytes_per_device + one.kv_cache_bytes_per_device
    half = FixedBandwidthMemory(1e12, int(need // 2), name="half")
    assert est(L8, switch_noc(1), memory=half).fits_in_memory is False
    assert est(L8, switch_noc(2), Plan(tp=2), memory=half).fits_in_memory is True
    exact = FixedBandwidthMemory(1e12, int(need), name="exact")
    assert est(L8, switch_noc(1), memory=exact).fits_in_memory is True


def test_idle_replicas_warning():
    d = est(L8, switch_noc(4), Plan(dp=4), batch_size=2)
    assert d.sequences_per_device == 1
    assert any("idle" in w for w in d.warnings)


@pytest.mark.parametrize(
    "model,plan,n,kw,needle",
    [
        (L8, Plan(tp=2), 4, {}, "uses 2 devices"),
        (L8, Plan(tp=3), 3, {}, "does not divide"),
        (L8, Plan(ep=2), 2, {}, "needs a model with MoE"),
        (L8, Plan(pp=33), 33, {}, "exceeds the 32 layers"),
        (L8, Plan(cp=2), 2, {"input_seq_len": 1}, "1-token prompt"),
        (GPT, Plan(cp=2), 2, {}, "dense full-attention models only"),
        (GPT, Plan(ep=3), 3, {}, "do not split evenly"),
        (GPT, Plan(ep=2), 2, {"routing": "uniform"}, "unknown routing mode"),
    ],
)
def test_rejected_plans_name_the_rule(model, plan, n, kw, needle):
    with pytest.raises(PlenaInputError, match=needle):
        est(model, switch_noc(n), plan, **kw)


def test_bad_option_words_are_rejected():
    with pytest.raises(PlenaInputError, match="comm_overlap must be one of none, full"):
        Plan(comm_overlap="partial")
    with pytest.raises(PlenaInputError, match="overlap_policy must be one of"):
        Workload(overlap_policy="magic")


# --- 7.4 MoE -------------------------------------------------------------------------------------
def test_replace_and_keep_moe_schemes():
    assert moe_parallel(2, 4, 32, "replace") == (1, 8)
    assert moe_parallel(8, 2, 4, "replace") == (4, 4)
    with pytest.raises(PlenaInputError, match="multiple"):
        moe_parallel(2, 3, 4, "replace")
    assert moe_parallel(2, 4, 32, "keep") == (2, 4)
    s = dense_scheme(Plan(tp=2, ep=4, dp=2))
    assert (s.tp, s.ep, s.dp) == (2, 1, 8)


def test_balanced_rows_spread_tokens_over_experts_and_ranks():
    rows = ds_moe.balanced_rows(64, 32, 4)
    assert np.all(np.bincount(rows.ravel(), minlength=32) == 8)
    ranks = rows * 8 // 32
    assert all(len(set(r)) == 4 for r in ranks)


def test_random_rows_are_seeded_and_distinct_per_token():
    a = ds_moe.random_rows(64, 32, 4, seed=0)
    assert np.array_equal(a, ds_moe.random_rows(64, 32, 4, seed=0))
    assert all(len(set(r)) == 4 for r in a)


def test_balanced_load_on_ep8():
    load = busiest_rank_load(
        FICT, micro=64, q=1, dp=1, tp_moe=1, ep_moe=8, routing="balanced", rows=None
    )
    assert (load.tokens_local, load.pairs, load.imbalance) == (8, 64, 1.0)
    gpt = busiest_rank_load(
        GPT, micro=64, q=1, dp=1, tp_moe=1, ep_moe=8, routing="balanced", rows=None
    )
    assert (gpt.tokens_local, gpt.pairs, gpt.expert_counts) == (8, 32, (8, 8, 8, 8))


def test_random_load_counted_below_4096_and_estimated_above():
    rows = ds_moe.random_rows(64, 128, 8, seed=0)
    small = busiest_rank_load(
        FICT, micro=64, q=1, dp=1, tp_moe=1, ep_moe=8, routing="random", rows=rows
    )
    assert small.source == "random"
    assert small.pairs == sum(small.expert_counts) and small.imbalance >= 1
    assert len(small.expert_counts) == 16
    big = busiest_rank_load(
        FICT, micro=8192, q=1, dp=1, tp_moe=1, ep_moe=8, routing="random", rows=None
    )
    assert big.source.endswith("(DeepStack estimate)") and big.imbalance >= 1


@pytest.mark.parametrize("mode,micro,q", [("prefill", 1, 300), ("decode", 7, 1)])
def test_one_rank_moe_cycles_equal_mlp_moe(mode, micro, q):
    perf = PerfModel(load_chip())
    load = busiest_rank_load(
        GPT, micro=micro, q=q, dp=1, tp_moe=1, ep_moe=1, routing="balanced", rows=None
    )
    m = GPT
    assert moe_cycles(perf, m, load, m.moe_intermediate_size, mode) == perf.mlp_moe(
        m.hidden_size, q, micro, m.num_experts, m.top_k, m.intermediate_size, mode
    )


def test_expert_parallel_gpt_oss_beats_one_device():
    one = est(GPT, switch_noc(1), batch_size=16)
    ep8 = est(GPT, switch_noc(8), Plan(ep=8), batch_size=16)
    assert ep8.moe["experts_per_rank"] == 4 and ep8.sequences_per_device == 2
    assert ep8.weight_bytes_per_device < one.weight_bytes_per_device / 2
    assert (
        ep8.prefill["stages"][0]["compute_seconds"]
        < one.prefill["stages"][0]["compute_seconds"] / 4
    )
    assert ep8.tps > one.tps
    assert set(ep8.first_token_decode["stages"][0]["comm_seconds"]) == {"ep_dispatch", "ep_combine"}


def test_keep_mode_adds_moe_tp_all_reduce():
    keep = est(GPT, switch_noc(8), Plan(tp=2, ep=4, moe_tp_mode="keep"), batch_size=16)
    rep = est(GPT, switch_noc(8), Plan(tp=2, ep=4), batch_size=16)
    assert (keep.moe["tp"], keep.moe["ep"]) == (2, 4)
    assert (rep.moe["tp"], rep.moe["ep"]) == (1, 8)
    assert keep.first_token_decode["stages"][0]["comm_seconds"]["moe_tp_all_reduce"] > 0
    assert "moe_tp_all_reduce" not in rep.first_token_decode["stages"][0]["comm_seconds"]
