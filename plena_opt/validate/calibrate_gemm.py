"""Decode-range GEMM fits for the GPU profiles' ``gemm_decode`` curves (see ``calibrate``).

The full-range GEMM fit of a format is pulled by its compute-bound rows; where it over-prices the
memory-bound (decode) rows, those rows get their own curve, used for GEMMs of at most
``gemm_decode_max_tokens`` rows (``plena_opt.chip.gpu.perf``). A format other than
``STREAMING_FORMAT`` always gets one, at the ``STREAMING_FORMAT``'s HBM streaming efficiency
(``streaming_efficiency`` measures each format's on the table, the evidence for the rule).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plena_opt.validate.calibrate import (
    GEMM_DTYPES,
    Fit,
    _col,
    block_peaks,
    curve,
    gemm_nbytes,
    read_rows,
)

# Decode-range GEMM fits: row counts up to ``DECODE_MAX_M`` (the decode batches the product prices
# as memory-bound). A format gets one where its full-range fit, pulled by the compute-bound rows,
# over-prices these rows by more than ``DECODE_MAX_BIAS`` (median predicted / measured - 1): the
# fp8 fits by 15-33 % on H100, H200 and B200 (bf16 and nvfp4 by at most 9 %).
DECODE_MAX_M = 128
DECODE_MAX_BIAS = 0.10
# HBM streaming is a property of the memory system, not of the weight format: the decode-range
# curve of every other format holds the bandwidth efficiency of this format's full-range fit
# (the curve fig09's decode scorecard validates on B200) and fits its own fixed time and blend.
# Evidence (``streaming_efficiency``: t = t0 + bytes / (HBM · e) on the rows m <= 16 whose
# weights give every SM a 128 x 128 tile): on Hopper, whose fp8 kernels are mature, fp8 streams
# as bf16 does (H100 0.846 vs 0.855, H200 0.830 vs 0.837); on B200, vLLM 0.19's fp8 and nvfp4
# kernels reach 0.595 and 0.463 against bf16's 0.798 (no split-K at small m: too few output
# tiles for 148 SMs), which priced a memory-bound fp8 or fp4 decode slower than bf16 (issue
# 24), and which the serving engines do not show: Llama-3.1-70B fp8 at TP 1 on B200 decodes at
# 14.6 ms/token under TensorRT-LLM and 16.3 under vLLM (../shared/data/validation/serving),
# while 70.5 GB of fp8 weights at 0.595 x 8 TB/s alone take 14.8 ms.
STREAMING_FORMAT = "bf16"


def gemm_decode_fits(
    folder: Path, system: str, peaks: dict[str, float], bw: float, full: dict[str, Fit]
) -> dict[str, Fit]:
    """Memory-bound GEMM curves (m ≤ ``DECODE_MAX_M``): for ``STREAMING_FORMAT`` where its
    full-range fit over-prices those rows (bandwidth efficiency, fixed time and blend refitted),
    for every other format always, holding the ``STREAMING_FORMAT`` full-range bandwidth
    efficiency (fixed time and blend refitted). The compute efficiency stays the format's
    full-range one (these rows do not determine it)."""
    from scipy.optimize import least_squares

    rows = read_rows(folder / f"{system}_gemm_vllm-0.19.0.csv.gz")
    peaks = block_peaks(peaks)
    out = {}
    for dtype, fmt in GEMM_DTYPES.items():
        sel = [r for r in rows if r["gemm_dtype"] == dtype and int(r["m"]) <= DECODE_MAX_M]
        if not sel or fmt not in full:
            continue
        m, n, k = _col(sel, "m"), _col(sel, "n"), _col(sel, "k")
        t = _col(sel, "latency") * 1e-3
        flops, nbytes = 2 * m * n * k, gemm_nbytes(fmt, m, n, k)
        g = full[fmt].values
        x_full = [g["compute_efficiency"], g["bandwidth_efficiency"], g["fixed_seconds"] * 1e6,
                  g["blend"]]  # fmt: skip
        bias = float(np.median(curve(x_full, flops, nbytes, peaks[fmt], bw) / t)) - 1
        shared = None
        if fmt != STREAMING_FORMAT and STREAMING_FORMAT in full:
            shared = full[STREAMING_FORMAT].values["bandwidth_efficiency"]
        elif bias <= DECODE_MAX_BIAS:
            continue
        ce = g["compute_efficiency"]

        def full_x(x, ce=ce, shared=shared):
            return [ce, *x] if shared is None else [ce, shared, *x]

        def resid(x, flops=flops, nbytes=nbytes, t=t, peak=peaks[fmt], full_x=full_x):
            return np.log(curve(full_x(x), flops, nbytes, peak, bw) / t)

        lo, hi = [0.01, 0.0, 1.0], [1, 100, 20]
        x0 = x_full[1:] if shared is None else x_full[2:]
        if shared is not None:
            lo, hi = lo[1:], hi[1:]
        res = least_squares(resid, x0, bounds=(lo, hi))
        x = full_x([float(v) for v in res.x])
        ape = np.abs(curve(x, flops, nbytes, peaks[fmt], bw) / t - 1)
        data = (
            f"{system}_gemm_vllm-0.19.0.csv.gz gemm_dtype={dtype} m <= {DECODE_MAX_M} (the "
            f"full-range fit prices these rows {100 * bias:+.0f} % median; "
            "compute_efficiency kept from it"
            + ("" if shared is None else f"; bandwidth_efficiency: gemm.{STREAMING_FORMAT}'s")
            + ")"
        )
        values = {
            "compute_efficiency": ce,
            "bandwidth_efficiency": round(x[1], 4),
            "fixed_seconds": round(x[2] * 1e-6, 9),
            "blend": round(x[3], 3),
        }
        out[fmt] = Fit(values, data, len(t), float(ape.mean()), float(np.median(ape)))
    return out


# Parts on one compute die at one clock (the same datasheet peaks): H100 SXM5 and H200 are both
# GH100 at 989 dense bf16 TFLOP/s (NVIDIA H100 and H200 Tensor Core GPU datasheets, cited in
# the profiles: the H200 adds 141 GB of HBM3e at 4.8 TB/s against 80 GB at 3.35, not compute). What
# the die sets is fitted once on both kernel tables; only the bandwidth term is each table's own
# (its HBM). Per GEMM format: the compute efficiency, the per-kernel fixed time (launch and
# prologue, the same SMs at the same clock) and the blend (how the die overlaps compute with its
# loads). Fitted per table, one die had two compute efficiencies (bf16 0.793 on the H100 table,
# 0.761 on the H200's: an H200 prefill up to 2 % slower) and two fixed times (bf16 3.35 us on
# H100, 3.507 on H200, where the tables put H200's m <= 16 GEMMs at 0.988 x H100's: an H200
# launch-bound decode up to 1.1 % slower; README_serving r13mono, r15h200).
SAME_DIE = (("h100_sxm", "h200_sxm"),)


def _die_x(x, i: int) -> list[float]:
    """The curve constants of the ``i``-th table of a ``SAME_DIE`` pair from the joint vector
    ``x`` = (compute efficiency, fixed time µs, blend, bandwidth efficiency per table)."""
    return [x[0], x[3 + i], x[1], x[2]]


def _arrays(sel: list[dict[str, str]], fmt: str):
    """(FLOPs, bytes, measured seconds) of GEMM rows in weight format ``fmt``."""
    m, n, k = _col(sel, "m"), _col(sel, "n"), _col(sel, "k")
    return 2 * m * n * k, gemm_nbytes(fmt, m, n, k), _col(sel, "latency") * 1e-3


def pooled_gemm_fits(folder: Path, specs: dict[str, tuple[dict[str, float], float]],
                     fits: dict[str, dict[str, Fit]]) -> dict[str, dict[str, Fit]]:  # fmt: skip
    """``fits`` (system → format → full-range fit) with the compute efficiency of each
    ``SAME_DIE`` pair fitted jointly on both tables; ``specs``: system → (peaks, bandwidth)."""
    from scipy.optimize import least_squares

    out = {s: dict(f) for s, f in fits.items()}
    for pair in SAME_DIE:
        if not all(s in fits for s in pair):
            continue
        tables = {s: read_rows(folder / f"{s}_gemm_vllm-0.19.0.csv.gz") for s in pair}
        for dtype, fmt in GEMM_DTYPES.items():
            if not all(fmt in fits[s] for s in pair):
                continue
            arrays = {s: _arrays([r for r in tables[s] if r["gemm_dtype"] == dtype], fmt)
                      for s in pair}  # fmt: skip

            def resid(x, arrays=arrays, fmt=fmt, pair=pair):
                res = []
                for i, s in enumerate(pair):
                    flops, nbytes, t = arrays[s]
                    peaks, bw = specs[s]
                    res.append(np.log(curve(_die_x(x, i), flops, nbytes, peaks[fmt], bw) / t))
                return np.concatenate(res)

            v0 = fits[pair[0]][fmt].values
            x0 = [v0["compute_efficiency"], v0["fixed_seconds"] * 1e6, v0["blend"]]
            x0 += [fits[s][fmt].values["bandwidth_efficiency"] for s in pair]
            lo, hi = [0.01, 0.0, 1.0] + [0.01] * len(pair), [1, 100, 20] + [1] * len(pair)
            x = least_squares(resid, x0, bounds=(lo, hi)).x
            for i, s in enumerate(pair):
                xs = [float(v) for v in _die_x(x, i)]
                flops, nbytes, t = arrays[s]
                ape = np.abs(curve(xs, flops, nbytes, specs[s][0][fmt], specs[s][1]) / t - 1)
                data = (
                    f"{fits[s][fmt].data} (compute_efficiency, fixed_seconds and blend fitted "
                    + "jointly with the "
                    + f"{' and '.join(p for p in pair if p != s)} table: one GH100 die)"
                )
                names = ("compute_efficiency", "bandwidth_efficiency", "fixed_seconds", "blend")
                scaled = (xs[0], xs[1], xs[2] * 1e-6, xs[3])
                values = {k: round(v, 9 if k == "fixed_seconds" else 4 if k != "blend" else 3)
                          for k, v in zip(names, scaled, strict=True)}  # fmt: skip
                out[s][fmt] = Fit(values, data, len(t), float(ape.mean()), float(np.median(ape)))
    return out


def pooled_decode_fits(folder: Path, specs: dict[str, tuple[dict[str, float], float]],
                       decode: dict[str, dict[str, Fit]]) -> dict[str, dict[str, Fit]]:  # fmt: skip
    """``decode`` (system → format → ``gemm_decode_fits`` curve) with the fixed time and blend of
    each format both tables of a ``SAME_DIE`` pair have refitted jointly on both tables' rows
    ``m ≤ DECODE_MAX_M``; compute and bandwidth efficiencies stay each curve's (the bandwidth
    one is each table's own HBM)."""
    from scipy.optimize import least_squares

    out = {s: dict(f) for s, f in decode.items()}
    for pair in SAME_DIE:
        if not all(s in decode for s in pair):
            continue
        tables = {s: read_rows(folder / f"{s}_gemm_vllm-0.19.0.csv.gz") for s in pair}
        for dtype, fmt in GEMM_DTYPES.items():
            if not all(fmt in decode[s] for s in pair):
                continue
            arrays = {s: _arrays([r for r in tables[s] if r["gemm_dtype"] == dtype
                                  and int(r["m"]) <= DECODE_MAX_M], fmt) for s in pair}  # fmt: skip
            own = {s: decode[s][fmt].values for s in pair}

            def full_x(x, s, own=own):
                return [own[s]["compute_efficiency"], own[s]["bandwidth_efficiency"], *x]

            def resid(x, arrays=arrays, fmt=fmt, pair=pair, full_x=full_x):
                res = []
                for s in pair:
                    flops, nbytes, t = arrays[s]
                    peak = block_peaks(specs[s][0])[fmt]
                    res.append(np.log(curve(full_x(x, s), flops, nbytes, peak, specs[s][1]) / t))
                return np.concatenate(res)

            x0 = [own[pair[0]]["fixed_seconds"] * 1e6, own[pair[0]]["blend"]]
            x = [float(v) for v in least_squares(resid, x0, bounds=([0.0, 1.0], [100, 20])).x]
            for s in pair:
                flops, nbytes, t = arrays[s]
                peak = block_peaks(specs[s][0])[fmt]
                ape = np.abs(curve(full_x(x, s), flops, nbytes, peak, specs[s][1]) / t - 1)
                others = " and ".join(p for p in pair if p != s)
                data = (f"{decode[s][fmt].data} (fixed_seconds and blend fitted jointly with the "
                        f"{others} table: one GH100 die)")  # fmt: skip
                values = {**own[s], "fixed_seconds": round(x[0] * 1e-6, 9), "blend": round(x[1], 3)}
                out[s][fmt] = Fit(values, data, len(t), float(ape.mean()), float(np.median(ape)))
    return out


