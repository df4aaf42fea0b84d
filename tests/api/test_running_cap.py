"""The running cap a plan has under a workload (``api.running_cap``, issue 23): the KV pool's
admission in ``estimate``, ``search`` (concurrency and request rate) and the disaggregated
decode pool, the pool priced at the memory setting the launch files write."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import Plan

GIB = 2**30
# Llama-3.1-70B: 80 layers × (K, V) × 8 KV heads × head dim 128 × 2 bytes (bf16) per token;
# TP 4 keeps 2 of the 8 KV heads on each GPU
KV_BYTES_PER_TOKEN_TP4 = 80 * 2 * 2 * 128 * 2
ISL, OSL = 8192, 1024
EST = ["estimate", "--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--precision", "bf16", "--input-seq", str(ISL), "--output-seq", str(OSL),
       "--engine", "vllm"]  # fmt: skip


@pytest.fixture(scope="module")
def problem():
    from plena_opt import api

    return api.load_problem(model="llama-3.1-70b", noc="hgx-h100x8", chip="h100-sxm",
                            precision="bf16", input_seq=ISL, output_seq=OSL,
                            devices=4)  # fmt: skip


@pytest.fixture(scope="module")
def capped(problem):
    from plena_opt import api

    return api.serve_under_load(problem, Plan(tp=4), "vllm", concurrency=128)


def test_the_kv_pool_caps_the_running_requests_and_the_rest_queue_in_ttft(problem, capped):
    from plena_opt.api.running_cap import replica_kv_cap
    from plena_opt.serving import engine_model

    cap = replica_kv_cap(problem, Plan(tp=4), engine_model("vllm", 80e9))
    assert cap is not None and cap.fraction == 0.9  # what `plena-opt export` writes
    # 0.9 of an H100's reported 81,559 MiB (kv_admission.REPORTED_DEVICE_MEMORY_BYTES) less 32.9 GiB
    # of weights and one 8192-token step's activations: 38.4 GiB
    assert 38.2 * GIB < cap.pool_bytes < 38.6 * GIB
    # each request holds its prompt and half its output on average: 8704 tokens of 80 KiB
    per_request = KV_BYTES_PER_TOKEN_TP4 * (ISL + OSL / 2)
    assert cap.requests == int(cap.pool_bytes // per_request) == 57
    assert capped.max_running == 57  # under vLLM's default max_num_seqs 1024
    assert capped.max_running_source == (
        "the KV cache: 57 requests of 8192 + 1024/2 tokens fit the pool of 38.4 GiB per GPU "
        "(--gpu-memory-utilization 0.9)"
    )
    st = capped.steady  # 71 of the 128 clients wait (C − R) / X before their first token
    assert st.ttft_seconds >= (128 - 57) / st.request_throughput_per_s
    assert st.ttft_seconds > 60  # minutes of queue, not the 2 s a 128-wide engine would give
    assert capped.ttft.mean == pytest.approx(st.ttft_seconds, rel=0.05)  # the replay agrees
    assert capped.steady.decode_batch <= 57 + 1e-9


def test_the_cli_says_where_the_cap_came_from_and_refuses_a_pool_that_holds_none(capsys):
    assert main([*EST, "--devices", "4", "--tp", "4", "--concurrency", "128", "--json"]) == 0
    eng = json.loads(capsys.readouterr().out)["serving_under_load"]["engine"]
    assert eng["max_running_requests"] == 57
    assert eng["max_running_source"].startswith("the KV cache: 57 requests")
    # TP 2: 65.7 GiB of bf16 weights per GPU leave 5.3 GiB of the reported 81,559 MiB, three 8k
    # requests but no 64k one: vLLM would not start, so no figures are given for it
    assert main([*EST, "--devices", "2", "--tp", "2", "--concurrency", "128"]) == 0
    capsys.readouterr()
    argv = [*EST, "--devices", "2", "--tp", "2", "--concurrency", "128", "--input-seq", "65536"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error: plan: 0 requests of 65536 + 1024/2 tokens fit the pool of 5.3 GiB" in err


def _loaded(problem, batch: int = 128, **load):
    """The search's evaluator of batch ``batch`` under ``load`` (``api.search_load``)."""
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.search.request import SearchRequest

    return loaded_factory(problem.evaluator, problem, SearchRequest(**load))(batch)


