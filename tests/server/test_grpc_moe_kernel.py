"""``ServingLoad.moe_kernel`` over gRPC (``chip.gpu.moe_kernels``): the load's engine prices the
MXFP4 experts of the static estimate and the load alike, as ``plena-opt estimate --engine``
does locally; a kernel the engine does not run on the chip is INVALID_ARGUMENT naming
``load.moe_kernel``."""

from __future__ import annotations

import json

import grpc
import pytest
from plena_client import PlenaClient, PlenaRpcError, pb

from plena_opt.cli.main import main


def _system(chip: str, noc: str) -> pb.SystemSpec:
    s = pb.SystemSpec(model=pb.ModelSource(name="gpt-oss-120b"))
    s.noc.name, s.chip.name = noc, chip
    return s


WORKLOAD = pb.Workload(input_seq_len=1024, output_seq_len=16, precision="fp4", batch_size=4)


def test_the_loads_engine_prices_the_static_estimate(server, capsys):
    with PlenaClient(server) as client:
        reply = client.estimate(_system("b200", "hgx-b200x8"), pb.Plan(tp=8), WORKLOAD,
                                load=pb.ServingLoad(concurrency=4, engine="trtllm"))  # fmt: skip
    doc = json.loads(reply.estimate_json)
    assert doc["chip"]["moe_kernel"] == "mxfp8" and reply.under_load.engine == "trtllm"
    argv = ["estimate", "--model", "gpt-oss-120b", "--chip", "b200", "--noc", "hgx-b200x8",
            "--tp", "8", "--input-seq", "1024", "--output-seq", "16", "--precision", "fp4",
            "--batch-size", "4", "--engine", "trtllm", "--json"]  # fmt: skip
    assert main(argv) == 0
    local = json.loads(capsys.readouterr().out)
    assert local["ttft_seconds"] == doc["ttft_seconds"]


@pytest.mark.parametrize(
    ("chip", "noc", "load"),
    [
        ("h100-sxm", "hgx-h100x8", {"engine": "trtllm", "moe_kernel": "marlin"}),
        ("h100-sxm", "hgx-h100x8", {"moe_kernel": "mxfp8"}),  # vLLM; no fp4 tensor cores
        ("b200", "hgx-b200x8", {"moe_kernel": "cutlass"}),  # not a kernel name
    ],
)
def test_a_kernel_the_engine_does_not_run_is_invalid_argument(server, chip, noc, load):
    workload = pb.Workload(input_seq_len=1024, output_seq_len=16, batch_size=4)
    if chip == "b200":
        workload.precision = "fp4"
    with PlenaClient(server) as client, pytest.raises(PlenaRpcError) as err:
        client.estimate(_system(chip, noc), pb.Plan(tp=8), workload,
                        load=pb.ServingLoad(concurrency=4, **load))  # fmt: skip
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == "load.moe_kernel"
