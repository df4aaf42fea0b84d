"""The product's GEMM pricing against the vLLM kernel tables, by GPU, format and M band
(README_serving r16bytes; numbers only, nothing here is used by the product).

``python benchmarks/gemm_bytes_fit.py [KERNELS_DIR]`` prices every row of the H100, H200 and
B200 GEMM tables with ``GpuPerfModel.gemm`` (the built-in profiles, the curve the product picks
for ``m``: ``gemm_decode`` up to ``gemm_decode_max_tokens``, ``gemm`` above; ``fp8_block`` through
``block_scaled()``; weights and activations at ``precision.GPU_BYTES``) and prints a markdown table
of MAPE % / median predicted ÷ measured − 1 % per (GPU, format, M band). It uses only the
``GpuPerfModel`` API, so it runs unchanged on a checkout before and after r16bytes (put that
checkout first on ``PYTHONPATH``): the difference is what the pricing now sees.
"""

from __future__ import annotations

import csv
import gzip
import sys
from pathlib import Path

import numpy as np

from plena_opt.chip.gpu.perf import GpuPerfModel
from plena_opt.chip.gpu.profile import load_gpu_chip
from plena_opt.chip.precision import GPU_BYTES

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4"}
BANDS = ((1, 16), (17, 128), (129, 1023), (1024, 4095), (4096, 1 << 30))


def _model(chip_name: str, fmt: str) -> GpuPerfModel:
    base = fmt.removesuffix("_block")
    fb = GPU_BYTES[base]
    p = GpuPerfModel(load_gpu_chip(chip_name), base, fb.weight, fb.activation, 2.0)
    return p.block_scaled() if fmt.endswith("_block") else p


def _stat(r: np.ndarray) -> str:
    if not r.size:
        return "–"
    return f"{100 * np.mean(np.abs(r - 1)):.1f} / {100 * (np.median(r) - 1):+.1f}"


def main(folder: Path) -> None:
    head = " | ".join(f"M {lo}–{hi}" if hi < 1 << 30 else f"M ≥ {lo}" for lo, hi in BANDS)
    print(f"| GPU | format | {head} | all (rows) |")
    print("| --- | --- |" + " ---: |" * (len(BANDS) + 1))
    for system, chip in SYSTEMS.items():
        with gzip.open(folder / f"{system}_gemm_vllm-0.19.0.csv.gz", "rt", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for dtype, fmt in DTYPES.items():
            sel = [r for r in rows if r["gemm_dtype"] == dtype]
            if not sel:
                continue
            p = _model(chip, fmt)
            m = np.array([int(r["m"]) for r in sel])
            ratio = np.array([float(p.gemm(int(r["m"]), int(r["n"]), int(r["k"])).seconds)
                              / (float(r["latency"]) * 1e-3) for r in sel])  # fmt: skip
            cells = [_stat(ratio[(m >= lo) & (m <= hi)]) for lo, hi in BANDS]
            print(f"| {system[:4]} | {fmt} | " + " | ".join(cells)
                  + f" | {_stat(ratio)} ({len(sel):,}) |")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1] if sys.argv[1:] else "../shared/data/kernels"))