def test_search_prices_a_plan_as_estimate_does(problem, capped):
    m = _loaded(problem, concurrency=128).evaluate(Plan(tp=4))
    st = capped.steady
    assert m.under_load["ttft_mean_seconds"] == pytest.approx(st.ttft_seconds, rel=1e-9)
    assert m.under_load["tpot_mean_seconds"] == pytest.approx(st.tpot_seconds, rel=1e-9)
    assert m.tps == pytest.approx(st.output_tps, rel=1e-9)


def test_a_request_rate_beyond_what_the_pool_admits_is_refused(problem, monkeypatch):
    from plena_opt import api
    from plena_opt.api import running_cap

    # a plan of batch 64 (max_num_seqs 64 in its launch files) under a rate: the pool's 57 bind
    low = api.serve_under_load(problem, Plan(tp=4), "vllm", request_rate=0.6, batch=64)
    # (~20 decoding: 20.4 before the GH100 joint fit made the 8k-KV decode 2.3 % faster, 19.9 now)
    assert low.max_running == 57 and 15 < low.steady.decode_batch < 57
    searched = _loaded(problem, 64, request_rate=0.6).evaluate(Plan(tp=4))
    assert searched.under_load["tpot_mean_seconds"] == pytest.approx(low.steady.tpot_seconds)
    # 1.0 requests/s keep ~92 requests decoding: more than the 57 the pool admits (0.9 kept 60
    # before the GH100 joint fit made this decode faster, 57.3 after)
    with pytest.raises(PlenaInputError) as exc:
        api.serve_under_load(problem, Plan(tp=4), "vllm", request_rate=1.0, batch=64)
    assert exc.value.field == "request_rate"
    refused = _loaded(problem, 64, request_rate=1.0).evaluate(Plan(tp=4))
    assert refused.ttft_seconds != refused.ttft_seconds  # NaN: not on the front
    assert "more than the plan serves" in refused.under_load["refused"]
    # the same rate with no KV cap (the engine's 1024) is served: the pool is what refuses it
    monkeypatch.setattr(running_cap, "replica_kv_cap", lambda *a, **k: None)
    free = api.serve_under_load(problem, Plan(tp=4), "vllm", request_rate=1.0, batch=128)
    assert free.max_running == 128 and free.steady.decode_batch > 80
    same = api.serve_under_load(problem, Plan(tp=4), "vllm", request_rate=0.6, batch=128)
    assert same.steady.tpot_seconds == pytest.approx(low.steady.tpot_seconds, rel=1e-6)


def test_tensorrt_llm_is_not_capped_and_says_so(problem):
    from plena_opt import api

    u = api.serve_under_load(problem, Plan(tp=4), "trtllm", concurrency=128)
    assert u.max_running == 2048  # its default max_batch_size, not its pool's 59
    assert u.max_running_source.startswith("the engine's default; not the KV cache: 59 requests "
                                           "of 8192 + 1024 tokens")  # fmt: skip
    assert "KV admission is not priced" in u.max_running_source


