"""Speculative decoding over gRPC: ``ServingLoad.speculative/speculative_method/acceptance`` →
``EstimateResponse.speculative`` equal to the local verdict; ``estimate --server --speculative``
prints what local mode prints; a search and disaggregated pools refuse it naming the field."""

from __future__ import annotations

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main

GPU = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
       "--tp", "8", "--input-seq", "1024", "--output-seq", "128", "--concurrency", "8",
       "--speculative", "2", "--speculative-method", "mtp", "--acceptance", "0.8,0.7"]  # fmt: skip


def _system() -> pb.SystemSpec:
    s = pb.SystemSpec(model=pb.ModelSource(name="llama-3.1-8b"))
    s.noc.name, s.chip.name = "hgx-h100x8", "h100-sxm"
    return s


def _load(**extra) -> pb.ServingLoad:
    return pb.ServingLoad(concurrency=8, speculative=2, speculative_method="mtp",
                          acceptance=[0.8, 0.7], **extra)  # fmt: skip


def test_the_client_gets_the_local_verdict(server):
    from plena_opt import api
    from plena_opt.api.speculative import speculate, speculation

    workload = pb.Workload(input_seq_len=1024, output_seq_len=128)
    with PlenaClient(server) as client:
        reply = client.estimate(_system(), pb.Plan(tp=8), workload, load=_load())
    v = reply.speculative
    problem = api.load_problem(model="llama-3.1-8b", noc="hgx-h100x8", chip="h100-sxm",
                               input_seq=1024, output_seq=128)  # fmt: skip
    plan = api.Plan(tp=8)
    load = api.serve_under_load(problem, plan, "vllm", concurrency=8)
    local = speculate(problem, plan, load, speculation("mtp", 2, (0.8, 0.7)))
    assert (v.method, v.k, list(v.acceptance)) == ("mtp", 2, [0.8, 0.7])
    assert v.expected_tokens_per_step == pytest.approx(1 + 0.8 + 0.56)
    assert v.tpot_with_seconds == pytest.approx(local.tpot_with, rel=1e-9)
    assert v.tpot_without_seconds == pytest.approx(local.tpot_without, rel=1e-9)
    assert v.pays == local.pays


def test_remote_cli_prints_what_local_prints(server, capsys):
    assert main(GPU) == 0
    local = capsys.readouterr().out.strip().splitlines()[-1]
    assert main([*GPU, "--server", server]) == 0
    remote = capsys.readouterr().out.strip().splitlines()[-1]
    assert local.startswith("Speculative decoding mtp K=2") and remote == local


@pytest.mark.parametrize("rpc", ["search", "pools"])
def test_a_search_and_pools_refuse_it_by_name(server, rpc):
    workload = pb.Workload(input_seq_len=1024, output_seq_len=128)
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as exc:
        if rpc == "search":
            req = pb.SearchRequest(system=_system(), workload=workload, load=_load())
            req.options.trials, req.options.batch_sizes[:] = 1, [4]
            client.search(req)
        else:
            pools = {"prefill_workers": 1, "prefill_tp": 4, "decode_workers": 1, "decode_tp": 4}
            client.estimate(_system(), pb.Plan(tp=8), workload, load=_load(**pools))
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "load.speculative" in str(exc.value)
