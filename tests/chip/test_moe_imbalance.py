"""Routing imbalance in prefill-size fused-MoE layers (``chip.gpu.moe_imbalance``): the grouped
GEMMs' M-tile count of the step's per-expert counts over balanced routing's, scaled by the
kernel family's tile time share (``MOE_TILE_TIME_SHARE``, ``W4A16_TILE_TIME_SHARE``; fitted by
``validate.calibrate_moe_imbalance`` on the kernel tables)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from deepstack.power_law import power_law_counts

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.chip.gpu import moe_imbalance as mi
from plena_opt.validate import calibrate_moe_imbalance as cal

KERNELS = Path(__file__).resolve().parents[1] / "shared" / "data" / "kernels"
OSS = (2880, 2880, 4, 128)  # gpt-oss-120b: hidden, expert inter, top-k, experts


def _oss_counts(tokens: int, alpha: float = 1.2) -> tuple[int, ...]:
    return tuple(int(c) for c in power_law_counts(tokens, OSS[3], OSS[2], alpha, 0))


def test_tile_ratio_counts_padded_m_tiles() -> None:
    assert mi.tile_ratio((256,) * 128, 64) == 1.0  # equal counts: balanced
    # 2 experts, 100 pairs, tile 64: even 50 + 50 = 2 tiles; 90 + 10 = 2 + 1 tiles
    assert mi.tile_ratio((90, 10), 64) == pytest.approx(1.5)
    # balanced routing pads every expert: 4 x 65 pairs = 8 tiles; 256 + 4 + 0 + 0: 5 tiles
    assert mi.tile_ratio((256, 4, 0, 0), 64) == pytest.approx(5 / 8)
    assert mi.imbalance_factor((90, 10), (64, 0.4)) == pytest.approx(1.2)
    assert mi.imbalance_factor(None, (64, 0.4)) == mi.imbalance_factor((90, 10), None) == 1.0
    # the kernel families: 8/16-bit Triton, 4-bit weight-only (Marlin included), none for fp4
    assert mi.tile_law("bf16", False) == (128, mi.MOE_TILE_TIME_SHARE)
    assert mi.tile_law("fp8_block", False) == (64, mi.MOE_TILE_TIME_SHARE)
    assert mi.tile_law("int4", False) == (64, mi.W4A16_TILE_TIME_SHARE)
    assert mi.tile_law("mxfp4", False) == (128, mi.W4A16_TILE_TIME_SHARE)
    assert mi.tile_law("bf16", True) == (mi.MARLIN_BLOCK_M, mi.W4A16_TILE_TIME_SHARE)
    assert mi.tile_law("fp4", False) is None


def test_balanced_counts_leave_every_curve_unchanged() -> None:
    """Equal counts (balanced routing) price exactly as before, on every prefill curve."""
    h, f, k, E = OSS
    for chip, prec, kw in (("h100-sxm", "mxfp4", {"marlin": True}), ("h100-sxm", "mxfp4", {}),
                           ("h200-sxm", "bf16", {}), ("h200-sxm", "fp8", {"block_scaled": True}),
                           ("b200", "fp4", {"mxfp8": True})):  # fmt: skip
        p = GpuPerfModel(load_chip(chip), prec, 0.53, 2.0, 2.0)
        even = (8192 * k // E,) * E
        plain = p.fused_moe(8192, 8192 * k, E, h, f, **kw).seconds
        assert p.fused_moe(8192, 8192 * k, E, h, f, expert_counts=even, **kw).seconds == plain


def test_power_law_prompt_grows_the_marlin_layer_by_the_fitted_tile_share() -> None:
    """gpt-oss-120b's 8k-token prompt routed power-law (alpha 1.2) on H100 Marlin (tile 64):
    the layer time x (1 + W4A16 share (tiles / balanced tiles - 1)); decode sizes and the
    1,024-token edge of the decode-range curve unchanged."""
    h, f, k, E = OSS
    p = GpuPerfModel(load_chip("h100-sxm"), "mxfp4", 0.53, 2.0, 2.0)
    counts = _oss_counts(8192)
    active = sum(1 for c in counts if c)
    base = p.fused_moe(8192, 8192 * k, active, h, f, marlin=True).seconds
    skew = p.fused_moe(8192, 8192 * k, active, h, f, marlin=True, expert_counts=counts).seconds
    r = mi.tile_ratio(counts, mi.MARLIN_BLOCK_M)
    assert r > 1.15  # hot experts fill tiles, cold ones pad theirs (1.18 at 8k tokens)
    assert skew / base == pytest.approx(1 + mi.W4A16_TILE_TIME_SHARE * (r - 1), rel=1e-12)
    for tokens in (4, 128, 1024):  # decode range: the curve's active-expert count carries it
        c = _oss_counts(tokens)
        n = sum(1 for x in c if x)
        plain = p.fused_moe(tokens, tokens * k, n, h, f, marlin=True).seconds
        assert p.fused_moe(tokens, tokens * k, n, h, f, marlin=True, expert_counts=c).seconds \
            == plain  # fmt: skip


def test_kernels_without_a_tile_law_are_left_as_fitted() -> None:
    """TensorRT-LLM-gen runners (the B200 fp4 curve; block fp8 with ``trtllm_gen``): their
    table rows follow no tile count, so skewed counts do not move them."""
    h, f, k, E = OSS
    counts = _oss_counts(8192)
    b200 = GpuPerfModel(load_chip("b200"), "fp4", 0.53, 0.5, 1.0)
    for kw in ({}, {"mxfp8": True}):
        plain = b200.fused_moe(8192, 8192 * k, E, h, f, **kw).seconds
        assert b200.fused_moe(8192, 8192 * k, E, h, f, expert_counts=counts, **kw).seconds \
            == plain  # fmt: skip
    fp8 = GpuPerfModel(load_chip("b200"), "fp8", 1.0, 1.0, 1.0)
    plain = fp8.fused_moe(8192, 8192 * k, E, h, f, True, trtllm_gen=True).seconds
    assert fp8.fused_moe(8192, 8192 * k, E, h, f, True, trtllm_gen=True,
                         expert_counts=counts).seconds == plain  # fmt: skip
    assert fp8.fused_moe(8192, 8192 * k, E, h, f, True, expert_counts=counts).seconds > plain


def test_evaluator_prices_power_law_prompts_dearer_and_decode_the_same(monkeypatch) -> None:
    """Through the evaluator: gpt-oss-120b on H100 (Marlin, MoE TP 8), an 8k prompt routed power-law
    has a longer TTFT with the term than without it; balanced routing and the decode rate do
    not move."""
    from deepstack import load_noc_profile

    from plena_opt.estimate import Evaluator, Plan, Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip, noc, model = load_chip("h100-sxm"), load_noc_profile("hgx-h100x8"), load_model(
        "gpt-oss-120b")  # fmt: skip
    wl = Workload(batch_size=1, input_seq_len=8192, output_seq_len=16, precision="mxfp4",
                  marlin_moe=True, routing="power_law")  # fmt: skip

    def run(w):
        ev = Evaluator(model, noc, gpu_memory(chip), w, chip)
        return ev.evaluate(Plan(tp=8, moe_tp_mode="keep"))

    on, bal_on = run(wl), run(replace(wl, routing="balanced"))
    monkeypatch.setattr(mi, "W4A16_TILE_TIME_SHARE", 0.0)
    off, bal_off = run(wl), run(replace(wl, routing="balanced"))
    assert on.ttft_seconds > 1.05 * off.ttft_seconds
    assert bal_on.ttft_seconds == bal_off.ttft_seconds
    assert on.tps_per_sequence == off.tps_per_sequence


@pytest.mark.skipif(not (KERNELS / "h200_sxm_moe_vllm-0.19.0.csv.gz").exists(),
                    reason="kernel tables absent")  # fmt: skip
def test_the_shares_are_the_tables_fit_and_hold_out() -> None:
    """Refitted on the tables they are the shipped constants; each cuts its family's ratio MAPE
    over pricing every routing as balanced, held out by GPU and by layer shape."""
    r = cal.report(KERNELS)
    w8, w4 = r["w8w16"], r["w4a16"]
    assert w8["share"] == pytest.approx(mi.MOE_TILE_TIME_SHARE, abs=5e-4)
    assert w4["share"] == pytest.approx(mi.W4A16_TILE_TIME_SHARE, abs=5e-4)
    assert (w8["ratios"], w4["ratios"]) == (5760, 1440)
    assert w8["mape"] < 3.5 < 8.0 < w8["mape_balanced"]
    assert w4["mape"] < 2.0 < 11.0 < w4["mape_balanced"]
    for fam in (w8, w4):
        for share, _, before, after in fam["logo"].values():
            assert abs(share - fam["share"]) < 0.05 and after < 3.5 and after < 0.45 * before
        for share, _, before, after in fam["lomo"].values():
            assert abs(share - fam["share"]) < 0.02 and after < 0.7 * before
