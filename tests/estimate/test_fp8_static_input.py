"""Checkpoints with static per-tensor fp8 activation scales quantise a linear layer's input in
one bf16 pass, not the dynamic scale's two (README_serving r16static).

NVIDIA ModelOpt ``…-FP8`` checkpoints carry a calibrated ``input_scale`` per layer (vLLM's
``ModelOptFp8LinearMethod``); the kernel tables, and every other fp8 checkpoint here, are dynamic.
"""

from __future__ import annotations

import pytest
from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel, load_gpu_chip
from plena_opt.chip.gpu.kernel_bytes import QUANT_PASSES, gemm_operand_bytes
from plena_opt.errors import PlenaTypeError
from plena_opt.estimate import Workload
from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.models import load_model
from plena_opt.models.checkpoint import fp8_static_input
from plena_opt.validate.calibrate import gemm_nbytes
from plena_opt.validate.serving_rows import ServingRow, resolve


def test_checkpoint_ids_name_their_activation_scales() -> None:
    assert fp8_static_input("nvidia/Llama-3.3-70B-Instruct-FP8")
    assert fp8_static_input("nvidia/Llama-3.1-8B-Instruct-FP8")
    assert fp8_static_input("NVIDIA/Llama-3.1-70B-Instruct-FP8-v2")  # a quantiser's revision
    assert not fp8_static_input("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic")
    assert not fp8_static_input("nvidia/Llama-3.3-70B-Instruct-FP4")  # NVFP4: not fp8
    assert not fp8_static_input("meta-llama/Llama-3.1-70B")
    assert not fp8_static_input("Qwen/Qwen3-32B-FP8")  # another quantiser: dynamic default
    assert not fp8_static_input(None)
    with pytest.raises(PlenaTypeError, match="fp8_static_input"):
        Workload(fp8_static_input="yes")  # type: ignore[arg-type]


def test_static_scales_read_the_bf16_input_once() -> None:
    dynamic, static = gemm_operand_bytes("fp8"), gemm_operand_bytes("fp8", static_input=True)
    assert QUANT_PASSES["fp8"] == 2
    assert dynamic.activation == 2 * 2.0 + 2 * 1.0 and static.activation == 2.0 + 2 * 1.0
    assert static.weight == dynamic.weight
    # fused quantisation (TensorRT-LLM) makes no bf16 pass either way; one-pass formats stay
    assert gemm_operand_bytes("fp8", fused_quant=True, static_input=True).activation == 1.0
    for fmt in ("fp8_block", "fp4"):
        assert gemm_operand_bytes(fmt, static_input=True) == gemm_operand_bytes(fmt)
    # the kernel-table fits keep the tables' dynamic count
    assert gemm_nbytes("fp8", 2, 3, 5) == 3 * 5 * 1.0 + 2 * 5 * 6.0 + 2 * 3 * 2.0


def test_a_memory_bound_prefill_gemm_is_cheaper_with_static_scales() -> None:
    chip = load_gpu_chip("h100-sxm")
    dyn, sta = (GpuPerfModel(chip, "fp8", 1.0, 1.0, 1.0, static_input=s) for s in (False, True))
    assert sta.gemm_in == 4.0 and dyn.gemm_in == 6.0
    assert sta.gemm(4096, 1280, 8192).seconds < dyn.gemm(4096, 1280, 8192).seconds


def test_an_nvidia_fp8_id_carries_its_scales_into_estimate() -> None:
    """``estimate --model nvidia/Llama-3.3-70B-Instruct-FP8`` prices the shipped static scales at
    fp8; the same weights re-quantised elsewhere (fp4) or the Meta id stay dynamic."""
    m = load_model("nvidia/Llama-3.3-70B-Instruct-FP8")
    assert m.checkpoint_precision == "fp8" and m.checkpoint_fp8_static_input
    assert not load_model("llama-3.3-70b").checkpoint_fp8_static_input
    c = load_chip("h100-sxm")

    def pricer(model, wl: Workload):
        ctx = EstimateContext(model, load_noc_profile("hgx-h100x8"), gpu_memory(c), wl, c)
        return ctx.pricer.perf

    assert pricer(m, Workload(precision="fp8")).gemm_in == 4.0
    ctx = EstimateContext(m, load_noc_profile("hgx-h100x8"), gpu_memory(c), Workload(), c)
    assert ctx.pricer.describe()["fp8_static_input"] is True
    assert pricer(load_model("llama-3.3-70b"), Workload(precision="fp8")).gemm_in == 6.0
    assert pricer(load_model("llama-3.3-70b"),
                  Workload(precision="fp8", fp8_static_input=True)).gemm_in == 4.0  # fmt: skip


def test_validation_rows_resolve_the_checkpoint_they_ran() -> None:
    row = {"backend": "vllm", "model_path": "meta-llama/Llama-3.1-70B", "system": "h100_sxm",
           "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "8", "moe_tp_size": "1",
           "moe_ep_size": "1", "concurrency": "8", "batch_size": "8", "precision": "fp8",
           "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8"}  # fmt: skip
    ix = "2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_x"
    assert resolve(ServingRow(ix, row)).fp8_static_input  # InferenceX: nvidia/…-FP8
    assert not resolve(ServingRow("aic_x", row)).fp8_static_input  # checkpoint not known
    named = {**row, "model_path": "nvidia/Llama-3.3-70B-Instruct-FP8"}
    assert resolve(ServingRow("aic_x", named)).fp8_static_input
    bf16 = {**row, "precision": "bf16", "gemm_quant_mode": "bf16", "moe_quant_mode": "bf16"}
    assert not resolve(ServingRow(ix, bf16)).fp8_static_input
