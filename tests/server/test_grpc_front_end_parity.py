"""The same request through the CLI (local), the CLI with ``--server`` and the client library
gives the same figures, and bad input is refused naming the field (r17qa): ``--devices`` travels
to the server as the first N devices of the NoC (it was dropped, so a 4-GPU plan on an 8-GPU node
was refused remotely); shape flags with no request field are refused with ``--server`` instead of
being dropped; an unknown engine and an empty model name are INVALID_ARGUMENT naming the load /
model field, as the CLI and the web app refuse them; the workload bounds are the library's."""

from __future__ import annotations

import json

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.bounds import MAX_BATCH_SIZE, MAX_INPUT_SEQ, MAX_OUTPUT_SEQ
from plena_opt.cli.main import main

QWEN = ["estimate", "--model", "nvidia/Qwen3-32B-NVFP4", "--chip", "b200", "--noc", "hgx-b200x8",
        "--devices", "4", "--tp", "4", "--engine", "trtllm", "--concurrency", "64",
        "--input-seq", "15000", "--output-seq", "500", "--json"]  # fmt: skip


def _run(argv: list[str], capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_devices_travel_with_the_request(server, capsys) -> None:
    local = _run(QWEN, capsys)
    remote = _run([*QWEN, "--server", server], capsys)
    assert remote["ttft_seconds"] == local["ttft_seconds"] and remote["tps"] == local["tps"]
    assert remote["chip"]["precision"] == "fp4" and remote["chip"]["kv_bytes_per_element"] == 1.0
    lu, ru = local["serving_under_load"], remote["serving_under_load"]
    assert ru["engine"]["name"] == "trtllm" and ru["gpus"] == 4
    assert ru["replay"]["ttft_seconds"] == lu["replay"]["ttft_seconds"]
    assert ru["replay"]["tpot_seconds"] == lu["replay"]["tpot_seconds"]


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [("--total-layers", "4", "total_layers"), ("--connected-layers", "2", "connected_layers"),
     ("--devices", "3", "devices")],
)  # fmt: skip
def test_a_flag_the_server_cannot_take_is_refused_not_dropped(server, capsys, flag, value, field):
    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--tp", "8", flag, value, "--server", server]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert flag in err or field in err, err


def _estimate(server: str, *, model: str = "llama-3.1-8b", load=None, **workload) -> None:
    s = pb.SystemSpec(model=pb.ModelSource(name=model))
    s.noc.name, s.chip.name = "hgx-h100x8", "h100-sxm"
    w = pb.Workload(**{"input_seq_len": 1024, "output_seq_len": 16, "batch_size": 4, **workload})
    with PlenaClient(server) as client:
        client.estimate(s, pb.Plan(tp=8), w, load=load)


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"load": pb.ServingLoad(concurrency=4, engine="foo")}, "load.engine",
         "engine must be one of vllm, sglang, trtllm"),
        ({"model": ""}, "system.model.name", "must not be empty"),
        ({"input_seq_len": MAX_INPUT_SEQ + 1}, "workload.input_seq_len", str(MAX_INPUT_SEQ)),
        ({"output_seq_len": MAX_OUTPUT_SEQ + 1}, "workload.output_seq_len", str(MAX_OUTPUT_SEQ)),
        ({"batch_size": MAX_BATCH_SIZE + 1}, "workload.batch_size", str(MAX_BATCH_SIZE)),
    ],
)  # fmt: skip
def test_bad_input_is_invalid_argument_naming_the_field(server, kwargs, field, words) -> None:
    with pytest.raises(PlenaRpcError) as err:
        _estimate(server, **kwargs)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert err.value.field == field and words in str(err.value), err.value


@pytest.mark.parametrize(
    ("flag", "top"),
    [("--input-seq", MAX_INPUT_SEQ), ("--output-seq", MAX_OUTPUT_SEQ),
     ("--batch-size", MAX_BATCH_SIZE)],
)  # fmt: skip
def test_the_cli_refuses_the_same_workload_bound(capsys, flag, top) -> None:
    base = ["estimate", "--model", "llama-3.1-8b", "--input-seq", "16", "--output-seq", "4",
            "--batch-size", "1"]  # fmt: skip
    assert main([*base, flag, str(top + 1)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"at most {top}" in err
    assert main([*base, flag, str(top), "--json"]) == 0
