"""The engine under load runs at most the plan's batch, as its launch files cap it (issue 23):
``api.load_cap`` against the exported argv, the queueing it prices, and the defaults of each
front end."""

from __future__ import annotations

import json
import re

import pytest

from plena_opt.cli.main import main
from plena_opt.estimate.plan import Plan
from plena_opt.export.engines import running_cap, sglang, trtllm, vllm
from plena_opt.export.launch import ExportSpec

GPU = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--devices", "1", "--input-seq", "1024", "--output-seq", "256", "--json"]  # fmt: skip
SPEC = ExportSpec(model="meta-llama/Llama-3.1-8B", input_len=1024, output_len=256)
FLAG = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "--max_batch_size"}
BUILD = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm}


def _argv_cap(engine: str, plan: Plan, batch: int) -> int:
    """Requests one DP replica of ``plan`` admits, read from the exported launch command."""
    (cfg, *_) = BUILD[engine](plan, batch, SPEC, "serve", 8000)
    assert not cfg.refused, cfg.refused
    per = int(cfg.argv[cfg.argv.index(FLAG[engine]) + 1])
    if engine == "sglang":  # 0.5.23: whole per plain-DP worker, // dp-size per attention rank
        attn_dp = plan.ep if "--enable-dp-attention" in cfg.argv else 1
        return max(1, per // attn_dp) * attn_dp
    return per * plan.ep  # per DP (vLLM) / attention-DP (TensorRT-LLM) rank, ep to a replica


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize(
    "plan", [Plan(tp=1), Plan(tp=2, dp=3), Plan(tp=1, dp=4), Plan(tp=2, ep=2, moe_tp=2)]
)
@pytest.mark.parametrize("batch", [1, 7, 33])
def test_the_priced_cap_is_the_exported_one(engine, plan, batch):
    if engine == "vllm" and plan.moe_tp:
        plan = Plan(tp=2, ep=2, moe_tp=4)  # vLLM: experts TP over all ranks
    if engine == "trtllm" and plan.moe_tp:
        plan = Plan(tp=1, ep=4, moe_tp=2)  # TensorRT-LLM: attention DP is TP1
    assert running_cap(engine, plan, batch) == _argv_cap(engine, plan, batch)


def _load(capsys, *flags: str) -> dict:
    assert main([*GPU, *flags]) == 0
    return json.loads(capsys.readouterr().out)["serving_under_load"]


def test_a_batch_below_the_clients_queues_the_rest(capsys):
    small = _load(capsys, "--concurrency", "32", "--batch-size", "8")
    full = _load(capsys, "--concurrency", "32", "--batch-size", "32")
    assert small["engine"]["max_running_requests"] == 8
    assert "max_num_seqs in its launch files" in small["engine"]["max_running_source"]
    s, f = small["steady_state"], full["steady_state"]
    assert s["ttft_seconds"] > 2 * f["ttft_seconds"]  # 24 clients wait for a slot
    assert s["tpot_seconds"] < f["tpot_seconds"]  # 8 decode together, not 32
    assert small["replay"]["ttft_seconds"]["mean"] > full["replay"]["ttft_seconds"]["mean"]


def test_a_batch_at_or_above_the_clients_keeps_the_uncapped_figures(capsys):
    from plena_opt import api

    problem = api.load_problem(
        model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm", input_seq=1024, output_seq=256
    )
    plan = Plan(tp=1, dp=2)
    free = api.serve_under_load(problem, plan, concurrency=16)
    # the KV pool of one replica (one H100 at --gpu-memory-utilization 0.9) holds 399 requests
    # of 1024 + 256/2 tokens, under vLLM's default max_num_seqs 1024 (api.running_cap)
    assert free.max_running == 399 and free.max_running_source.startswith("the KV cache: 399")
    for batch in (16, 40):
        capped = api.serve_under_load(problem, plan, concurrency=16, batch=batch)
        assert capped.max_running == -(-batch // 2)  # the replica's share
        assert capped.to_dict()["replay"] == free.to_dict()["replay"]
        assert capped.steady == free.steady and capped.ttft == free.ttft


def test_the_cli_batch_defaults_to_the_clients_and_a_rate_keeps_the_engine_cap(capsys):
    assert _load(capsys, "--concurrency", "24")["engine"]["max_running_requests"] == 24
    rate = _load(capsys, "--request-rate", "2")["engine"]
    assert rate["max_running_requests"] == 399  # the KV pool's, under the default 1024
    assert rate["max_running_source"].startswith("the KV cache: 399 requests of 1024 + 256/2")
    assert _load(capsys, "--request-rate", "2", "--batch-size", "4")["engine"][
        "max_running_requests"
    ] == 4  # fmt: skip
    assert main(GPU) == 0  # a static estimate keeps the batch of 16
    assert json.loads(capsys.readouterr().out)["batch_size"] == 16


def test_the_text_says_the_cap_and_where_it_came_from(capsys):
    flags = [a for a in GPU if a != "--json"]
    assert main([*flags, "--concurrency", "32", "--batch-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "max running 16 (the plan's batch: max_num_seqs in its launch files; " in out
    # the pool's room beside the cap in force: what a larger batch could run
    assert re.search(r"; (\d+) requests of 1024 \+ 256/2 tokens fit the pool of [\d.]+ GiB per "
                     r"GPU \(--gpu-memory-utilization 0\.9\)\)", out)  # fmt: skip


def test_the_web_plan_detail_prices_the_same_capped_figures():
    from plena_opt import api
    from plena_opt.api.plan_detail import _under_load

    problem = api.load_problem(
        model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm", input_seq=1024, output_seq=256,
        batch_size=8, devices=1,
    )  # fmt: skip
    web, note = _under_load(problem, Plan(tp=1), "vllm", (32, None), 8)
    local = api.serve_under_load(problem, Plan(tp=1), concurrency=32, batch=8)
    assert note is None and web["max_running_requests"] == 8
    assert web["ttft_ms"]["mean"] == pytest.approx(local.ttft.mean * 1e3, rel=1e-12)
    assert web["tpot_ms"]["p99"] == pytest.approx(local.tpot.p99 * 1e3, rel=1e-12)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_global_batch_over_dp_replicas_admits_the_batch_in_all(engine):
    """The plan's batch is global: 33 sequences over dp = 3 replicas is 11 per replica on every
    engine (SGLang's plain --dp-size once got the whole 33 per worker, 99 in all)."""
    plan = Plan(tp=2, dp=3)
    assert running_cap(engine, plan, 33) * plan.dp == 33
