"""W4A16 experts on vLLM's Marlin MoE (``Workload.marlin_moe``): the InferenceX Hopper gpt-oss
recipes export ``VLLM_MXFP4_USE_MARLIN=1``, so their experts are not the Triton backend the
kernel table's ``vllm_mxfp4_moe`` rows timed (``chip.gpu.perf.MARLIN_MOE_NOTE``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.chip.gpu.perf import MMA_SYNC_PEAK_FRACTION
from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.validate import serving_rows
from plena_opt.validate.serving_rows import ServingRow, resolve
from tests.shipped_rows_support import shipped_subset, tpot_mape_bias

OSS = {"backend": "vllm", "model_path": "openai/gpt-oss-120b", "system": "h100_sxm",
       "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "8", "pp_size": "1",
       "moe_tp_size": "8", "moe_ep_size": "1", "gemm_quant_mode": "nvfp4",
       "moe_quant_mode": "nvfp4", "batch_size": "4", "concurrency": "4"}  # fmt: skip
IX = "2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c4_tp8_ep1_1"


def test_inferencex_hopper_vllm_rows_run_marlin_experts() -> None:
    assert resolve(ServingRow(IX, OSS)).marlin_moe  # gptoss_fp4_h100.sh: VLLM_MXFP4_USE_MARLIN=1
    assert not resolve(ServingRow("grid_row", OSS)).marlin_moe  # no recipe: vLLM's default
    trt = {**OSS, "backend": "trtllm"}
    assert not resolve(ServingRow(IX.replace("vllm", "trtllm"), trt)).marlin_moe
    b200 = {**OSS, "system": "b200_sxm"}  # FP4 tensor cores: the experts are not W4A16
    assert not resolve(ServingRow(IX.replace("h100", "b200"), b200)).marlin_moe


def test_marlin_experts_take_the_compute_format_curve_at_the_weight_bytes() -> None:
    chip = load_chip("h100-sxm")
    without = chip.model_copy(update={
        "moe": {k: v for k, v in chip.moe.items() if k != "mxfp4"},
        "moe_prefill": {k: v for k, v in chip.moe_prefill.items() if k != "mxfp4"},
    })  # fmt: skip
    wb = 4.25 / 8  # MXFP4 bytes per weight (e2m1 + an e8m0 scale per 32)
    own, bf16, capped = (GpuPerfModel(c, "mxfp4", wb, 2.0, 2.0) for c in (chip, without, without))
    capped.peak *= MMA_SYNC_PEAK_FRACTION["h100-sxm"]  # Marlin's mma.sync ceiling on Hopper
    for tokens, active in ((4, 16), (64, 128), (4096, 128)):
        args = (tokens, 4 * tokens, active, 2880, 360)
        marlin = own.fused_moe(*args, marlin=True)
        assert marlin.seconds == pytest.approx(capped.fused_moe(*args).seconds)
        assert marlin.read_bytes == pytest.approx(own.fused_moe(*args).read_bytes)  # MXFP4 bytes
    # the ceiling binds where the layer is compute-bound (a prompt), not at decode sizes
    decode, prompt = (4, 16, 16, 2880, 360), (4096, 4 * 4096, 128, 2880, 360)
    assert own.fused_moe(*decode, marlin=True).seconds == pytest.approx(
        bf16.fused_moe(*decode).seconds, rel=0.01)  # fmt: skip
    assert own.fused_moe(*prompt, marlin=True).seconds > 1.1 * bf16.fused_moe(*prompt).seconds
    # at decode sizes the Triton-backend table prices the layer well above Marlin's chain
    assert own.fused_moe(4, 16, 16, 2880, 360).seconds > 1.5 * own.fused_moe(
        4, 16, 16, 2880, 360, marlin=True).seconds  # fmt: skip


def test_marlin_moe_is_refused_where_its_ceiling_is_not_known() -> None:
    """Marlin is a CUDA kernel: an AMD chip running the same 4-bit experts weight-only is not
    priced as Marlin (refused naming the field), and an InferenceX AMD vLLM row (the ROCm
    recipes run AITER, not Marlin) does not take it."""
    from deepstack import load_noc_profile

    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip, noc = load_chip("mi325x"), load_noc_profile("mi325x-x8")
    wl = Workload(batch_size=4, input_seq_len=128, output_seq_len=16, precision="mxfp4")
    ev = Evaluator(load_model("gpt-oss-120b"), noc, gpu_memory(chip), wl, chip)
    assert ev.evaluate(Plan(tp=8)).tps_per_sequence > 0  # weight-only experts, no Marlin
    with pytest.raises(PlenaInputError, match="marlin_moe"):
        Evaluator(load_model("gpt-oss-120b"), noc, gpu_memory(chip),
                  replace(wl, marlin_moe=True), chip).evaluate(Plan(tp=8))  # fmt: skip
    amd = {**OSS, "system": "mi325x"}
    assert not resolve(ServingRow(IX.replace("h100_sxm", "mi325x"), amd)).marlin_moe


def test_marlin_moe_is_refused_on_experts_that_are_not_weight_only() -> None:
    from deepstack import load_noc_profile

    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip, noc = load_chip("b200"), load_noc_profile("hgx-b200x8")
    wl = Workload(batch_size=4, input_seq_len=128, output_seq_len=16, marlin_moe=True)
    with pytest.raises(PlenaInputError, match="marlin_moe"):
        Evaluator(load_model("gpt-oss-120b"), noc, gpu_memory(chip), wl, chip).evaluate(
            Plan(tp=8))  # fmt: skip
    with pytest.raises(PlenaTypeError, match="marlin_moe"):
        Workload(marlin_moe="yes")  # type: ignore[arg-type]


def test_shipped_hopper_gpt_oss_vllm_rows(tmp_path, monkeypatch) -> None:
    """The 60 H100 gpt-oss-120b vLLM rows below c512 (there the client bounds the measurement):
    priced as the Triton-backend table they were TPOT 23.8 % MAPE (bias +20.4 %); as Marlin
    11.9 % (-11.1 %), 14.8 % (-14.8 %) since a prompt chunk's host dispatch is overlapped in the
    decode steps around it (``serving.host_overlap``, r10tpot: these async-scheduled rows are
    the group it moves the wrong way)."""
    path = shipped_subset(tmp_path / "oss.csv", lambda r: "gpt_oss_120b_h100_sxm_vllm" in r["id"]
                          and r["concurrency"] != "512")  # fmt: skip

    mape, bias = tpot_mape_bias(path, 60)
    assert mape < 0.16 and abs(bias) < 0.16
    monkeypatch.setattr(serving_rows, "marlin_recipe", lambda *_: False)
    triton_mape, triton_bias = tpot_mape_bias(path, 60)
    assert triton_mape > 0.2 and triton_bias > 0.15
