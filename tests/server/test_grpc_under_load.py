"""Serving under load over gRPC (issue 23): ``EstimateRequest.load`` → ``under_load`` typed
metrics equal to the local ``serve_under_load``; ``plena-opt estimate --server … --concurrency``
prints what local mode prints; bad load fields are INVALID_ARGUMENT naming ``load.<field>``."""

from __future__ import annotations

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main

# the whole node (a remote request names a NoC profile, not its first devices)
GPU = ["--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8", "--tp", "8",
       "--input-seq", "1024", "--output-seq", "128"]  # fmt: skip


def _system() -> pb.SystemSpec:
    s = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b"))
    s.noc.name, s.chip.name = "hgx-h100x8", "h100-sxm"
    return s


def _local(**load):
    from plena_opt import api
    from plena_opt.estimate.plan import Plan

    problem = api.load_problem(
        model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm", input_seq=1024, output_seq=128
    )
    return api.serve_under_load(problem, Plan(tp=8), **load)


@pytest.mark.parametrize(
    "load",
    [
        {"concurrency": 8, "engine": "sglang", "range_ratio": 0.8},
        {"request_rate": 2.0, "engine": "trtllm"},
    ],
)
def test_the_client_gets_typed_under_load_metrics_equal_to_local(server, load):
    from plena_opt.api.under_load_wire import under_load_from_proto

    workload = pb.Workload(input_seq_len=1024, output_seq_len=128)
    with PlenaClient(server) as client:
        reply = client.estimate(_system(), pb.Plan(tp=8), workload, load=pb.ServingLoad(**load))
    u = reply.under_load
    local = _local(**load, batch=load.get("concurrency"))  # an unset batch under C is C
    assert u.engine == load["engine"] and u.gpus == 8
    assert u.ttft.mean_seconds == local.ttft.mean and u.tpot.p99_seconds == local.tpot.p99
    assert u.e2e.p90_seconds == local.e2e.p90 and u.itl.p50_seconds == local.itl.p50
    assert u.output_tps_per_gpu == local.output_tps_per_gpu > 0
    assert u.steady.tpot_seconds == local.steady.tpot_seconds > 0
    assert u.HasField("concurrency") == ("concurrency" in load)
    assert under_load_from_proto(u) == local
    plain = client_estimate_without_load(server)
    assert not plain.HasField("under_load")


def client_estimate_without_load(server: str) -> pb.EstimateResponse:
    with PlenaClient(server) as client:
        return client.estimate(_system(), pb.Plan(tp=8), pb.Workload(input_seq_len=1024))


@pytest.mark.parametrize("as_json", [True, False])
def test_remote_cli_prints_what_local_prints(server, capsys, as_json):
    argv = ["estimate", *GPU, "--concurrency", "4", "--engine", "vllm", "--range-ratio", "0.5"]
    argv += ["--json"] if as_json else []
    assert main(argv) == 0
    local = capsys.readouterr().out
    assert main([*argv, "--server", server]) == 0
    remote = capsys.readouterr().out
    assert remote == local
    assert ("serving_under_load" if as_json else "Under load (closed loop, 4") in remote


@pytest.mark.parametrize(
    ("load", "field"),
    [
        ({"concurrency": -1}, "load.concurrency"),
        ({"concurrency": 5000}, "load.concurrency"),
        ({"concurrency": 4, "request_rate": 1.0}, "load.request_rate"),
        ({"request_rate": float("nan")}, "load.request_rate"),
        ({"concurrency": 4, "range_ratio": 1.0}, "load.range_ratio"),
        ({"concurrency": 4, "engine_version": "0.1"}, "load.engine_version"),
        ({}, "load.concurrency"),
    ],
)
def test_bad_load_fields_are_invalid_argument_naming_them(server, load, field):
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as err:
        client.estimate(_system(), pb.Plan(tp=8), pb.Workload(), load=pb.ServingLoad(**load))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == field


