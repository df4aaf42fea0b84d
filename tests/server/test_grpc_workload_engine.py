"""The engine, MoE kernel and EPLB replicas in ``Workload`` over gRPC (issue 23 item 4): a
request says ``plena-opt estimate --engine E [--moe-kernel K] [--eplb-redundant N]`` without a
load and gets the CLI's numbers (the engine's kernels price gpt-oss's MXFP4 experts and
TensorRT-LLM's fused input quantisation); with a load, the load takes the workload's engine; bad
input is INVALID_ARGUMENT naming the workload field; a search with an engine and no load prices
its static plans on the engine's kernels, as ``plena-opt search --engine`` does."""

from __future__ import annotations

import json

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main

GPT_OSS = ["--model", "gpt-oss-120b", "--chip", "b200", "--noc", "hgx-b200x8", "--tp", "8",
           "--input-seq", "1024", "--output-seq", "16", "--precision", "fp4",
           "--batch-size", "4"]  # fmt: skip
# Qwen3-30B-A3B (128 experts) on 8 H100s with EP 8: EPLB replicas add experts per rank
QWEN_MOE = ["--model", "qwen3-30b-a3b", "--chip", "h100-sxm", "--noc", "hgx-h100x8", "--ep", "8",
            "--input-seq", "1024", "--output-seq", "64", "--batch-size", "64"]  # fmt: skip


