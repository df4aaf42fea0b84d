"""Decode-range GEMM fits for the GPU profiles' ``gemm_decode`` curves (see ``calibrate``).

The full-range GEMM fit of a format is pulled by its compute-bound rows; where it over-prices the
memory-bound (decode) rows, those rows get their own curve, used for GEMMs of at most
``gemm_decode_max_tokens`` rows (``plena_opt.chip.gpu.perf``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plena_opt.validate.calibrate import DTYPE_BYTES, GEMM_DTYPES, Fit, _col, curve, read_rows

# Decode-range GEMM fits: row counts up to ``DECODE_MAX_M`` (the decode batches the product prices
# as memory-bound). A format gets one where its full-range fit, pulled by the compute-bound rows,
# over-prices these rows by more than ``DECODE_MAX_BIAS`` (median predicted / measured - 1): the
# fp8 fits by 15-33 % on H100, H200 and B200 (bf16 and nvfp4 by at most 9 %).
DECODE_MAX_M = 128
DECODE_MAX_BIAS = 0.10


def gemm_decode_fits(
    folder: Path, system: str, peaks: dict[str, float], bw: float, full: dict[str, Fit]
) -> dict[str, Fit]:
    """Memory-bound GEMM curves (m ≤ ``DECODE_MAX_M``) for the formats whose full-range fit
    ``full`` over-prices those rows; the compute efficiency stays the full-range one (these
    rows do not determine it), bandwidth efficiency, fixed time and blend are refitted."""
    from scipy.optimize import least_squares

    rows = read_rows(folder / f"{system}_gemm_vllm-0.19.0.csv.gz")
    out = {}
    for dtype, fmt in GEMM_DTYPES.items():
        sel = [r for r in rows if r["gemm_dtype"] == dtype and int(r["m"]) <= DECODE_MAX_M]
        if not sel or fmt not in full:
            continue
        m, n, k = _col(sel, "m"), _col(sel, "n"), _col(sel, "k")
        t = _col(sel, "latency") * 1e-3
        flops, nbytes = 2 * m * n * k, DTYPE_BYTES[fmt] * n * k + 2 * (m * k + m * n)
        g = full[fmt].values
        x_full = [g["compute_efficiency"], g["bandwidth_efficiency"], g["fixed_seconds"] * 1e6,
                  g["blend"]]  # fmt: skip
        bias = float(np.median(curve(x_full, flops, nbytes, peaks[fmt], bw) / t)) - 1
        if bias <= DECODE_MAX_BIAS:
            continue
        ce = g["compute_efficiency"]

        def resid(x, ce=ce, flops=flops, nbytes=nbytes, t=t, peak=peaks[fmt]):
            return np.log(curve([ce, *x], flops, nbytes, peak, bw) / t)

        res = least_squares(resid, x_full[1:], bounds=([0.01, 0.0, 1.0], [1, 100, 20]))
        x = [ce, *(float(v) for v in res.x)]
        ape = np.abs(curve(x, flops, nbytes, peaks[fmt], bw) / t - 1)
        data = (
            f"{system}_gemm_vllm-0.19.0.csv.gz gemm_dtype={dtype} m <= {DECODE_MAX_M} (the "
            f"full-range fit over-prices these rows by {100 * bias:.0f} % median; "
            "compute_efficiency kept from it)"
        )
        values = {
            "compute_efficiency": ce,
            "bandwidth_efficiency": round(x[1], 4),
            "fixed_seconds": round(x[2] * 1e-6, 9),
            "blend": round(x[3], 3),
        }
        out[fmt] = Fit(values, data, len(t), float(ape.mean()), float(np.median(ape)))
    return out
