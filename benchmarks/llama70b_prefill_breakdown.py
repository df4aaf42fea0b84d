"""Where a Llama-3.1-70B prompt's prefill goes on H100 and B200 (vLLM; issue 23, r15llama).

Run ``python benchmarks/llama70b_prefill_breakdown.py [ISL ...]`` (default 1024 and 8192). For
each InferenceX vLLM c4 row of the shipped file (fp8, output 1k) at TP 2, 4 and 8 on H100 and
B200 it resolves the row as ``validate --measurements`` does, taps the GPU pricer's kernel lists
of one static prefill pass of one prompt and prints milliseconds by kernel group over the 80
layers (QKV / O / gate-up / down GEMMs, flash attention, elementwise: RoPE, KV write, norms,
activation), the rest of the pass (all-reduces, host, extras: the whole pass minus the kernels)
the eager host time (``estimate.gpu_host``), the rest of the prefill pass (its 160 TP all-reduces
and the embedding / LM-head extras: the pass minus kernels and host), the pass itself
(``StepModel.prefill_seconds``), the same four GEMM shapes read from the measured vLLM GEMM table
of the row's format (``tests/shared/data/kernels``, bilinear in n and k between the table's sizes),
160 all-reduces of ``ISL × 8192`` bf16 elements from the measured vLLM custom all-reduce table
(CUDA-graph rows) and the row's measured c4 TTFT (the pass plus the wait). Numbers only; nothing
is fitted.
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
from plena_opt.validate.serving_score import _parts, shipped_serving_csv, step_model

KERNELS = Path(__file__).resolve().parent.parent / "tests/shared/data/kernels"

ROW = "llama_3_1_70b_{gpu}_vllm_fp8_agg_{isl}x1024_c4_tp{tp}_"
COLUMNS = ("qkv", "o", "gate_up", "down", "attention", "elementwise", "host", "all-reduce + rest")


def gemm_table(gpu: str, dtype: str) -> dict[tuple[int, int, int], float]:
    """(m, n, k) → ms of the measured vLLM GEMM table of ``gpu`` in ``dtype``."""
    with gzip.open(KERNELS / f"{gpu}_gemm_vllm-0.19.0.csv.gz", "rt") as f:
        return {(int(r["m"]), int(r["n"]), int(r["k"])): float(r["latency"])
                for r in csv.DictReader(f) if r["gemm_dtype"] == dtype}  # fmt: skip


def table_ms(t: dict[tuple[int, int, int], float], m: int, n: int, k: int) -> float:
    """The table at (m, n, k), linear in n and k between its measured sizes (m measured)."""
    ns, ks = sorted({x[1] for x in t}), sorted({x[2] for x in t})

    def around(v: int, grid: list[int]) -> list[tuple[int, float]]:
        if v in grid:
            return [(v, 1.0)]
        lo, hi = max(x for x in grid if x < v), min(x for x in grid if x > v)
        w = (v - lo) / (hi - lo)
        return [(lo, 1.0 - w), (hi, w)]

    return sum(a * b * t[(m, x, y)] for x, a in around(n, ns) for y, b in around(k, ks))


def allreduce_ms(gpu: str, devices: int, elements: int) -> float:
    """One bf16 all-reduce of ``elements`` (the table's CUDA-graph rows, next size up)."""
    with gzip.open(KERNELS / f"{gpu}_custom_allreduce_vllm-0.19.0.csv.gz", "rt") as f:
        rows = [(int(r["message_size"]), float(r["latency"])) for r in csv.DictReader(f)
                if r["backend"] == "vllm_graph" and int(r["num_gpus"]) == devices]  # fmt: skip
    return next((s for n, s in sorted(rows) if n >= elements), max(rows)[1])


def llama_gemms(tp: int) -> list[tuple[int, int]]:
    """(n, k) of Llama-3.1-70B's QKV, O, gate-up and down GEMMs at TP ``tp``."""
    return [(10240 // tp, 8192), (8192, 8192 // tp), (57344 // tp, 8192), (8192, 28672 // tp)]


def _ms(ks) -> float:
    return 1e3 * float(sum(np.mean(np.asarray(k.seconds)) for k in ks))


def prefill_parts(d, isl: int) -> tuple[dict[str, float], float]:
    """(ms of one prompt's prefill by kernel group, the evaluator's whole prefill pass ms)."""
    model, noc, memory, chip, wl, _ = _parts(d, 0.0)
    wl = replace(wl, batch_size=1, output_seq_len=2, input_seq_len=isl)
    got: dict[str, float] = defaultdict(float)
    ctx = {"n": 0}
    gqa, ffn, norms, layer = L.gqa_attention, L.dense_ffn, L.norms, G.GpuPricing.layer

    def tap_gqa(p, s, kind, mode, q, kv, T):
        ks = gqa(p, s, kind, mode, q, kv, T)
        if ctx["n"]:
            n = ctx["n"]
            got["qkv"] += n * _ms(ks[:1])
            got["elementwise"] += n * _ms(ks[1:-2])
            got["attention"] += n * _ms(ks[-2:-1])
            got["o"] += n * _ms(ks[-1:])
        return ks

    def tap_ffn(p, s, T, width):
        ks = ffn(p, s, T, width)
        if ctx["n"] and ks:
            got["gate_up"] += ctx["n"] * _ms(ks[:1])
            got["elementwise"] += ctx["n"] * _ms(ks[1:2])
            got["down"] += ctx["n"] * _ms(ks[2:])
        return ks

    def tap_norms(p, s, T):
        ks = norms(p, s, T)
        if ctx["n"]:
            got["elementwise"] += ctx["n"] * _ms(ks)
        return ks

    def tap_layer(self, s, kind, mode, *a, **k):
        ctx["n"] = model.num_layers if mode == "prefill" else 0
        try:
            return layer(self, s, kind, mode, *a, **k)
        finally:
            ctx["n"] = 0

    taps = (tap_gqa, tap_ffn, tap_norms, tap_layer)
    L.gqa_attention, L.dense_ffn, L.norms, G.GpuPricing.layer = taps
    try:
        plan = Plan(tp=d.tp, ep=d.ep)
        res = Evaluator(model, noc, memory, wl, chip).evaluate(plan)
    finally:
        L.gqa_attention, L.dense_ffn, L.norms, G.GpuPricing.layer = gqa, ffn, norms, layer
    del res  # the taps read its prefill pass; the figures below are the serving step model's
    step = step_model(d)
    total = 1e3 * step.prefill_seconds(isl)
    got["host"] = 1e3 * step.eager_host_seconds
    got["all-reduce + rest"] = total - sum(got.values())
    return dict(got), total


def main(*isls: str) -> int:
    rows = read_rows(shipped_serving_csv())
    print("| GPU | ISL | TP | " + " | ".join(COLUMNS) + " | pass | GEMMs priced / table | "
          "all-reduces, table | measured c4 TTFT |")  # fmt: skip
    print("| --- " * 3 + "| ---: " * (len(COLUMNS) + 4) + "|")
    for gpu in ("h100_sxm", "b200_sxm"):
        table = gemm_table(gpu, "fp8")
        for isl in [int(x) for x in isls or ("1024", "8192")]:
            for tp in (1, 2, 4, 8):
                row = next((r for r in rows if ROW.format(gpu=gpu, isl=isl, tp=tp) in r.id), None)
                if row is None:
                    continue
                d = resolve(row)
                parts, total = prefill_parts(d, isl)
                cells = " | ".join(f"{parts.get(k, 0.0):.1f}" for k in COLUMNS)
                priced = sum(parts[k] for k in ("qkv", "o", "gate_up", "down"))
                n_layers = 80
                measured = n_layers * sum(table_ms(table, isl, n, k) for n, k in llama_gemms(tp))
                ar = 2 * n_layers * allreduce_ms(gpu, tp, isl * 8192) if tp > 1 else 0.0
                ttft = row.measured_ms("ttft_ms")
                print(f"| {gpu[:4]} | {isl} | {tp} | {cells} | {total:.1f} | {priced:.1f} / "
                      f"{measured:.1f} | {ar:.1f} | {ttft:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