def _local(argv: list[str], capsys) -> dict:
    assert main(["estimate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _system(model: str = "gpt-oss-120b", chip: str = "b200", noc: str = "hgx-b200x8"):
    s = pb.SystemSpec(model=pb.ModelSource(name=model))
    s.noc.name = noc
    if chip:
        s.chip.name = chip
    return s


def _workload(**fields) -> pb.Workload:
    base = {"input_seq_len": 1024, "output_seq_len": 16, "precision": "fp4", "batch_size": 4}
    return pb.Workload(**{**base, **fields})


def _estimate(server: str, workload: pb.Workload, load=None, system=None) -> pb.EstimateResponse:
    with PlenaClient(server) as client:
        return client.estimate(system or _system(), pb.Plan(tp=8), workload, load=load)


@pytest.mark.parametrize(
    ("fields", "flags"),
    [({"engine": "trtllm"}, ["--engine", "trtllm"]),
     ({"engine": "sglang"}, ["--engine", "sglang"]),
     ({"moe_kernel": "mxfp8"}, ["--moe-kernel", "mxfp8"]),
     ({"engine": "sglang", "moe_kernel": "bf16"}, ["--engine", "sglang", "--moe-kernel", "bf16"])],
)  # fmt: skip
def test_an_engine_without_a_load_prices_what_the_cli_prices(server, capsys, fields, flags):
    reply = _estimate(server, _workload(**fields))
    assert not reply.HasField("under_load")
    doc = json.loads(reply.estimate_json)
    local = _local([*GPT_OSS, *flags], capsys)
    assert (doc["ttft_seconds"], doc["tps"]) == (local["ttft_seconds"], local["tps"])
    assert doc["chip"]["moe_kernel"] == local["chip"]["moe_kernel"]
    assert reply.metrics.ttft_seconds == local["ttft_seconds"]
    remote = _local([*GPT_OSS, *flags, "--server", server], capsys)  # the CLI sends them now
    assert (remote["ttft_seconds"], remote["tps"]) == (local["ttft_seconds"], local["tps"])


def test_the_engine_changes_the_answer(server):
    """vLLM runs gpt-oss's MXFP4 experts with bf16 activations on Blackwell, TensorRT-LLM and
    SGLang with MXFP8 ones, and TensorRT-LLM fuses the input quantisation: three answers."""
    ttft = {e: json.loads(_estimate(server, _workload(engine=e)).estimate_json)["ttft_seconds"]
            for e in ("", "vllm", "sglang", "trtllm")}  # fmt: skip
    assert ttft[""] == ttft["vllm"]
    assert len({ttft["vllm"], ttft["sglang"], ttft["trtllm"]}) == 3, ttft


def test_the_load_takes_the_workloads_engine(server):
    by_workload = _estimate(server, _workload(engine="trtllm"), pb.ServingLoad(concurrency=4))
    by_load = _estimate(server, _workload(), pb.ServingLoad(concurrency=4, engine="trtllm"))
    both = _estimate(server, _workload(engine="trtllm"),
                     pb.ServingLoad(concurrency=4, engine="trtllm"))  # fmt: skip
    assert by_workload.under_load.engine == "trtllm"
    for reply in (by_load, both):
        assert reply.under_load == by_workload.under_load
        assert reply.estimate_json == by_workload.estimate_json


@pytest.mark.parametrize(("n", "ok"), [(128, True), (129, False)])
def test_eplb_replicas_are_bounded_by_the_models_experts(server, n, ok):
    """The request bound is 2**16 (``MAX_EPLB_REDUNDANT``); a model's own bound, its experts
    (128 here), is refused naming the field, as ``--eplb-redundant`` is."""
    system = _system("qwen3-30b-a3b", "h100-sxm", "hgx-h100x8")
    w = pb.Workload(input_seq_len=256, output_seq_len=16, batch_size=8, eplb_redundant=n)
    with PlenaClient(server) as client:
        if ok:
            assert client.estimate(system, pb.Plan(ep=8), w).metrics.ttft_seconds > 0
            return
        with pytest.raises(PlenaRpcError) as err:
            client.estimate(system, pb.Plan(ep=8), w)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == "workload.eplb_redundant" and "128 experts" in str(err.value)


def test_eplb_replicas_price_what_the_cli_prices(server, capsys):
    system = _system("qwen3-30b-a3b", "h100-sxm", "hgx-h100x8")
    w = pb.Workload(input_seq_len=1024, output_seq_len=64, batch_size=64)
    with PlenaClient(server) as client:
        off = json.loads(client.estimate(system, pb.Plan(ep=8), w).estimate_json)
        w.eplb_redundant = 32
        on = json.loads(client.estimate(system, pb.Plan(ep=8), w).estimate_json)
    local = _local([*QWEN_MOE, "--eplb-redundant", "32"], capsys)
    assert (on["ttft_seconds"], on["tps"]) == (local["ttft_seconds"], local["tps"])
    assert on["weight_bytes_per_device"] != off["weight_bytes_per_device"]
    remote = _local([*QWEN_MOE, "--eplb-redundant", "32", "--server", server], capsys)
    assert remote["weight_bytes_per_device"] == local["weight_bytes_per_device"]


@pytest.mark.parametrize(
    ("workload", "load", "system", "field", "words"),
    [
        ({"engine": "foo"}, None, None, "workload.engine", "choose from vllm, sglang, trtllm"),
        ({"engine": "x" * 10_000}, None, None, "workload.engine", "10000 characters"),
        ({"moe_kernel": "cutlass"}, None, None, "workload.moe_kernel", "must be one of"),
        ({"engine": "trtllm", "moe_kernel": "bf16"}, None, None, "workload.moe_kernel",
         "trtllm on b200"),
        ({"moe_kernel": "bf16"}, None, _system(chip=""), "workload.moe_kernel", "GPU chip"),
        ({"engine": "trtllm"}, {"concurrency": 4, "engine": "sglang"}, None, "load.engine",
         "differ"),
        ({"moe_kernel": "mxfp8"}, {"concurrency": 4, "moe_kernel": "bf16"}, None,
         "load.moe_kernel", "differ"),
        ({"engine": "trtllm"}, {"concurrency": 4, "engine_version": "9.9"}, None,
         "load.engine_version", "00209af1"),
        ({"eplb_redundant": -1}, None, None, "workload.eplb_redundant", "eplb_redundant"),
        ({"eplb_redundant": (1 << 16) + 1}, None, None, "workload.eplb_redundant", "65536"),
    ],
)  # fmt: skip
def test_bad_input_is_invalid_argument_naming_the_field(server, workload, load, system, field,
                                                        words):  # fmt: skip
    serving = pb.ServingLoad(**load) if load is not None else None
    with pytest.raises(PlenaRpcError) as err:
        _estimate(server, _workload(**workload), serving, system)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert err.value.field == field and words in str(err.value), err.value
    assert len(str(err.value)) < 400


def test_the_cli_refuses_what_the_server_refuses(capsys):
    cases = ((["--engine", "foo"], "engine must be one of"),
             (["--eplb-redundant", str((1 << 16) + 1)], "65536"),
             (["--engine", "trtllm", "--moe-kernel", "bf16"], "trtllm on b200"))  # fmt: skip
    for flags, words in cases:
        assert main(["estimate", *GPT_OSS, *flags]) == 2
        assert words in capsys.readouterr().err


def test_a_search_prices_an_engine_without_a_load_on_its_kernels(server, capsys):
    """``workload.engine`` without a load is a static search on the engine's kernels, as
    ``plena-opt search --engine`` without a load is (issue 23 item 4); the engine version alone
    is still refused naming its flag."""

    def front(engine: str) -> list[tuple[str, float]]:
        request = pb.SearchRequest(system=_system(), workload=_workload(engine=engine))
        request.options.trials, request.options.batch_sizes[:] = 8, [4]
        with PlenaClient(server) as client:
            reply = client.search(request)
        assert not reply.HasField("under_load")
        return [(m.label, m.ttft_seconds) for m in reply.front]

    trt = front("trtllm")
    assert trt and trt != front("")
    argv = ["search", *GPT_OSS[:6], "--engine-version", "1.3.0", "--trials", "1"]
    assert main(argv) == 2 and "--engine-version needs --concurrency" in capsys.readouterr().err


def test_simulate_takes_the_workloads_kernel(server):
    """The kernel reaches Simulate's workload too (``plena-opt simulate --moe-kernel``; the
    remote CLI dropped it before)."""

    def window(kernel: str) -> float:
        t = pb.InferenceTarget(system=_system(), workload=_workload(moe_kernel=kernel),
                               plan=pb.Plan(tp=8), max_window_steps=1)  # fmt: skip
        with PlenaClient(server) as client:
            reply = client.simulate(pb.SimulateRequest(inference=t, samples=0))
        return reply.makespan

    assert window("mxfp8") != window("default")


def test_the_client_library_carries_the_engine(server):
    """``plena_client.workload(engine=…)`` and ``estimate(engine=…)`` reach the same figures as
    the proto fields (client/README.md's example)."""
    from plena_client import workload

    w = workload(input_seq_len=1024, output_seq_len=16, batch_size=4, precision="fp4")
    with PlenaClient(server) as client:
        by_kwarg = client.estimate(_system(), pb.Plan(tp=8), w, engine="trtllm")
        by_helper = client.estimate(
            _system(), pb.Plan(tp=8), workload(**_fields(w), engine="trtllm")
        )
    by_proto = _estimate(server, _workload(engine="trtllm"))
    assert by_kwarg.estimate_json == by_helper.estimate_json == by_proto.estimate_json
    assert w.engine == ""  # the caller's workload is not changed


def _fields(w: pb.Workload) -> dict:
    return {f.name: v for f, v in w.ListFields()}


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--design-space", "plena-stacked-dram"), ("--max-cost", "5"), ("--workers", "0"),
     ("--store-plans", "all")],
)  # fmt: skip
def test_a_local_search_flag_is_refused_with_server_not_dropped(server, capsys, flag, value):
    argv = ["search", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--trials", "1", "--batch-sizes", "8", flag, value, "--server", server]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and flag in err and "--server" in err, err


def test_remote_simulate_carries_the_kernel_and_eplb(server, capsys):
    """``plena-opt simulate --moe-kernel/--eplb-redundant --server`` prints what local mode
    prints (the kernel was dropped and EPLB refused before)."""
    for flags in (["--moe-kernel", "mxfp8"], ["--eplb-redundant", "8", "--ep", "8"]):
        plan = [] if "--ep" in flags else ["--tp", "8"]
        argv = ["simulate", *GPT_OSS[:6], "--input-seq", "1024", "--output-seq", "16",
                "--precision", "fp4", "--batch-size", "8", *plan, *flags, "--samples", "0",
                "--json"]  # fmt: skip
        assert main(argv) == 0
        local = json.loads(capsys.readouterr().out)
        assert main([*argv, "--server", server]) == 0
        remote = json.loads(capsys.readouterr().out)
        assert remote == local