def test_the_disaggregated_decode_pool_queues_beyond_its_kv(problem):
    from plena_opt import api
    from plena_opt.api.under_load_disagg import serve_disaggregated
    from plena_opt.serving.disaggregated import Pools

    eight = api.load_problem(model="llama-3.1-70b", noc="hgx-h100x8", chip="h100-sxm",
                             precision="fp8", input_seq=ISL, output_seq=OSL)  # fmt: skip
    d = serve_disaggregated(eight, Pools(1, 4, 1, 2), "vllm", concurrency=64)
    m = d.metrics
    assert d.decode_max_running == 28  # fp8 on a TP2 decode worker: 28 requests of 8704 tokens
    assert d.decode_max_running_source.startswith("the KV cache: 28 requests of 8192 + 1024/2")
    assert m.decode_batch_per_worker <= 28
    assert m.decode_wait_seconds > 1  # 64 clients, 28 decode slots: the rest wait
    parts = m.prefill_wait_seconds + m.prefill_seconds + m.transfer_seconds + m.tpot_seconds
    assert m.ttft_seconds == pytest.approx(parts + m.decode_wait_seconds)
    assert m.request_rate_per_s * m.e2e_seconds == pytest.approx(64, rel=1e-6)  # Little's law
    assert "wait for a decode slot" in d.to_text()
    assert d.to_dict()["steady_state"]["decode_wait_seconds"] == m.decode_wait_seconds
    wide = serve_disaggregated(eight, Pools(1, 4, 1, 4), "vllm", concurrency=64).metrics
    assert wide.decode_wait_seconds == 0  # a TP4 worker holds 75: none wait


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_exported_memory_setting_is_the_one_priced(engine):
    """``plena-opt export`` writes ``--memory-fraction`` (default 0.9) as each engine's memory
    flag: the pool under load is priced at that setting (for SGLang it replaces the default by
    TP, which ``validate`` prices for rows that record none)."""
    from plena_opt.api.running_cap import EXPORTED_MEMORY_FRACTION
    from plena_opt.export.engines import BUILDERS
    from plena_opt.export.launch import ExportSpec
    from plena_opt.serving.kv_admission import MEMORY_FLAG, pool_bytes

    spec = ExportSpec(model="meta-llama/Llama-3.1-70B-Instruct", input_len=ISL, output_len=OSL)
    assert spec.memory_fraction == EXPORTED_MEMORY_FRACTION
    (cfg, *_) = BUILDERS[engine](Plan(tp=4), 64, spec, "serve", 8000)
    argv = cfg.argv
    assert float(argv[argv.index(MEMORY_FLAG[engine]) + 1]) == EXPORTED_MEMORY_FRACTION
    at = pool_bytes(engine, 80.0, 30.0, 2.0, 4, EXPORTED_MEMORY_FRACTION)
    assert at == pytest.approx({"vllm": 40.0, "sglang": 42.0, "trtllm": 43.2}[engine])
    if engine == "sglang":  # its own default at TP 4 is 0.85
        assert pool_bytes(engine, 80.0, 30.0, 2.0, 4) == pytest.approx(38.0)


def test_a_replica_of_a_dp_plan_is_capped_by_its_own_pool(problem):
    from plena_opt import api
    from plena_opt.api.running_cap import replica_kv_cap
    from plena_opt.serving import engine_model

    eight = replace(problem, noc=api.load_problem(model="llama-3.1-70b", noc="hgx-h100x8",
                                                  chip="h100-sxm").noc)  # fmt: skip
    eng = engine_model("vllm", 80e9)
    one = replica_kv_cap(problem, Plan(tp=4), eng)
    two = replica_kv_cap(eight, Plan(tp=4, dp=2), eng)
    assert one is not None and two is not None and two.requests == one.requests == 57
    u = api.serve_under_load(eight, Plan(tp=4, dp=2), "vllm", concurrency=128)
    assert u.max_running == 57 and u.replicas == 2  # 64 clients a replica, 57 running


def test_capacity_keeps_running_what_the_pool_admits():
    """``capacity`` bounds a replica's decoding requests by the same admission (vLLM, SGLang)."""
    from plena_opt.api.capacity import Candidate, CapacityRequest, _setup
    from plena_opt.models import load_model

    model = load_model("llama-3.1-70b")
    req = CapacityRequest(model="llama-3.1-70b", load="unused.csv", gpus=("h100-sxm",))
    step_for = _setup(Candidate("h100-sxm tp4", "h100-sxm", 4), model, req, (ISL, OSL))
    assert step_for(ISL, OSL)[1] == 57  # as estimate's TP4 replica above
    tp2 = Candidate("h100-sxm tp2", "h100-sxm", 2)
    assert _setup(tp2, model, req, (ISL, OSL)) is None
    assert "leave no KV cache" in tp2.skipped  # 66 GiB of weights, as estimate refuses it
