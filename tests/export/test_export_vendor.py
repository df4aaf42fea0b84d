"""TensorRT-LLM runs on NVIDIA GPUs only (no ROCm build): an AMD GPU's bundle refuses it, and a
plan on one is not priced under TensorRT-LLM's scheduler (r18qa; ``validate`` already refused
such rows, ``validate.serving_rows.NVIDIA_ONLY_ENGINES``)."""

from __future__ import annotations

import pytest

from plena_opt.api.exports import export_moe
from plena_opt.cli.main import main
from plena_opt.export import ExportSpec, plan_bundle

KEY = "tp8-ep1-dp1-pp1-cp1-replace-none-b32"


@pytest.mark.parametrize("chip", ["mi325x", "mi300x"])
def test_an_amd_bundle_refuses_tensorrt_llm_and_keeps_the_others(chip):
    spec = ExportSpec(model="meta-llama/Llama-3.1-70B", input_len=1024, output_len=256,
                      **export_moe(chip, "llama-3.1-70b"))  # fmt: skip
    (trt,) = plan_bundle("trtllm", KEY, spec)
    assert trt.refused and any("NVIDIA" in r for r in trt.refused)
    for engine in ("vllm", "sglang"):
        assert not any(c.refused for c in plan_bundle(engine, KEY, spec))
    nvidia = ExportSpec(model="meta-llama/Llama-3.1-70B", input_len=1024, output_len=256,
                        **export_moe("h200-sxm", "llama-3.1-70b"))  # fmt: skip
    assert not any(c.refused for c in plan_bundle("trtllm", KEY, nvidia))


def test_estimate_refuses_tensorrt_llm_on_an_amd_gpu(capsys):
    argv = ["estimate", "--model", "llama-3.1-70b", "--chip", "mi325x", "--noc", "mi325x-x8",
            "--tp", "8", "--concurrency", "8"]  # fmt: skip
    assert main([*argv, "--engine", "trtllm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: engine") and "NVIDIA" in err
    assert main([*argv, "--engine", "vllm"]) == 0
