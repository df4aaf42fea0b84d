"""gpt-oss-120b prefill by kernel group on H100 vLLM, B200 TensorRT-LLM and B200 vLLM (r16oss8k).

Run ``python benchmarks/oss_prefill_groups.py [ISL ...]`` (default 1024 and 8192). For each
InferenceX c4 row of the shipped file (output 1k) at every TP it resolves the row as ``validate
--measurements`` does, taps the GPU pricer's kernel lists of one static prefill pass of one
prompt and prints milliseconds by kernel group over the 36 layers: QKV and O GEMMs, router GEMM
+ top-k, fused MoE experts, attention on the 18 full and 18 sliding-window (128) layers,
elementwise (RoPE, KV-cache write, norms), the eager host time (``estimate.gpu_host``) and the
rest of the pass (72 TP all-reduces, embedding / LM head: the pass minus kernels and host). The
pass is ``StepModel.prefill_seconds`` (engine scales in), then the row's priced and measured c4
TTFT (the pass plus the wait). Table columns, from ``tests/shared/data/kernels``:

* ``gemm tbl``: the QKV, O and router GEMMs read from the chip's measured bf16 GEMM table
  (bilinear in n and k between its sizes, m measured);
* ``attn tbl``: the full / windowed prefill attention at the row's per-GPU heads of 64 read from
  ``context_attention`` (H100: FlashAttention, window 0 / 128, the row's KV dtype; B200's table
  has no head-dim 64 row: ``-``);
* ``moe tbl``: the gpt-oss layer itself (``vllm_mxfp4_moe`` 2880×2880, 128 experts, top-4,
  ``power_law_1.2`` as the rows are routed, and ``balanced``) at the row's MoE TP: H100 rows read
  the H200 table (the same GH100 die; vLLM's Triton ``matmul_ogs`` backend, not the Marlin the
  recipe runs); B200 rows read the B200 table (a W4A16 kernel, not the rows' TRT-LLM-gen one).

Numbers only; nothing is fitted.
"""

from __future__ import annotations

import csv
import gzip
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from plena_opt.estimate import Evaluator, Plan
from plena_opt.estimate import gpu as G
from plena_opt.estimate import gpu_layers as L
from plena_opt.validate.serving_rows import read_rows, resolve
from plena_opt.validate.serving_score import _parts, _price_row, shipped_serving_csv, step_model

KERNELS = Path(__file__).resolve().parent.parent / "tests/shared/data/kernels"
ROW = "gpt_oss_120b_{gpu}_{engine}_fp4_agg_{isl}x1024_c4_tp{tp}_"
GROUPS = (("h100_sxm", "vllm"), ("b200_sxm", "trtllm"), ("b200_sxm", "vllm"))
COLUMNS = ("qkv+o", "router", "experts", "full attn", "swa attn", "elementwise", "host", "rest")
H, HEADS, KV_HEADS, HD, E, TOPK, WINDOW = 2880, 64, 8, 64, 128, 4, 128


def _ms(ks) -> float:
    return 1e3 * float(sum(np.mean(np.asarray(k.seconds)) for k in ks))


def _csv(name: str) -> list[dict[str, str]]:
    with gzip.open(KERNELS / name, "rt") as f:
        return list(csv.DictReader(f))


def gemm_table(gpu: str) -> dict[tuple[int, int, int], float]:
    """(m, n, k) → ms of the chip's measured bf16 GEMM table."""
    return {(int(r["m"]), int(r["n"]), int(r["k"])): float(r["latency"])
            for r in _csv(f"{gpu}_gemm_vllm-0.19.0.csv.gz")
            if r["gemm_dtype"] == "bfloat16"}  # fmt: skip


def table_ms(t: dict[tuple[int, int, int], float], m: int, n: int, k: int) -> float:
    """The table at (m, n, k), linear in n and k between its measured sizes (m measured)."""
    ns, ks = sorted({x[1] for x in t if x[0] == m}), sorted({x[2] for x in t if x[0] == m})

    def around(v: int, grid: list[int]) -> list[tuple[int, float]]:
        if v in grid:
            return [(v, 1.0)]
        lo, hi = max(x for x in grid if x < v), min(x for x in grid if x > v)
        w = (v - lo) / (hi - lo)
        return [(lo, 1.0 - w), (hi, w)]

    return sum(a * b * t[(m, x, y)] for x, a in around(n, ns) for y, b in around(k, ks))


