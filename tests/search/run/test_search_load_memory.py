"""The search's memory check under load (issue 23, item 4): a plan is judged as its engine holds
it — weights + the KV cache of the requests its pool admits at the memory fraction the launch
files write — not as a static batch of C full-length sequences. A plan whose pool holds fewer
than C requests runs them and queues the rest (their wait is in TTFT); a plan whose pool holds
none is refused naming ``plan``. CLI, gRPC and the web go through ``api.search_load``."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.estimate.plan import Plan
from plena_opt.serving.kv_admission import REPORTED_DEVICE_MEMORY_BYTES

ISL, OSL, C = 8192, 1024, 128
# Llama-3.1-70B bf16: 80 layers × (K, V) × 2 of 8 KV heads at TP 4 × head dim 128 × 2 bytes
KV_BYTES_PER_TOKEN_TP4 = 80 * 2 * 2 * 128 * 2
SEARCH = ["search", "--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
          "--devices", "4", "--precision", "bf16", "--input-seq", str(ISL), "--output-seq",
          str(OSL), "--storage", ":memory:", "--trials", "50", "--objectives",
          "ttft,tps-per-device", "--quiet", "--concurrency", str(C), "--json"]  # fmt: skip


@pytest.fixture(scope="module")
def problem():
    from plena_opt import api

    return api.load_problem(model="llama-3.1-70b", noc="hgx-h100x8", chip="h100-sxm",
                            precision="bf16", input_seq=ISL, output_seq=OSL,
                            devices=4)  # fmt: skip


def _loaded(problem, batch: int, **load):
    from plena_opt.api.search_load import loaded_factory
    from plena_opt.search.request import SearchRequest

    return loaded_factory(problem.evaluator, problem, SearchRequest(**load))(batch)


def test_a_plan_whose_pool_holds_fewer_than_c_fits_and_queues_the_rest(problem):
    static = problem.evaluator(C).evaluate(Plan(tp=4))
    assert static.fits_in_memory is False  # 128 full 9k sequences: 90 GiB of KV per GPU
    m = _loaded(problem, C, concurrency=C).evaluate(Plan(tp=4))
    u = m.under_load
    assert m.fits_in_memory is True
    assert u["running_requests"] == 57 and u["memory_fraction"] == 0.9  # what export writes
    # the KV of the 57 admitted requests, each at its prompt and half its output
    assert m.kv_cache_bytes_per_device == 57 * KV_BYTES_PER_TOKEN_TP4 * (ISL + OSL / 2)
    capacity = REPORTED_DEVICE_MEMORY_BYTES["h100-sxm"]  # the engine's fraction is of this
    assert m.weight_bytes_per_device + m.kv_cache_bytes_per_device <= 0.9 * capacity
    assert m.kv_cache_bytes_per_device <= u["kv_pool_bytes_per_device"]
    # the 71 clients the pool does not hold wait before their first token
    assert u["ttft_mean_seconds"] >= (C - 57) / u["request_throughput_per_s"]


def test_under_a_request_rate_the_admitted_requests_are_judged_too(problem):
    assert problem.evaluator(64).evaluate(Plan(tp=4)).fits_in_memory is False
    m = _loaded(problem, 64, request_rate=0.6).evaluate(Plan(tp=4))
    assert m.fits_in_memory is True and m.under_load["running_requests"] == 57
    assert m.kv_cache_bytes_per_device == 57 * KV_BYTES_PER_TOKEN_TP4 * (ISL + OSL / 2)


def test_the_memory_fraction_sizes_the_pool_it_is_judged_with(problem):
    m = _loaded(problem, C, concurrency=C, memory_fraction=0.7).evaluate(Plan(tp=4))
    assert m.fits_in_memory is True
    assert m.under_load["running_requests"] == 33 and m.under_load["memory_fraction"] == 0.7
    assert m.kv_cache_bytes_per_device == 33 * KV_BYTES_PER_TOKEN_TP4 * (ISL + OSL / 2)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_plan_whose_pool_holds_no_request_is_refused_naming_plan(problem, engine):
    from plena_opt import api
    from plena_opt.errors import PlenaInputError

    # TP 1: 131 GiB of bf16 weights on an 80 GB GPU; no engine starts, whatever its admission
    m = _loaded(problem, C, concurrency=C, engine=engine).evaluate(Plan(tp=1, pp=1, dp=4))
    assert m.ttft_seconds != m.ttft_seconds  # NaN: not priced, not on the front
    assert "holds no request, so the engine does not start" in m.under_load["refused"]
    with pytest.raises(PlenaInputError) as exc:
        api.serve_under_load(problem, Plan(tp=1, dp=4), engine, concurrency=C)
    assert exc.value.field == "plan"


def _search(capsys, *extra: str) -> dict:
    assert main([*SEARCH, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_recommended_commands_carry_the_memory_fraction(capsys):
    assert main([*SEARCH[:-1], "--memory-fraction", "0.8"]) == 0
    text = capsys.readouterr().out
    estimate = next(line for line in text.splitlines() if "estimate it:" in line)
    assert estimate.endswith("--concurrency 128 --engine vllm --memory-fraction 0.8")
    export = next(line for line in text.splitlines() if "export it:" in line)
    assert export.endswith("--memory-fraction 0.8")


@pytest.mark.parametrize("extra", [(), ("--memory-fraction", "0.8")])
def test_the_cli_search_does_not_refuse_what_the_engine_runs(capsys, extra):
    """Static check (the old one): TP2×PP2 at batch 128 needs 77.9 GiB per GPU of 74.5 and was
    infeasible on memory (with --memory-fraction: its capacity-bound batch 48 < 128); TP 4 runs
    57 of the 128 8k requests at once under load."""
    doc = _search(capsys, *extra)
    assert "memory" not in doc["infeasible"] and "memory" not in doc["nearest_miss"]
    fraction = 0.8 if extra else 0.9
    assert "memory: the engine's admission" in doc["under_load"]["static_basis"]
    # a plan the static check refused (batch 128 of 8k sequences does not fit 4 GPUs) is on
    # the front, running what its pool holds with the rest queued
    capped = next(e for e in doc["front"] if e["under_load"]["running_requests"] < C)
    u = capped["under_load"]
    assert capped["fits_in_memory"] is True and 0 < u["running_requests"] < C
    # the front's max batch under load: what the engine's pool holds (it runs that many)
    assert capped["max_batch"] == u["pool_requests"] == u["running_requests"]
    assert u["memory_fraction"] == fraction
    assert capped["memory_bytes_per_device"] <= fraction * REPORTED_DEVICE_MEMORY_BYTES["h100-sxm"]
    # the export starts the engines with the memory they were judged at
    assert ("--memory-fraction 0.8" in doc["recommendation"]["export_command"]) == bool(extra)
    # the plans whose pool holds no 8k request (TP 1, TP 2 alone) are named, not priced
    refused = [w for w in doc["warnings"] if "holds no request" in w]
    assert refused and all("fit the pool of" in w for w in refused)


NODE = ["search", "--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
        "--precision", "bf16", "--input-seq", str(ISL), "--output-seq", str(OSL), "--trials",
        "60", "--objectives", "ttft,tps-per-device", "--quiet", "--concurrency", str(C),
        "--json", "--study", "load-memory"]  # fmt: skip


def test_grpc_judges_memory_as_local_does(server, capsys, tmp_path):
    """On the whole node the static check found 2 plans (TP4 × DP2 …) infeasible on memory;
    over gRPC as locally none is, and the typed front carries the admitted requests."""
    from plena_client import PlenaClient, pb

    local = _search_doc(capsys, [*NODE, "--storage", str(tmp_path / "l.log")])
    remote = _search_doc(capsys, [*NODE, "--server", server])
    for doc in (local, remote):
        doc.pop("elapsed_seconds"), doc.pop("storage")
    assert remote == local and local["infeasible"] == {}
    req = pb.SearchRequest(
        system=pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-70b")),
        workload=pb.Workload(input_seq_len=ISL, output_seq_len=OSL, precision="bf16"),
        load=pb.ServingLoad(concurrency=C),
    )
    req.system.noc.name, req.system.chip.name = "hgx-h100x8", "h100-sxm"
    req.options.trials, req.options.study_name = 60, "load-memory-typed"
    req.options.memory_fraction = 0.8
    with PlenaClient(server) as client:
        reply = client.search(req)
    assert reply.front
    for m in reply.front:
        u = m.under_load
        assert m.fits_in_memory and 0 < u.running_requests <= C and u.memory_fraction == 0.8
        assert u.kv_pool_bytes_per_device > 0


def _search_doc(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)
