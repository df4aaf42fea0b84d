"""4-bit experts multiplied with MXFP8 activations (``Workload.mxfp8_moe``): gpt-oss's MXFP4
experts on B200 run ``kind::mxf8f6f4`` at the fp8 tensor-core rate in both InferenceX engines
(TensorRT-LLM's TRTLLM MoE backend; vLLM under ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``), not at
the fp4 rate of an NVFP4 x NVFP4 product (``chip.gpu.perf.MXFP8_MOE_NOTE``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.validate.serving_rows import ServingRow, resolve
from plena_opt.validate.serving_score import score_serving
from tests.shipped_rows_support import shipped_subset

OSS = {"backend": "trtllm", "model_path": "openai/gpt-oss-120b", "system": "b200_sxm",
       "mode": "agg", "isl": "8192", "osl": "1024", "tp_size": "1", "pp_size": "1",
       "moe_tp_size": "1", "moe_ep_size": "1", "gemm_quant_mode": "nvfp4",
       "moe_quant_mode": "nvfp4", "batch_size": "4", "concurrency": "4"}  # fmt: skip
IX = "2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_8192x1024_c4_tp1_ep1_1"


def test_recipe_rule_blackwell_mxfp4_checkpoint_only() -> None:
    assert resolve(ServingRow(IX, OSS)).mxfp8_moe  # TensorRT-LLM: TRTLLM backend by default
    assert resolve(ServingRow("grid_row", OSS)).mxfp8_moe  # the engine's default, any source
    vllm = {**OSS, "backend": "vllm"}
    assert resolve(ServingRow(IX.replace("trtllm", "vllm"), vllm)).mxfp8_moe  # the recipe's env
    grid = resolve(ServingRow("grid_row", vllm))
    assert not grid.mxfp8_moe and grid.bf16_moe  # vLLM's default: MXFP4 x BF16
    h100 = {**OSS, "system": "h100_sxm", "backend": "vllm"}  # no fp4 tensor cores: W4A16
    assert not resolve(ServingRow(IX.replace("b200", "h100").replace("trtllm", "vllm"), h100)
                       ).mxfp8_moe  # fmt: skip
    dsr1 = {**OSS, "model_path": "deepseek-ai/DeepSeek-R1"}  # an NVFP4 x NVFP4 checkpoint row
    assert not resolve(ServingRow(IX.replace("gpt_oss_120b", "dsr1"), dsr1)).mxfp8_moe


def test_compute_side_at_the_fp8_peak_memory_side_unchanged() -> None:
    chip = load_chip("b200")
    p = GpuPerfModel(chip, "fp4", 4.5 / 8, 4.5 / 8, 1.0)
    half = GpuPerfModel(chip, "fp4", 4.5 / 8, 4.5 / 8, 1.0)
    half.peak = chip.peak_flops["fp8"].value
    assert half.peak == pytest.approx(p.peak / 2)  # B200: 4.5 PFLOP/s fp8, 9 fp4 (dense)
    for tokens, active in ((4, 16), (64, 86), (8192, 128)):
        args = (tokens, 4 * tokens, active, 2880, 2880)
        w4a8 = p.fused_moe(*args, mxfp8=True)
        assert w4a8.seconds == pytest.approx(half.fused_moe(*args).seconds)
        assert w4a8.read_bytes == pytest.approx(p.fused_moe(*args).read_bytes)
    # binding where the layer is compute-bound (an 8k prompt), not at a decode batch of 4
    prompt, decode = (8192, 4 * 8192, 128, 2880, 2880), (4, 16, 16, 2880, 2880)
    assert p.fused_moe(*prompt, mxfp8=True).seconds > 1.4 * p.fused_moe(*prompt).seconds
    assert p.fused_moe(*decode, mxfp8=True).seconds == pytest.approx(
        p.fused_moe(*decode).seconds, rel=0.02)  # fmt: skip


def test_refused_where_the_experts_are_not_on_fp4_tensor_cores() -> None:
    from deepstack import load_noc_profile

    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip, noc = load_chip("h100-sxm"), load_noc_profile("hgx-h100x8")
    wl = Workload(batch_size=4, input_seq_len=128, output_seq_len=16, precision="mxfp4",
                  mxfp8_moe=True)  # fmt: skip
    with pytest.raises(PlenaInputError, match="mxfp8_moe"):
        Evaluator(load_model("gpt-oss-120b"), noc, gpu_memory(chip), wl, chip).evaluate(
            Plan(tp=8))  # fmt: skip
    with pytest.raises(PlenaTypeError, match="mxfp8_moe"):
        Workload(mxfp8_moe="yes")  # type: ignore[arg-type]
    b200, noc8 = load_chip("b200"), load_noc_profile("hgx-b200x8")
    ok = replace(wl, precision="fp4")
    ev = Evaluator(load_model("gpt-oss-120b"), noc8, gpu_memory(b200), ok, b200)
    assert ev.evaluate(Plan(tp=8)).tps_per_sequence > 0


def test_shipped_b200_gpt_oss_8k_prompts(tmp_path, monkeypatch) -> None:
    """The 60 B200 gpt-oss-120b 8k-prompt rows (TensorRT-LLM 32, vLLM 28): TTFT bias -19.9 %
    with the experts at the fp4 rate (main before r16oss8k: TRT-LLM -25.0, vLLM -14.0 %),
    -9.7 % at the fp8 rate MXFP8 activations run at."""
    from plena_opt.validate import serving_recipes

    path = shipped_subset(tmp_path / "oss.csv", lambda r: "gpt_oss_120b_b200_sxm" in r["id"]
                          and r["isl"] == "8192")  # fmt: skip

    def bias() -> float:
        priced = [r for r in score_serving(path).rows if r.status == "priced"]
        assert len(priced) == 60
        return sum(r.ttft_ms / r.measured_ttft_ms - 1 for r in priced) / len(priced)

    assert -0.13 < bias() < -0.06
    monkeypatch.setattr(serving_recipes, "moe_kernel", lambda *_: None)
    assert bias() < -0.17
