"""Is NVFP4 prefill priced too fast on B200? Measured fp4 vs fp8 kernels against the chip profile.

Reads the shipped B200 kernel tables (``/work/shared/data/kernels`` or ``--kernels``) and prints:

1. GEMM, by M band (shapes with n, k >= 1024 measured in both formats): the measured fp8 / fp4
   time ratio, the priced one (``GpuPerfModel.gemm`` on ``chip.gpu.profiles/b200.json``), and
   measured / priced per format;
2. the fp4 full-range GEMM curve refitted on the rows it prices (m > gemm_decode_max_tokens) and
   on m >= 1024 only (``plena_opt.validate.calibrate.fit_curve``), with the median measured /
   priced at m >= 1024;
3. fused MoE at DeepSeek-V3's shape (h 7168, expert inter 2048, top-8 of 256, balanced) over
   prefill token counts at TP 4 / 8: measured nvfp4 (``vllm_flashinfer_trtllm_moe_fp4``) vs
   fp8_block (``vllm_fused_moe``) and the priced ``fused_moe``.

Usage: ``python benchmarks/fp4_prefill_tables.py [--kernels DIR]`` (benchmarks/README_serving.md,
r12fp4).
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import statistics as st
from pathlib import Path

import numpy as np

from plena_opt.chip.gpu.perf import GpuPerfModel
from plena_opt.chip.gpu.profile import load_gpu_chip
from plena_opt.chip.precision import GPU_BYTES
from plena_opt.validate import calibrate as C

DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}
BANDS = ((1, 128), (129, 512), (513, 1023), (1024, 2048), (2049, 4096), (4097, 8192),
         (8193, 16384))  # fmt: skip

MOE_KEYS = ("hidden_size", "inter_size", "topk", "num_experts", "moe_ep_size", "distribution")


def models() -> dict[str, GpuPerfModel]:
    chip = load_gpu_chip("b200")
    return {f: GpuPerfModel(chip, f, GPU_BYTES[f].weight, GPU_BYTES[f].activation, 2.0)
            for f in ("fp8", "fp4")}  # fmt: skip


def gemm_bands(folder: Path, pm: dict[str, GpuPerfModel]) -> None:
    table: dict[tuple[int, int, int], dict[str, float]] = collections.defaultdict(dict)
    with gzip.open(folder / "b200_sxm_gemm_vllm-0.19.0.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            if r["gemm_dtype"] in DTYPES:
                key = (int(r["m"]), int(r["n"]), int(r["k"]))
                table[key][DTYPES[r["gemm_dtype"]]] = float(r["latency"]) * 1e-3
    print("GEMM M band | shapes | meas fp8/fp4 | priced fp8/fp4 | fp4 meas/priced | "
          "fp8 meas/priced | fp4 achieved TFLOP/s (medians)")  # fmt: skip
    for lo, hi in BANDS:
        cols: list[list[float]] = [[], [], [], [], []]
        for (m, n, k), d in table.items():
            if lo <= m <= hi and n >= 1024 and k >= 1024 and "fp4" in d and "fp8" in d:
                p4 = float(pm["fp4"].gemm(m, n, k).seconds)
                p8 = float(pm["fp8"].gemm(m, n, k).seconds)
                vals = (d["fp8"] / d["fp4"], p8 / p4, d["fp4"] / p4, d["fp8"] / p8,
                        2 * m * n * k / d["fp4"] / 1e12)  # fmt: skip
                for c, v in zip(cols, vals, strict=True):
                    c.append(v)
        print(f"{lo}-{hi} | {len(cols[0])} | " + " | ".join(f"{st.median(c):.2f}" for c in cols))


def fp4_refit(folder: Path) -> None:
    rows = C.read_rows(folder / "b200_sxm_gemm_vllm-0.19.0.csv.gz")
    for lo in (1, 129, 1024):
        sel = [r for r in rows if r["gemm_dtype"] == "nvfp4" and int(r["m"]) >= lo]
        m, n, k = C._col(sel, "m"), C._col(sel, "n"), C._col(sel, "k")
        t = C._col(sel, "latency") * 1e-3
        flops, nbytes = 2 * m * n * k, C.gemm_nbytes("fp4", m, n, k)
        fit = C.fit_curve(flops, nbytes, t, 9e15, 8e12, "r12fp4")
        v = fit.values
        x = np.array([v["compute_efficiency"], v["bandwidth_efficiency"],
                      v["fixed_seconds"] * 1e6, v["blend"]])  # fmt: skip
        big = m >= 1024
        ratio = float(np.median(t[big] / C.curve(x, flops, nbytes, 9e15, 8e12)[big]))
        print(f"fp4 GEMM fit on m >= {lo}: {len(sel)} rows, {v}; m >= 1024 meas/priced {ratio:.3f}")


def moe_rows(folder: Path, pm: dict[str, GpuPerfModel]) -> None:
    table: dict[tuple[int, int], dict[str, float]] = collections.defaultdict(dict)
    with gzip.open(folder / "b200_sxm_moe_vllm-0.19.0.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            if tuple(r[c] for c in MOE_KEYS) == ("7168", "2048", "8", "256", "1", "balanced"):
                key = (int(r["num_tokens"]), int(r["moe_tp_size"]))
                table[key][r["moe_dtype"]] = float(r["latency"]) * 1e-3
    print("MoE tokens TP | meas fp4 / fp8_block us | priced fp4 / fp8_block us | "
          "fp8_block/fp4 meas, priced | fp4 meas/priced")  # fmt: skip
    for (n, tp), d in sorted(table.items()):
        if n < 1024 or tp not in (4, 8) or "nvfp4" not in d or "fp8_block" not in d:
            continue
        pairs, f = n * 8.0, 2048 // tp
        p4 = float(pm["fp4"].fused_moe(n, pairs, 256, 7168, f).seconds)
        p8 = float(pm["fp8"].fused_moe(n, pairs, 256, 7168, f, block_scaled=True).seconds)
        m4, m8 = d["nvfp4"], d["fp8_block"]
        print(f"{n} {tp} | {m4 * 1e6:.0f} / {m8 * 1e6:.0f} | {p4 * 1e6:.0f} / {p8 * 1e6:.0f} | "
              f"{m8 / m4:.2f}, {p8 / p4:.2f} | {m4 / p4:.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=Path, default=Path("/work/shared/data/kernels"))
    folder = ap.parse_args().kernels
    pm = models()
    gemm_bands(folder, pm)
    fp4_refit(folder)
    moe_rows(folder, pm)


if __name__ == "__main__":
    main()