# Streaming SMs (datasheet counts) for ``streaming_efficiency``: H100 SXM5 and H200 (GH100) 132
# (NVIDIA H100 Tensor Core GPU Architecture whitepaper); B200 148, 74 on each of two dies (Chips
# and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025).
SMS = {"h100_sxm": 132, "h200_sxm": 132, "b200_sxm": 148}
STREAMING_TILE = 128  # output tile edge of the GEMM kernels (128 x 128)
STREAMING_MAX_M = 16  # rows at which every format's GEMM is weight-streaming


def streaming_efficiency(folder: Path, system: str, dtype: str, bw: float) -> float:
    """The HBM efficiency at which ``system``'s ``dtype`` GEMM kernels stream weights: the
    least-squares (log error) ``e`` of ``t = t0 + bytes / (bw · e)`` over the rows with
    ``m ≤ STREAMING_MAX_M`` whose ``n × k`` weights give every SM a ``STREAMING_TILE``² tile."""
    from scipy.optimize import least_squares

    fmt = GEMM_DTYPES[dtype]
    tiles = SMS[system] * STREAMING_TILE**2
    sel = [r for r in read_rows(folder / f"{system}_gemm_vllm-0.19.0.csv.gz")
           if r["gemm_dtype"] == dtype and int(r["m"]) <= STREAMING_MAX_M
           and int(r["n"]) * int(r["k"]) >= tiles]  # fmt: skip
    _, nbytes, t = _arrays(sel, fmt)
    res = least_squares(lambda x: np.log((x[1] * 1e-6 + nbytes / (bw * x[0])) / t), [0.7, 5.0],
                        bounds=([0.01, 0.0], [1.0, 100.0]))  # fmt: skip
    return float(res.x[0])


