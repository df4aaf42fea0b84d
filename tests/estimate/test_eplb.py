"""EPLB redundant experts: the greedy placement, the busiest rank it prices, the per-rank expert
weights, the engines' flags and the refusals (``plena_opt.estimate.eplb``)."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.eplb import check_redundant, place, replica_counts
from plena_opt.estimate.moe_load import busiest_rank_load
from plena_opt.models import load_model

LOADS = [8, 1, 1, 1, 1, 1, 1, 2]  # 16 token-expert pairs over 8 experts, expert 0 hot


def test_hand_computed_placement() -> None:
    """8 experts, ep 4, N 4 → 12 physical experts, 3 per rank.

    Replicas, one at a time to the highest load per replica: expert 0 (8 → 4 → 2.67 → 2, then
    ties expert 7 at 2 and keeps it on the lower id) gets all 4: 5 replicas of 2,2,2,1,1.
    Packing heaviest first onto the least-loaded rank: the four 2s (three of expert 0, one of
    expert 7) one per rank, then eight 1s two per rank → every rank 4 = the mean 16/4.
    Without replicas the contiguous blocks [8,1] [1,1] [1,1] [1,2] make the busiest rank 9."""
    assert replica_counts(LOADS, 4) == [5, 1, 1, 1, 1, 1, 1, 1]
    p = place(LOADS, 4, 4)
    assert p.loads == (4, 4, 4, 4)
    assert all(len(r) == 3 for r in p.ranks)
    assert sorted(e for r in p.ranks for e, _ in r) == [0] * 5 + [1, 2, 3, 4, 5, 6, 7]
    assert p.ranks[0] == ((0, 2), (0, 1), (3, 1))
    # N 4 on ep 2 (6 slots a rank): expert 0's 5 replicas [2,2,2,1,1] + 7 singles (one of 2)
    two = place(LOADS, 2, 4)
    assert two.loads == (8, 8) and all(len(r) == 6 for r in two.ranks)


def test_placement_from_one_load_priced_on_another() -> None:
    """The placement is built on the modelled load; the step's own counts are split over it."""
    step = [4, 1, 1, 1, 1, 1, 1, 6]
    p = place(LOADS, 4, 4, step)
    # expert 0's replicas carry 4 → [1,1,1,1,0]; expert 7 is not replicated: its rank takes 6
    assert max(p.loads) == 6 + 1 + 1 and sum(p.loads) == sum(step)


def test_busiest_rank_load_with_eplb_drops_to_the_mean() -> None:
    ds = load_model("deepseek-v3")
    kw = dict(micro=64, q=1, dp=1, tp_moe=1, ep_moe=8, routing="power_law", rows=None)
    off = busiest_rank_load(ds, **kw)
    on = busiest_rank_load(ds, **kw, redundant=32)
    mean = 64 * 8 / 8
    assert off.pairs > 1.25 * mean  # 85 pairs vs the mean 64 (random expert placement)
    assert mean <= on.pairs < off.pairs and on.pairs <= 1.05 * mean
    assert len(on.expert_counts) == (256 + 32) // 8
    assert "EPLB 32" in on.source


@pytest.mark.parametrize(
    ("n", "experts", "ep", "rule"),
    [
        (-1, 8, 4, "≥ 0"),
        (9, 8, 4, "at most the model's 8 experts"),
        (3, 8, 4, "must divide by the EP size 4"),
        (4, 8, 1, "needs expert parallelism"),
        (4, 0, 4, "mixture-of-experts"),
    ],
)
def test_bad_redundant_counts_are_refused_by_name(n: int, experts: int, ep: int, rule: str) -> None:
    with pytest.raises(PlenaInputError) as err:
        check_redundant(n, experts, ep)
    assert err.value.field == "eplb_redundant" and rule in str(err.value)


ARGS = ["estimate", "--model", "deepseek-v3", "--chip", "h200-sxm", "--noc", "hgx-h200x8",
        "--tp", "1", "--ep", "8", "--batch-size", "64", "--input-seq", "1024",
        "--output-seq", "128", "--precision", "fp8", "--routing", "power_law",
        "--json"]  # fmt: skip


