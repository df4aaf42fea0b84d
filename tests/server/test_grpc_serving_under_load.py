"""The serving comparison under load over gRPC (issue 23): ``Search`` with ``SearchRequest.load``
and ``options.serving`` both runs ``api.decide_serving`` as the CLI does, so the remote CLI, the
typed reply and the web planner give the local CLI's verdict and fronts for the Llama-3.1-70B
fp8 8×H100 vLLM example."""

from __future__ import annotations

import argparse
import contextlib
import io
import json

import pytest
from plena_client import PlenaClient

from plena_opt.cli.main import main

ARGV = ["--model", "llama-3.1-70b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
        "--precision", "fp8", "--input-seq", "8192", "--output-seq", "1024", "--engine", "vllm",
        "--concurrency", "16", "--serving", "both", "--recheck", "0", "--quiet",
        "--study", "cmp-load"]  # fmt: skip


def _json_of(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def _fronts(cmp: dict) -> list[tuple]:
    return [(m, e["key"], e["ttft_seconds"], e["tps_per_device"])
            for m in ("aggregated", "disaggregated") for e in cmp[m]["front"]]  # fmt: skip


def test_cli_grpc_and_web_give_the_same_verdict(server, tmp_path) -> None:
    from plena_opt.api.planner import planner_search, run_planner
    from plena_opt.api.serving_wire import decisions_from_proto
    from plena_opt.cli import search_cmd
    from plena_opt.cli.remote import search_request_from_args
    from plena_opt.stop import StopToken

    local = _json_of(["search", *ARGV, "--json", "--storage", str(tmp_path / "s.log")])
    cmp = local["serving"]["comparison"]
    assert cmp["verdict"].startswith("aggregated wins")
    remote = _json_of(["search", *ARGV, "--json", "--server", server])
    rcmp = remote["serving"]["comparison"]
    assert rcmp["verdict"] == cmp["verdict"] and rcmp["figures_basis"] == cmp["figures_basis"]
    assert _same(rcmp, cmp)
    assert remote["recommendation"]["key"] == local["recommendation"]["key"]
    # the typed reply
    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["search", *ARGV[:-2], "--study", "cmp-load-typed"])
    args.server = server
    with PlenaClient(server) as client:
        reply = client.search(search_request_from_args(args), timeout=300)
    assert reply.serving.comparison.verdict == cmp["verdict"]
    assert _same(decisions_from_proto(reply.serving)["comparison"], cmp)
    assert any("not priced" in w for w in reply.warnings)  # the comparison's warnings travel
    # the web planner (the same fields as the page sends)
    fields = {"model": "llama-3.1-70b", "chip": "h100-sxm", "noc": "hgx-h100x8",
              "precision": "fp8", "input_seq": 8192, "output_seq": 1024, "serving": "both",
              "engine": "vllm", "concurrency": 16, "percentile": "p50"}  # fmt: skip
    ps = planner_search(fields)
    web = run_planner(ps, StopToken())
    assert web.result.serving["comparison"]["verdict"] == cmp["verdict"]
    assert _same(web.result.serving["comparison"], cmp)


def _same(a: dict, b: dict) -> bool:
    fa, fb = _fronts(a), _fronts(b)
    assert [f[:2] for f in fa] == [f[:2] for f in fb]
    assert [x for f in fa for x in f[2:]] == pytest.approx([x for f in fb for x in f[2:]], rel=1e-9)
    return True


def test_an_optuna_serving_sampler_under_load_is_invalid_argument(server) -> None:
    import grpc
    from plena_client import PlenaRpcError

    from plena_opt.cli import search_cmd
    from plena_opt.cli.remote import search_request_from_args

    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["search", *ARGV, "--serving-sampler", "optuna"])
    args.server = server
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as err:
        client.search(search_request_from_args(args), timeout=60)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == "options.serving_sampler"
    assert "not used under load" in str(err.value)