# Tensor-core rate floor: Hopper and Blackwell tensor cores run dense fp8 at twice the bf16 rate
# (the profiles' ``peak_flops``, NVIDIA datasheets), and mature fp8 kernels reach it: on the
# H100/H200 tables fp8 achieves 0.716 of its peak against bf16's 0.776 (1.42 vs 0.77 PFLOP/s).
# On B200, vLLM 0.19's per-tensor fp8 GEMM achieves no more FLOP/s than bf16 (full-range fit
# 0.31 x 4.5 = 1.39 PFLOP/s against bf16's 0.72 x 2.25 = 1.62; m = n = k = 8192: 1.06 PFLOP/s
# fp8, 1.55 bf16): a library kernel that does not use the format's faster tensor-core path, not
# a cost of the chip (its fp8_block and nvfp4 kernels on the same table reach 1.84 and 4.4). The
# serving engines do not show it: priced with it, the 8x B200 Llama-3.1-70B fp8 rows (prompt
# chunks share the decode steps) were +11 % (vLLM) and +28 % (TensorRT-LLM) slow in TPOT
# (../shared/data/validation/serving). A format whose full-range fit achieves fewer FLOP/s than
# the same chip's ``TENSOR_RATE_FORMAT`` fit takes that fit's compute efficiency at its own peak;
# its bandwidth efficiency, fixed time and blend stay its own fit. On the shipped tables this
# moves B200 fp8 only (and the chips that take B200's curves: B300, GB200, GB300).
TENSOR_RATE_FORMAT = "bf16"