def attention_table(gpu: str, tp: int, isl: int, kv_dtype: str) -> tuple[float, float] | None:
    """(full, windowed) ms of one layer's prefill attention, one prompt, heads per GPU, from the
    chip's ``context_attention`` table; None where it has no head-dim 64 rows."""
    got = {}
    for r in _csv(f"{gpu}_context_attention_vllm-0.19.0.csv.gz"):
        if (r["head_dim"] == str(HD) and r["batch_size"] == "1" and r["isl"] == str(isl)
                and r["num_heads"] == str(HEADS // tp) and r["kv_cache_dtype"] == kv_dtype
                and r["num_key_value_heads"] == str(max(KV_HEADS // tp, 1))):  # fmt: skip
            got[int(r["window_size"])] = float(r["latency"])
    return (got[0], got[WINDOW]) if 0 in got and WINDOW in got else None


def moe_table(gpu: str, tp: int, tokens: int) -> dict[str, float]:
    """ms of one gpt-oss MoE layer (``vllm_mxfp4_moe``) at ``tokens`` and MoE TP ``tp``, by
    routing distribution (H100 rows: the H200 table)."""
    table = "h200_sxm" if gpu == "h100_sxm" else gpu
    out: dict[str, list[float]] = defaultdict(list)
    for r in _csv(f"{table}_moe_vllm-0.19.0.csv.gz"):
        if (r["kernel_source"] == "vllm_mxfp4_moe" and r["num_experts"] == str(E)
                and r["num_tokens"] == str(tokens) and r["moe_tp_size"] == str(tp)
                and r["moe_ep_size"] == "1"):  # fmt: skip
            out[r["distribution"]].append(float(r["latency"]))
    return {k: float(np.median(v)) for k, v in out.items()}


def prefill_parts(d, isl: int) -> tuple[dict[str, float], float]:
    """(ms of one prompt's prefill by kernel group, the serving step model's prefill pass ms)."""
    model, noc, memory, chip, wl, _ = _parts(d, 0.0)
    wl = replace(wl, batch_size=1, output_seq_len=2, input_seq_len=isl)
    got: dict[str, float] = defaultdict(float)
    ctx = {"n": 0}
    half = model.num_layers // 2  # sliding-window and full layers alternate
    gqa, norms, layer, moe = L.gqa_attention, L.norms, G.GpuPricing.layer, G.GpuPricing._moe

    def tap_gqa(p, s, kind, mode, q, kv, T):
        ks = gqa(p, s, kind, mode, q, kv, T)
        if ctx["n"]:
            n = ctx["n"]
            got["qkv+o"] += n * _ms([ks[0], ks[-1]])
            got["elementwise"] += n * _ms(ks[1:-2])
            got["swa attn" if kind.sliding else "full attn"] += n * _ms(ks[-2:-1])
        return ks

    def tap_norms(p, s, T):
        ks = norms(p, s, T)
        if ctx["n"]:
            got["elementwise"] += ctx["n"] * _ms(ks)
        return ks

    def tap_layer(self, s, kind, mode, *a, **k):
        ctx["n"] = (half if kind.sliding else model.num_layers - half) if mode == "prefill" else 0
        try:
            return layer(self, s, kind, mode, *a, **k)
        finally:
            ctx["n"] = 0

    def tap_moe(self, s, T, load):
        ks = moe(self, s, T, load)
        if ctx["n"]:
            got["router"] += ctx["n"] * _ms(ks[:2])
            got["experts"] += ctx["n"] * _ms(ks[2:])
        return ks

    L.gqa_attention, L.norms, G.GpuPricing.layer, G.GpuPricing._moe = (
        tap_gqa, tap_norms, tap_layer, tap_moe)  # fmt: skip
    try:
        plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
        Evaluator(model, noc, memory, wl, chip).evaluate(plan)
    finally:
        L.gqa_attention, L.norms, G.GpuPricing.layer, G.GpuPricing._moe = gqa, norms, layer, moe
    step = step_model(d)
    total = 1e3 * step.prefill_seconds(isl)
    got["host"] = 1e3 * step.eager_host_seconds
    got["rest"] = total - sum(got.values())
    return dict(got), total


def rows_of(gpu: str, engine: str, isl: int):
    """(TP, the latest c4 row) of ``gpu`` / ``engine`` at ``isl``/1024, by TP."""
    rows = read_rows(shipped_serving_csv())
    for tp in (1, 2, 4, 8):
        hits = [r for r in rows if ROW.format(gpu=gpu, engine=engine, isl=isl, tp=tp) in r.id]
        if hits:
            yield tp, hits[-1]


def main(*isls: str) -> int:
    tail = "attn tbl full / swa | experts tbl pl1.2 / bal | c4 TTFT priced / measured"
    print("| GPU engine | ISL | TP | " + " | ".join(COLUMNS) + f" | pass | gemm tbl | {tail} |")
    print("| --- " * 3 + "| ---: " * (len(COLUMNS) + 5) + "|")
    for gpu, engine in GROUPS:
        gemms = gemm_table(gpu)
        for isl in [int(x) for x in isls or ("1024", "8192")]:
            for tp, row in rows_of(gpu, engine, isl):
                d = resolve(row)
                parts, total = prefill_parts(d, isl)
                cells = " | ".join(f"{parts.get(k, 0.0):.1f}" for k in COLUMNS)
                qkv = (HEADS + 2 * KV_HEADS) * HD // tp
                g = 36 * sum(table_ms(gemms, isl, n, k)
                             for n, k in ((qkv, H), (H, HEADS * HD // tp), (E, H)))  # fmt: skip
                kv = "bfloat16" if d.kv_precision in (None, "bf16") else "fp8"
                at = attention_table(gpu, tp, isl, kv)
                attn = "-" if at is None else f"{18 * at[0]:.1f} / {18 * at[1]:.1f}"
                mt = moe_table(gpu, tp, isl)
                moe = (f"{36 * mt['power_law_1.2']:.1f} / {36 * mt['balanced']:.1f}"
                       if "balanced" in mt else "-")  # fmt: skip
                ttft = f"{_price_row(row, {}, {}).ttft_ms:.0f} / {row.measured_ms('ttft_ms'):.0f}"
                print(f"| {gpu[:4]} {engine} | {isl} | {tp} | {cells} | {total:.1f} | {g:.1f} | "
                      f"{attn} | {moe} | {ttft} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
