"""Where a gpt-oss-120b decode step goes on H100 (vLLM, MXFP4 experts run weight-only).

Run ``python benchmarks/oss_step_breakdown.py [TP [BATCH [SYSTEM [ENGINE]]]]`` (default TP 8,
batch 4, h100_sxm, vllm: the shipped file's InferenceX 1k/1k c4 row, measured TPOT 3.64 ms;
``b200_sxm vllm`` / ``b200_sxm trtllm`` price the B200 rows as they run, r15oss). It resolves
the row as ``validate --measurements`` does (``serving_rows.resolve``), taps the GPU pricer's
kernel lists of one decode step at the mean KV length and prints milliseconds per step by kernel
group (attention half:
QKV GEMM, RoPE, KV write, attention, O GEMM; norms; router GEMM + top-k; fused MoE; embedding +
LM head + sampling; the TP all-reduces) twice: with the experts on the table's ``moe.mxfp4``
curve (AIConfigurator's ``vllm_mxfp4_moe`` rows, vLLM's default SM90 backend: Triton
``matmul_ogs``) and on Marlin, which the row's recipe runs (``VLLM_MXFP4_USE_MARLIN=1``;
``chip.gpu.perf.MARLIN_MOE_NOTE``). Numbers only; nothing is fitted here.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

from plena_opt.estimate import Evaluator, Plan
from plena_opt.estimate import gpu as G
from plena_opt.estimate import gpu_layers as L
from plena_opt.validate.serving_rows import read_rows, resolve
from plena_opt.validate.serving_score import _parts, shipped_serving_csv

ROW = "_1024x1024_c4_tp{tp}_ep1_"  # InferenceX 1k/1k c4 rows of gpt-oss-120b on H100 vLLM
GROUPS = ("gqa_attention", "norms", "router GEMM + top-k", "fused MoE", "extras", "all-reduces")


def _sec(ks) -> float:
    return float(sum(np.mean(np.asarray(k.seconds)) for k in ks))


def step_parts(d, batch: int) -> tuple[dict[str, float], float]:
    """(ms per decode step by kernel group, the evaluator's step ms) of deployment ``d``."""
    model, noc, memory, chip, wl, _ = _parts(d, 0.0)
    wl = replace(wl, batch_size=batch)
    got: dict[str, float] = defaultdict(float)
    ctx = {"n": 0}  # layers the current decode layer call stands for (0: not a decode call)
    half = model.num_layers // 2  # gpt-oss: sliding-window and full attention layers alternate
    saved = {n: getattr(L, n) for n in ("gqa_attention", "norms")}
    layer, moe, extras = G.GpuPricing.layer, G.GpuPricing._moe, G.GpuPricing.extras

    def tap(name, fn):
        def f(*a, **k):
            ks = fn(*a, **k)
            got[name] += ctx["n"] * _sec(ks)
            return ks

        return f

    def tap_layer(self, s, kind, mode, *a):
        ctx["n"] = (half if kind.sliding else model.num_layers - half) if mode == "decode" else 0
        try:
            return layer(self, s, kind, mode, *a)
        finally:
            ctx["n"] = 0

    def tap_moe(self, s, T, load):
        ks = moe(self, s, T, load)
        got["router GEMM + top-k"] += ctx["n"] * _sec(ks[:2])
        got["fused MoE"] += ctx["n"] * _sec(ks[2:])
        return ks

    def tap_extras(self, s, mode, q, steps, *a):
        out = extras(self, s, mode, q, steps, *a)
        if mode == "decode":  # summed over the decode's steps: per step
            for sa in (x for v in out.values() for x in v):
                got["extras"] += G.busy_seconds(sa) / wl.output_seq_len
        return out

    for n, fn in saved.items():
        setattr(L, n, tap(n, fn))
    G.GpuPricing.layer, G.GpuPricing._moe, G.GpuPricing.extras = tap_layer, tap_moe, tap_extras
    try:
        plan = Plan(tp=d.tp, ep=d.ep, moe_tp_mode=d.moe_tp_mode, moe_tp=d.moe_tp)
        res = Evaluator(model, noc, memory, wl, chip).evaluate(plan)
    finally:
        for n, fn in saved.items():
            setattr(L, n, fn)
        G.GpuPricing.layer, G.GpuPricing._moe, G.GpuPricing.extras = layer, moe, extras
    got["all-reduces"] = sum(v for k, v in res.attribution.items() if "all_reduce" in k)
    return {k: 1e3 * got[k] for k in GROUPS}, 1e3 / res.tps_per_sequence


def main(tp: str = "8", batch: str = "4", system: str = "h100_sxm", engine: str = "vllm") -> int:
    """Print the step of the 1k/1k c4 row of ``system`` (``h100_sxm``, ``b200_sxm``) and
    ``engine`` at decode batch ``batch``, with the measured TPOT of the 1k/1k row at that
    concurrency where the file has one."""
    tag = f"gpt_oss_120b_{system}_{engine}_"
    rows = [r for r in read_rows(shipped_serving_csv())
            if tag in r.id and ROW.format(tp=tp) in r.id]  # fmt: skip
    row = rows[0]
    at = next((r for r in read_rows(shipped_serving_csv())
               if tag in r.id
               and ROW.format(tp=tp).replace("_c4_", f"_c{batch}_") in r.id), row)  # fmt: skip
    d = resolve(row)
    print(
        f"{at.id}: TP {d.tp}, decode batch {batch}, measured TPOT "
        f"{at.measured_ms('tpot_ms'):.2f} ms (per-step ms; MoE: 36 layers)"
    )
    print("| experts priced as | " + " | ".join(GROUPS) + " | step |")
    print("| --- " * (len(GROUPS) + 2) + "|")
    runs = (("table moe.mxfp4 (Triton)", False), ("Marlin", True)) if d.marlin_moe else (
        ("as priced", False),)  # fmt: skip
    for name, marlin in runs:
        parts, step = step_parts(replace(d, marlin_moe=marlin), int(batch))
        print(f"| {name} | " + " | ".join(f"{parts[k]:.3f}" for k in GROUPS) + f" | {step:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