def tensor_rate_fits(peaks: dict[str, float], full: dict[str, Fit]) -> dict[str, Fit]:
    """``full`` (format → full-range fit) with the tensor-core rate floor applied (see
    ``TENSOR_RATE_FORMAT``); ``peaks``: FLOP/s per format."""
    ref = full.get(TENSOR_RATE_FORMAT)
    if ref is None:
        return dict(full)
    ce = ref.values["compute_efficiency"]
    floor = ce * peaks[TENSOR_RATE_FORMAT]  # achieved FLOP/s of the reference format
    out = dict(full)
    for fmt, fit in full.items():
        rate = fit.values["compute_efficiency"] * block_peaks(peaks)[fmt]
        if fmt == TENSOR_RATE_FORMAT or rate >= floor:
            continue
        data = (f"{fit.data}; compute_efficiency = gemm.{TENSOR_RATE_FORMAT}'s {ce} (the "
                f"fit's {fit.values['compute_efficiency']} x peak = {rate / 1e15:.2f} PFLOP/s is "
                f"below {TENSOR_RATE_FORMAT}'s {floor / 1e15:.2f}: tensor-core rate floor, "
                "plena_opt.validate.calibrate_gemm.TENSOR_RATE_FORMAT; the residuals are its own "
                "fit's)")  # fmt: skip
        out[fmt] = Fit({**fit.values, "compute_efficiency": ce}, data, fit.rows, fit.mape,
                       fit.median_ape)  # fmt: skip
    return out
