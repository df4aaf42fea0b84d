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
