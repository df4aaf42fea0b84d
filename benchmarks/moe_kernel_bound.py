"""How much of each fig09 MoE decode step the measured vLLM 0.19.0 kernels alone already take.

Run ``python benchmarks/moe_kernel_bound.py [../shared/data/kernels]``. For Qwen3-235B-A22B and
DeepSeek-V3 at each fig09 batch it sums, per decode step, only two measured terms: the fused-MoE
layer (``b200_sxm_moe_vllm-0.19.0.csv.gz``, vllm_fused_moe, TP 8, the model's power-law
distribution and weight format) over the MoE layers, and the two TP all-reduces per layer from
the ``hgx-b200x8`` measured table. Attention, the dense GEMMs and the norms come on top, so a
share near or above 100 % of the measured step means those kernels cannot reproduce the
measurement whatever their constants.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from deepstack import load_noc_profile

from plena_opt.validate.calibrate import read_rows
from plena_opt.validate.scorecard import fig09_measurements

# model: hidden, expert inter size, top-k, experts, MoE dtype, distribution, MoE layers, layers
MODELS = {
    "qwen3-235b-a22b": (4096, 1536, 8, 128, "bfloat16", "power_law_1.2", 94, 94),
    "deepseek-v3": (7168, 2048, 8, 256, "fp8_block", "power_law_1.01", 58, 61),
}


def main(folder: str = "../shared/data/kernels") -> int:
    rows = read_rows(Path(folder) / "b200_sxm_moe_vllm-0.19.0.csv.gz")
    ar = load_noc_profile("hgx-b200x8").measured_allreduce.table(8)
    meas = fig09_measurements()
    print("| model | BS | measured step ms | fused MoE ms | all-reduce ms | share of step |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, (h, f, k, e, dtype, dist, n_moe, n_layers) in MODELS.items():
        table: dict[int, float] = defaultdict(float)
        for r in rows:
            shape = (int(r["hidden_size"]), int(r["inter_size"]), int(r["topk"]))
            if (
                r["kernel_source"] == "vllm_fused_moe"
                and shape == (h, f, k)
                and int(r["num_experts"]) == e
                and (r["moe_dtype"], r["distribution"]) == (dtype, dist)
                and (r["moe_tp_size"], r["moe_ep_size"]) == ("8", "1")
            ):
                table[int(r["num_tokens"])] = float(r["latency"]) * 1e-3
        for bs, tps in meas[model]:
            step = bs / tps
            moe = n_moe * table[bs]
            comm = 2 * n_layers * ar.seconds_at(bs * h * 2)
            print(
                f"| {model} | {bs} | {step * 1e3:.2f} | {moe * 1e3:.2f} | {comm * 1e3:.2f} | "
                f"{100 * (moe + comm) / step:.0f} % |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
