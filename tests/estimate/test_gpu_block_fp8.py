"""DeepSeek-V3's block-scaled fp8 experts are priced by the chip's measured fp8_block fused MoE."""

from __future__ import annotations

import pytest

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.estimate.gpu import BLOCK_FP8_MODEL_TYPES


def _perf(precision: str) -> GpuPerfModel:
    chip = load_chip("b200")
    wb = {"fp8": 1.0, "bf16": 2.0}[precision]
    return GpuPerfModel(chip, precision, wb, wb, 2.0)


def test_block_scaled_moe_uses_the_block_curve():
    p = _perf("fp8")
    c = p.chip.moe["fp8_block"]
    tokens, pairs, active, h, f = 64, 512.0, 182.0, 7168, 256
    k = p.fused_moe(tokens, pairs, active, h, f, block_scaled=True)
    tc = k.flops / (p.peak * c.compute_efficiency.value)
    tm = (k.read_bytes + k.write_bytes) / (p.bw * c.bandwidth_efficiency.value)
    expect = c.fixed_seconds.value + tc + tm + c.seconds_per_active_expert.value * active
    assert c.blend.value == 1.0
    assert k.seconds == pytest.approx(expect, rel=1e-12)
    assert k.seconds != pytest.approx(p.fused_moe(tokens, pairs, active, h, f).seconds)


def test_bf16_has_no_block_curve_and_keeps_its_own():
    p = _perf("bf16")
    a = p.fused_moe(8, 64.0, 40.0, 7168, 256, block_scaled=True)
    b = p.fused_moe(8, 64.0, 40.0, 7168, 256)
    assert a.seconds == b.seconds


def test_only_deepseek_v3_at_fp8_is_block_scaled():
    from plena_opt.estimate.gpu import GpuPricing, gpu_memory, storage_precision
    from plena_opt.estimate.plan import Workload
    from plena_opt.models import load_model

    chip = load_chip("b200")
    assert BLOCK_FP8_MODEL_TYPES == {"deepseek_v3"}
    for name, precision, block in (
        ("deepseek-v3", "fp8", True),
        ("deepseek-v3", "bf16", False),
        ("qwen3-235b-a22b", "fp8", False),
    ):
        wl = Workload(precision=precision)
        g = GpuPricing(chip, storage_precision(chip, wl), wl, gpu_memory(chip))
        assert g._block_moe(load_model(name)) is block, name


def test_prefill_token_counts_use_the_prefill_range_curve():
    """Above ``moe_prefill_min_tokens`` the fused MoE is priced by the prefill-range fit, which
    adds a time per token-expert pair (the decode-range fit is 1.6-3x too fast at 8k tokens on
    the measured rows)."""
    p = _perf("bf16")
    lim = p.chip.moe_prefill_min_tokens
    h, f, k = 4096, 192, 8
    at = p.fused_moe(lim, lim * k, 128, h, f)
    above = p.fused_moe(lim + 1, (lim + 1) * k, 128, h, f)
    c = p.chip.moe_prefill["bf16"]
    tc = above.flops / (p.peak * c.compute_efficiency.value)
    tm = (above.read_bytes + above.write_bytes) / (p.bw * c.bandwidth_efficiency.value)
    b = c.blend.value
    expect = c.fixed_seconds.value + (tc**b + tm**b) ** (1 / b)
    expect += c.seconds_per_active_expert.value * 128
    expect += c.seconds_per_pair.value * (lim + 1) * k  # per token-expert pair (prefill fits)
    assert c.seconds_per_pair.value > 0 and p.chip.moe["bf16"].seconds_per_pair is None
    assert above.seconds == pytest.approx(expect, rel=1e-12)
    assert at.seconds != pytest.approx(expect, rel=1e-3)


