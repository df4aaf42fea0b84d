"""Where a gpt-oss-120b prompt's prefill goes on H100 (vLLM, MXFP4 experts on Marlin).

Run ``python benchmarks/oss_prefill_breakdown.py [ISL ...]`` (default 1024 and 8192). For each
InferenceX c4 row of the shipped file at TP 2, 4 and 8 it resolves the row as ``validate
--measurements`` does (``serving_rows.resolve``), taps the GPU pricer's kernel lists of one
static prefill pass of one prompt and prints milliseconds by kernel group (full- and
sliding-window attention halves: QKV GEMM, RoPE, KV write, attention, O GEMM; router GEMM +
top-k; fused MoE), the whole pass (kernels + norms + extras + the eager host time,
``estimate.gpu_host``) and the row's measured c4 TTFT (that pass plus a few decode steps of
waiting). The fused MoE is printed twice: as priced (Marlin under ``MMA_SYNC_PEAK_FRACTION``)
and with the ceiling off (the bf16 Triton curve alone, r8oss). Numbers only; nothing is fitted.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

from plena_opt.chip.gpu import perf as P
from plena_opt.estimate import Evaluator, Plan
from plena_opt.estimate import gpu as G
from plena_opt.estimate import gpu_layers as L
from plena_opt.validate.serving_rows import read_rows, resolve
from plena_opt.validate.serving_score import _parts, shipped_serving_csv

ROW = "gpt_oss_120b_h100_sxm_vllm_fp4_agg_{isl}x1024_c4_tp{tp}_ep1_"
PARTS = ("qkv", "rope", "kv write", "attention", "o")
COLUMNS = ("full attn", "swa attn", "qkv+o GEMMs", "router", "fused MoE")


def _ms(ks) -> float:
    return 1e3 * float(sum(np.mean(np.asarray(k.seconds)) for k in ks))


def prefill_parts(d, isl: int) -> tuple[dict[str, float], float]:
    """(ms of one prompt's prefill by kernel group, the evaluator's whole prefill pass ms)."""
    model, noc, memory, chip, wl, _ = _parts(d, 0.0)
    wl = replace(wl, batch_size=1, output_seq_len=2, input_seq_len=isl)
    got: dict[str, float] = defaultdict(float)
    ctx = {"n": 0}
    half = model.num_layers // 2  # gpt-oss: sliding-window and full layers alternate
    gqa, layer, moe = L.gqa_attention, G.GpuPricing.layer, G.GpuPricing._moe

    def tap_gqa(p, s, kind, mode, q, kv, T):
        ks = gqa(p, s, kind, mode, q, kv, T)
        if ctx["n"]:
            named = dict(zip(PARTS, ks, strict=False))
            got["swa attn" if kind.sliding else "full attn"] += ctx["n"] * _ms([named["attention"]])
            got["qkv+o GEMMs"] += ctx["n"] * _ms([named["qkv"], ks[-1]])
        return ks

    def tap_layer(self, s, kind, mode, *a):
        ctx["n"] = (half if kind.sliding else model.num_layers - half) if mode == "prefill" else 0
        try:
            return layer(self, s, kind, mode, *a)
        finally:
            ctx["n"] = 0

    def tap_moe(self, s, T, load):
        ks = moe(self, s, T, load)
        if ctx["n"]:
            got["router"] += ctx["n"] * _ms(ks[:2])
            got["fused MoE"] += ctx["n"] * _ms(ks[2:])
        return ks

    L.gqa_attention, G.GpuPricing.layer, G.GpuPricing._moe = tap_gqa, tap_layer, tap_moe
    try:
        plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
        res = Evaluator(model, noc, memory, wl, chip).evaluate(plan)
    finally:
        L.gqa_attention, G.GpuPricing.layer, G.GpuPricing._moe = gqa, layer, moe
    return dict(got), 1e3 * res.ttft_seconds


def main(*isls: str) -> int:
    rows = read_rows(shipped_serving_csv())
    print("| ISL | TP | " + " | ".join(COLUMNS) + " | MoE, no ceiling | prefill pass | "
          "measured c4 TTFT |")  # fmt: skip
    print("| ---: " * (len(COLUMNS) + 5) + "|")
    for isl in [int(x) for x in isls or ("1024", "8192")]:
        for tp in (2, 4, 8):
            row = next(r for r in rows if ROW.format(isl=isl, tp=tp) in r.id)
            d = resolve(row)
            parts, total = prefill_parts(d, isl)
            saved = dict(P.MMA_SYNC_PEAK_FRACTION)
            P.MMA_SYNC_PEAK_FRACTION.update(dict.fromkeys(saved, 1.0))
            try:
                free = prefill_parts(d, isl)[0]["fused MoE"]
            finally:
                P.MMA_SYNC_PEAK_FRACTION.update(saved)
            cells = " | ".join(f"{parts.get(k, 0.0):.1f}" for k in COLUMNS)
            print(f"| {isl} | {tp} | {cells} | {free:.1f} | {total:.1f} | "
                  f"{row.measured_ms('ttft_ms'):.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
