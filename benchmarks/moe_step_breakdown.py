"""Why the MoE models' fig09 decode steps are off: our kernels of one step against the kernel data.

Run ``python benchmarks/moe_step_breakdown.py [../shared/data/kernels]``. For Qwen3-235B-A22B and
DeepSeek-V3 at every fig09 batch (8x B200, TP 8, graph mode) it prints the measured decode step
(BS / ``System Decode TPS``), the evaluator's step, the evaluator's fused-MoE layer (the chip's
fitted ``moe`` curve at the ``power_law`` experts-hit count), the measured fused-MoE layer of
the kernel table at the same token count (``vllm_fused_moe``, TP 8, the model's power-law rows
and weight format), and the fused-MoE time per MoE layer that would make the evaluator's step
equal the measured one with every other kernel unchanged (``implied``). Where ``implied`` is far
below the kernel table, no fused-MoE constant fitted on these kernels can reproduce the step.
Numbers only; nothing is fitted here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from plena_opt.estimate import Evaluator
from plena_opt.estimate import gpu as G
from plena_opt.validate.calibrate import read_rows
from plena_opt.validate.scorecard import _fig09_setup, fig09_measurements

# model: (hidden, expert inter size, top-k, experts), MoE dtype, distribution, MoE layers
MODELS = {
    "qwen3-235b-a22b": ((4096, 1536, 8, 128), "bfloat16", "power_law_1.2", 94),
    "deepseek-v3": ((7168, 2048, 8, 256), "fp8_block", "power_law_1.01", 58),
}
KEYS = ("hidden_size", "inter_size", "topk", "num_experts")


def kernel_table(folder: Path, shape, dtype: str, dist: str) -> dict[int, float]:
    """num_tokens → measured fused-MoE seconds (TP 8, EP 1) for one model's layer."""
    out = {}
    for r in read_rows(folder / "b200_sxm_moe_vllm-0.19.0.csv.gz"):
        if (
            r["kernel_source"] == "vllm_fused_moe"
            and tuple(int(r[k]) for k in KEYS) == shape
            and (r["moe_dtype"], r["distribution"]) == (dtype, dist)
            and (r["moe_tp_size"], r["moe_ep_size"]) == ("8", "1")
        ):
            out[int(r["num_tokens"])] = float(r["latency"]) * 1e-3
    return out


def priced_step(model: str, batch: int) -> tuple[float, float]:
    """(evaluator decode step seconds, its fused-MoE seconds per MoE layer at ``batch`` tokens)."""
    seen: list[tuple[int, float]] = []
    original = G.GpuPricing._moe

    def record(self, s, T, load):  # noqa: ANN001, ANN202 - a read-only tap on the pricing
        ks = original(self, s, T, load)
        seen.append((T, float(np.mean(np.asarray(ks[-1].seconds)))))
        return ks

    G.GpuPricing._moe = record
    try:
        m, noc, memory, wl, chip, plan = _fig09_setup(model, batch)
        tps = Evaluator(m, noc, memory, wl, chip).evaluate(plan).tps
    finally:
        G.GpuPricing._moe = original
    return batch / tps, next(t for n, t in seen if n == batch)


def main(folder: str = "../shared/data/kernels") -> int:
    meas = fig09_measurements()
    print("| model | BS | measured step ms | predicted step ms | our fused MoE µs | "
          "kernel table µs | implied µs |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model, (shape, dtype, dist, n_moe) in MODELS.items():
        table = kernel_table(Path(folder), shape, dtype, dist)
        for bs, tps in meas[model]:
            step, ours = priced_step(model, bs)
            implied = ours - (step - bs / tps) / n_moe
            print(f"| {model} | {bs} | {bs / tps * 1e3:.2f} | {step * 1e3:.2f} | {ours * 1e6:.0f} "
                  f"| {table[bs] * 1e6:.0f} | {implied * 1e6:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