def test_b200_prefill_moe_curve_is_the_kernel_fit():
    from plena_opt.validate.calibrate import moe_fits
    from tests.conftest import require_shared

    chip = load_chip("b200")
    peaks = {k: v.value for k, v in chip.peak_flops.items()}
    kernels = require_shared() / "data" / "kernels"
    fit = moe_fits(kernels, "b200_sxm", peaks, chip.hbm.bandwidth_bytes_per_s.value, prefill=True)
    for fmt in ("bf16", "fp8", "fp8_block"):
        for name, value in fit[fmt].values.items():
            assert getattr(chip.moe_prefill[fmt], name).value == pytest.approx(value, rel=1e-3)
        assert "tokens >= 1024" in fit[fmt].data


def test_fp8_block_gemms_use_the_fitted_block_curve_on_any_model():
    """fp8_block is the GEMM kernel's format, not the model family's: a dense Llama's GEMMs
    at ``fp8_block_gemm`` run the chip's fitted ``gemm.fp8_block`` curves (fitted on the
    fp8_block rows of the H100 GEMM table), slower than per-tensor fp8 there."""
    from plena_opt.estimate.gpu import GpuPricing, gpu_memory, storage_precision
    from plena_opt.estimate.plan import Workload
    from plena_opt.models import load_model

    chip = load_chip("h100-sxm")
    assert "fitted on h100_sxm_gemm" in chip.gemm["fp8_block"].fixed_seconds.source
    assert "gemm_dtype=fp8_block" in chip.gemm["fp8_block"].fixed_seconds.source
    m = load_model("llama-3.1-8b")
    priced = {}
    for block in (False, True):
        wl = Workload(precision="fp8", fp8_block_gemm=block)
        g = GpuPricing(chip, storage_precision(chip, wl), wl, gpu_memory(chip), m)
        assert (g.dense.gemm_curve is chip.gemm["fp8_block"]) is block
        priced[block] = g.dense.gemm(4096, 4096, 4096).seconds
    c = chip.gemm["fp8_block"]
    assert priced[True] > priced[False]
    assert priced[True] > c.fixed_seconds.value


def test_a_chip_without_a_block_curve_is_refused_naming_it():
    from plena_opt.errors import PlenaInputError

    chip = load_chip("h100-sxm")
    bare = chip.model_copy(
        update={"gemm": {k: v for k, v in chip.gemm.items() if k != "fp8_block"}}
    )
    with pytest.raises(PlenaInputError, match=r"no gemm\.fp8_block curve"):
        GpuPerfModel(bare, "fp8", 1.0, 2.0, 2.0).block_scaled()


def test_block_flags_need_fp8():
    from plena_opt.errors import PlenaInputError
    from plena_opt.estimate.gpu import GpuPricing, gpu_memory, storage_precision
    from plena_opt.estimate.plan import Workload
    from plena_opt.models import load_model

    chip = load_chip("h100-sxm")
    wl = Workload(precision="bf16", fp8_block_gemm=True)
    with pytest.raises(PlenaInputError, match="fp8_block weights need precision fp8"):
        GpuPricing(chip, storage_precision(chip, wl), wl, gpu_memory(chip),
                   load_model("llama-3.1-8b"))  # fmt: skip


def test_fp8_block_experts_on_any_moe_model():
    """``fp8_block_moe``: a Qwen3 MoE's experts run the chip's fp8_block fused-MoE curve (the
    kernel's format, not the family's); without it they keep the per-tensor fp8 curve."""
    from plena_opt.estimate.gpu import GpuPricing, gpu_memory, storage_precision
    from plena_opt.estimate.plan import Workload
    from plena_opt.models import load_model

    chip = load_chip("b200")
    m = load_model("qwen3-235b-a22b")
    for flag in (False, True):
        wl = Workload(precision="fp8", fp8_block_moe=flag)
        g = GpuPricing(chip, storage_precision(chip, wl), wl, gpu_memory(chip), m)
        assert g._block_moe(m) is flag
    p = _perf("fp8")
    args = (64, 512.0, 100.0, m.hidden_size, m.moe_intermediate_size)
    assert p.fused_moe(*args, block_scaled=True).seconds != p.fused_moe(*args).seconds
