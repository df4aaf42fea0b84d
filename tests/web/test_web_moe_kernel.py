"""The planner's ``moe_kernel`` field (``search --moe-kernel``; ``chip.gpu.moe_kernels``): a name
that is no kernel, or a kernel the engine does not run on the chip, is 422 naming the field."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.web.app import create_app  # noqa: E402

OSS = {"model": "gpt-oss-120b", "chip": "h200-sxm", "noc": "hgx-h200x8", "input_seq": 1024,
       "output_seq": 128, "trials": 4, "serving": "aggregated"}  # fmt: skip


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"moe_kernel": "cutlass"}, "--moe-kernel: invalid choice 'cutlass'"),
        ({"moe_kernel": "marlin", "engine": "trtllm"}, "trtllm on h200-sxm (hopper)"),
        ({"moe_kernel": "mxfp8"}, "vllm on h200-sxm (hopper) runs MXFP4 experts as triton"),
    ],
)
def test_a_kernel_not_run_there_is_422_naming_the_field(client, extra, words) -> None:
    r = client.post("/api/planner/jobs", json={**OSS, **extra})
    assert r.status_code == 422, r.text
    doc = r.json()
    assert doc["field"] == "moe_kernel" and words in r.text, doc
