"""``--memory-fraction`` under load (issue 23, item 4): the KV pool's share of GPU memory an
estimate is priced with, on the CLI (``estimate --memory-fraction``), over gRPC
(``ServingLoad.memory_fraction``) and in the web plan view and its launch bundle (the planner's
``memory_fraction``), bounded alike everywhere (0 < F ≤ 1, as ``search`` and ``export``)."""

from __future__ import annotations

import io
import json
import time
import zipfile

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main

# Llama-3.1-70B bf16 on a whole H100 node, 8k prompts: 256 clients are more than its pool holds
GPU = ["--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8", "--tp", "8",
       "--precision", "bf16", "--input-seq", "8192", "--output-seq", "128"]  # fmt: skip
# requests of 8192 + 128/2 tokens its vLLM pool holds at each --gpu-memory-utilization
HELD = {None: 174, 0.5: 73}


def _cli(capsys, *extra: str) -> dict:
    assert main(["estimate", *GPU, "--concurrency", "256", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["serving_under_load"]


def test_the_cli_prices_the_pool_at_the_fraction_given(capsys):
    default, half = _cli(capsys), _cli(capsys, "--memory-fraction", "0.5")
    assert default["engine"]["max_running_requests"] == HELD[None]
    assert half["engine"]["max_running_requests"] == HELD[0.5]
    assert "(--gpu-memory-utilization 0.5)" in half["engine"]["max_running_source"]
    # fewer running requests: more of the 256 clients wait for a slot
    assert half["steady_state"]["ttft_seconds"] > default["steady_state"]["ttft_seconds"]


def test_the_disaggregated_decode_pool_is_priced_at_the_fraction(capsys):
    pools = ["--precision", "fp8", "--input-seq", "8192", "--output-seq", "1024",
             "--prefill-workers", "1", "--prefill-tp", "4", "--decode-workers", "1",
             "--decode-tp", "2", "--concurrency", "64", "--json"]  # fmt: skip
    base = ["estimate", "--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8"]
    for extra, held in (((), 28), (("--memory-fraction", "0.7"), 16)):
        assert main([*base, *pools, *extra]) == 0
        eng = json.loads(capsys.readouterr().out)["serving_under_load"]["engine"]
        assert eng["decode_max_running_requests"] == held  # TP2 fp8 decode worker, 8704 tokens


@pytest.mark.parametrize("value", ["0", "-0.1", "1.5", "nan", "inf"])
def test_the_cli_refuses_a_fraction_out_of_bounds(capsys, value):
    assert main(["estimate", *GPU, "--concurrency", "8", f"--memory-fraction={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --memory-fraction must be above 0 and at most 1")
    assert "Traceback" not in err


def test_the_cli_refuses_a_fraction_without_a_load(capsys):
    assert main(["estimate", *GPU, "--memory-fraction", "0.5"]) == 2
    assert "error: --memory-fraction prices the KV pool under load" in capsys.readouterr().err


def _system() -> pb.SystemSpec:
    s = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-70b"))
    s.noc.name, s.chip.name = "hgx-h100x8", "h100-sxm"
    return s


def _grpc(server: str, **load) -> pb.EstimateResponse:
    w = pb.Workload(input_seq_len=8192, output_seq_len=128, precision="bf16")
    with PlenaClient(server) as client:
        return client.estimate(_system(), pb.Plan(tp=8), w, load=pb.ServingLoad(**load))


def test_grpc_estimate_prices_the_pool_at_the_fraction_given(server):
    assert _grpc(server, concurrency=256).under_load.max_running_requests == HELD[None]
    half = _grpc(server, concurrency=256, memory_fraction=0.5).under_load
    assert half.max_running_requests == HELD[0.5]


def test_the_remote_cli_sends_the_fraction(server, capsys):
    local = _cli(capsys, "--memory-fraction", "0.5")
    remote = _cli(capsys, "--memory-fraction", "0.5", "--server", server)
    assert remote == local


@pytest.mark.parametrize("value", [0.0, -1.0, 1.5, float("nan")])
def test_grpc_refuses_a_fraction_out_of_bounds_naming_the_field(server, value):
    with pytest.raises(PlenaRpcError) as err:
        _grpc(server, concurrency=8, memory_fraction=value)
    assert (err.value.code, err.value.field) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "load.memory_fraction",
    )


def test_a_search_takes_its_option_not_the_load_field(server):
    req = pb.SearchRequest(
        system=_system(), load=pb.ServingLoad(concurrency=8, memory_fraction=0.5)
    )
    req.options.trials = 1
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as err:
        client.search(req)
    assert (err.value.code, err.value.field) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "load.memory_fraction",
    )
    assert "options.memory_fraction" in str(err.value)


def test_the_plan_view_prices_at_the_fraction_given():
    from plena_opt.api.plan_detail import plan_detail
    from plena_opt.estimate.problem import ProblemSpec

    spec = ProblemSpec(model="llama-3.1-70b", chip="h100-sxm", noc="hgx-h100x8",
                       input_seq=8192, output_seq=128, precision="bf16")  # fmt: skip
    key = "tp8-ep1-dp1-pp1-cp1-replace-none-b256"
    for fraction, held in HELD.items():
        (pool,) = plan_detail(spec, key, "vllm", 256, None, fraction).pools
        assert pool.under_load["max_running_requests"] == held
        assert pool.under_load["memory_fraction"] == (fraction or 0.9)


WEB = {"model": "llama-3.1-8b", "chip": "h200-sxm", "noc": "hgx-h200x8", "input_seq": 1024,
       "output_seq": 256, "batch_sizes": "16", "trials": 20, "serving": "aggregated",
       "engine": "vllm", "concurrency": 16, "percentile": "p50"}  # fmt: skip


@pytest.fixture(scope="module")
def web():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def test_the_planner_prices_searches_views_and_bundles_at_the_fraction(web):
    r = web.post("/api/planner/jobs", json={**WEB, "memory_fraction": 0.5})
    assert r.status_code == 200, r.text
    job = r.json()
    end = time.monotonic() + 300
    while job["state"] == "running" and time.monotonic() < end:
        time.sleep(0.05)
        job = web.get(f"/api/planner/jobs/{job['id']}").json()
    assert job["state"] == "done", job
    assert "--memory-fraction 0.5" in job["command"]  # the CLI search that reproduces it
    front = job["answer"]["points"]
    assert front and all(p["figures"] for p in front)
    key = front[0]["key"]
    view = web.get(f"/api/planner/jobs/{job['id']}/plan", params={"key": key}).json()
    assert view["pools"][0]["under_load"]["memory_fraction"] == 0.5
    zipped = web.get(f"/api/planner/jobs/{job['id']}/bundle", params={"key": key}).content
    with zipfile.ZipFile(io.BytesIO(zipped)) as z:
        text = "".join(z.read(n).decode() for n in z.namelist())
    assert "--gpu-memory-utilization 0.5" in text and "--gpu-memory-utilization 0.9" not in text


@pytest.mark.parametrize("value", [0, -0.5, 1.5])
def test_the_planner_refuses_a_fraction_out_of_bounds_with_422(web, value):
    r = web.post("/api/planner/jobs", json={**WEB, "memory_fraction": value})
    assert r.status_code == 422, r.text
    assert "--memory-fraction must be above 0 and at most 1" in r.text