def test_a_load_without_a_noc_is_refused_naming_load(server):
    system = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b"))
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as err:
        client.estimate(system, pb.Plan(tp=8), pb.Workload(), load=pb.ServingLoad(concurrency=4))
    assert (err.value.code, err.value.field) == (grpc.StatusCode.INVALID_ARGUMENT, "load")


POOLS = ["--concurrency", "32", "--input-seq", "4096", "--prefill-workers", "2", "--prefill-tp",
         "2", "--decode-workers", "1", "--decode-tp", "4"]  # fmt: skip


@pytest.mark.parametrize("as_json", [True, False])
def test_remote_disaggregated_pools_print_what_local_prints(server, capsys, as_json):
    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            *POOLS, *(["--json"] if as_json else [])]  # fmt: skip
    assert main(argv) == 0
    local = capsys.readouterr().out
    assert main([*argv, "--server", server]) == 0
    assert capsys.readouterr().out == local
    assert ("prefill_wait_seconds" if as_json else "Under load, disaggregated") in local


def test_the_client_gets_typed_disaggregated_metrics(server):
    load = pb.ServingLoad(concurrency=32, prefill_workers=2, prefill_tp=2, decode_workers=1,
                          decode_tp=4)  # fmt: skip
    with PlenaClient(server) as client:
        reply = client.estimate(_system(), pb.Plan(), pb.Workload(input_seq_len=4096), load=load)
    d = reply.disaggregated_under_load
    assert reply.mode == "disaggregated" and not reply.HasField("under_load")
    assert d.prefill_workers == 2 and d.decode_tp == 4 and d.concurrency == 32
    assert d.ttft_seconds > d.prefill_seconds + d.prefill_wait_seconds > 0
    assert list(d.ttft_quantiles_seconds) == sorted(d.ttft_quantiles_seconds)


@pytest.mark.parametrize(
    ("pools", "field"),
    [
        ({"prefill_workers": 2}, "load.prefill_tp"),
        ({"prefill_workers": 2, "prefill_tp": 2, "decode_workers": 4, "decode_tp": 4},
         "load.decode_workers"),
        ({"prefill_workers": -1, "prefill_tp": 1, "decode_workers": 1, "decode_tp": 1},
         "load.prefill_workers"),
    ],
)  # fmt: skip
def test_bad_pools_are_invalid_argument_naming_them(server, pools, field):
    load = pb.ServingLoad(concurrency=8, **pools)
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as err:
        client.estimate(_system(), pb.Plan(), pb.Workload(), load=load)
    assert (err.value.code, err.value.field) == (grpc.StatusCode.INVALID_ARGUMENT, field)


def test_cli_grpc_and_web_price_the_same_capped_engine(server, capsys):
    """The same explicit request (batch 4 under 8 clients): the engine runs 4, on every front."""
    import json

    from plena_opt.api.plan_detail import _under_load
    from plena_opt.api.under_load_wire import under_load_from_proto

    workload = pb.Workload(batch_size=4, input_seq_len=1024, output_seq_len=128)
    with PlenaClient(server) as client:
        reply = client.estimate(_system(), pb.Plan(tp=8), workload,
                                load=pb.ServingLoad(concurrency=8))  # fmt: skip
    remote = under_load_from_proto(reply.under_load)
    assert remote == _local(concurrency=8, batch=4) != _local(concurrency=8)
    assert remote.max_running == 4 and "max_num_seqs" in remote.max_running_source
    assert main(["estimate", *GPU, "--concurrency", "8", "--batch-size", "4", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["serving_under_load"]
    assert cli == remote.to_dict()
    from plena_opt import api
    from plena_opt.estimate.plan import Plan

    problem = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                               input_seq=1024, output_seq=128, batch_size=4)  # fmt: skip
    web, _ = _under_load(problem, Plan(tp=8), "vllm", (8, None), 4)
    assert web["ttft_ms"]["mean"] == remote.ttft.mean * 1e3
    assert web["tpot_ms"]["p90"] == remote.tpot.p90 * 1e3