def test_estimate_prices_the_rebalanced_rank_and_holds_the_replicas(capsys) -> None:
    assert main(ARGS) == 0
    off = json.loads(capsys.readouterr().out)
    assert main([*ARGS, "--eplb-redundant", "32"]) == 0
    on = json.loads(capsys.readouterr().out)
    m = load_model("deepseek-v3")
    assert off["moe"]["experts_per_rank"] == 32 and on["moe"]["experts_per_rank"] == 36
    # 4 more experts a rank in every MoE layer, fp8 (1 byte) gate/up/down weights
    moe_layers = sum(r.count for r in m.layer_runs if r.mlp == "moe")
    extra = moe_layers * 4 * 3 * m.hidden_size * m.moe_intermediate_size * 1.0
    delta = on["weight_bytes_per_device"] - off["weight_bytes_per_device"]
    assert delta == pytest.approx(extra, rel=1e-9)
    busy = "token_expert_pairs_on_busiest_rank"
    assert on["moe"]["prefill"][busy] < off["moe"]["prefill"][busy]
    assert on["ttft_seconds"] < off["ttft_seconds"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("5", "256 + 5 must divide by the EP size 8"),
        ("300", "at most the model's 256"),
        ("-1", "--eplb-redundant"),
    ],  # fmt: skip
)
def test_cli_refuses_bad_eplb(capsys, value: str, text: str) -> None:
    assert main([*ARGS, "--eplb-redundant", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and text in err and "Traceback" not in err


def _launch(engine: str, plan, n: int, experts: int = 256):
    from plena_opt.export.engines import BUILDERS
    from plena_opt.export.launch import ExportSpec

    spec = ExportSpec(model="deepseek-ai/DeepSeek-V3", input_len=1024, output_len=128,
                      eplb_redundant=n, num_experts=experts)  # fmt: skip
    (cfg,) = BUILDERS[engine](plan, 64, spec, "agg", 8000)
    return cfg


def test_exports_write_the_engines_eplb_flags() -> None:
    from plena_opt.estimate.plan import Plan

    split = Plan(tp=1, ep=8, moe_tp=1)  # attention DP 8, experts EP 8
    v = _launch("vllm", split, 32).argv
    i = v.index("--eplb-config")
    assert "--enable-eplb" in v and "--enable-expert-parallel" in v
    assert json.loads(v[i + 1]) == {"num_redundant_experts": 32}
    s = _launch("sglang", split, 32).argv
    assert "--enable-eplb" in s and s[s.index("--ep-num-redundant-experts") + 1] == "32"
    t = _launch("trtllm", split, 32)
    (yaml,) = t.files.values()
    assert "moe_config:\n  load_balancer:\n    num_slots: 288" in yaml
    # off: none of the flags
    assert "--enable-eplb" not in _launch("vllm", split, 0).argv
    assert "load_balancer" not in next(iter(_launch("trtllm", split, 0).files.values()))


def test_exports_refuse_eplb_without_expert_parallel_ranks() -> None:
    from plena_opt.estimate.plan import Plan

    tp8 = Plan(tp=8)  # experts tensor-parallel: nothing to replicate over
    for engine in ("vllm", "sglang", "trtllm"):
        cfg = _launch(engine, tp8, 32)
        assert cfg.argv == [] and cfg.refused, engine
        assert any("eplb_redundant" in r for r in cfg.refused), engine
    unknown = _launch("trtllm", Plan(tp=1, ep=8, moe_tp=1), 32, experts=0)
    assert any("expert count was not given" in r for r in unknown.refused)


def test_trace_and_random_rows_with_eplb() -> None:
    """A skewed trace: the placement from its expert counts takes the hot experts off the
    busiest rank. Random rows: the long-run load is even, so EPLB removes no per-step noise
    beyond splitting replicas. At ≥ 4096 tokens the closed form stays as it is."""
    from deepstack import moe as ds_moe
    from deepstack.power_law import power_law_counts, power_law_rows

    ds = load_model("deepseek-v3")
    trace = power_law_rows(power_law_counts(512, 256, 8, 1.01), 512)
    kw = dict(micro=512, q=1, dp=1, tp_moe=1, ep_moe=8, routing="trace.npy", rows=trace)
    off, on = busiest_rank_load(ds, **kw), busiest_rank_load(ds, **kw, redundant=32)
    assert on.pairs < off.pairs and len(on.expert_counts) == 36
    rnd = ds_moe.random_rows(512, 256, 8, seed=0)
    kw.update(routing="random", rows=rnd)
    on = busiest_rank_load(ds, **kw, redundant=32)
    assert on.pairs >= 512 and sum(1 for _ in on.expert_counts) == 36
    big = dict(micro=8, q=1024, dp=1, tp_moe=1, ep_moe=8, routing="random", rows=rnd)
    assert busiest_rank_load(ds, **big, redundant=32) == busiest_rank_load(ds, **big)
