"""The local-attention decode step's extra time once the KV is longer than the window.

A sliding-window decode query attends its last ``window`` keys, so the decode curve is read at
``min(kv, window)`` keys (``gpu_layers.attended``). The kernel tables (vLLM 0.19.0's FlashAttention
decode, ``<sys>_generation_attention_vllm-0.19.0.csv.gz``, ``window_size`` > 0) show that a
windowed decode whose KV has grown past the window costs a few microseconds more than the same
kernel within it, flat in the KV length (H100, head dim 64, 4 sequences of 8 query / 1 KV head:
8.5 us up to 128 keys, 13.4 us from 256 to 131,072). The curve fitted on the ``window_size = 0``
rows (``calibrate._attention_fit``) misses it. ``fit_window_seconds`` measures it as one named
constant per chip, ``attention_decode.window_seconds``: the median over the table's windowed rows
with KV longer than the window of (measured − the chip's decode curve at the window's keys).
A median, not a least-squares fit: one number per chip, read off the rows. A chip whose table
has no windowed rows keeps no extra (the field is absent), and so does one whose windowed rows
grow with the KV length like a full read (``GROWS_AS_FULL_READ``: the H200 table's windowed rows
go from 10 us at 256 keys to 226 us at 131,072, b = 4, 8/1 heads of 64; they do not time a
windowed kernel, while H100's, same die and vLLM, are flat).

Run ``python -m plena_opt.validate.calibrate_window [../shared/data/kernels]`` to print it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from plena_opt.chip.gpu.perf import GpuPerfModel
from plena_opt.chip.gpu.profile import load_gpu_chip
from plena_opt.validate.calibrate import SYSTEMS, read_rows

# Windowed rows whose median residual at KV >= 64 windows exceeds this multiple of the median at
# KV <= 4 windows read the whole KV: not a windowed kernel's timing (``fit_window_seconds``).
GROWS_AS_FULL_READ = 2.0
SHAPE = ("batch_size", "num_heads", "num_key_value_heads", "head_dim")


@dataclass(frozen=True)
class WindowFit:
    """The fitted extra seconds and the data behind it."""

    seconds: float  # median (measured − curve at the window), seconds
    rows: int  # windowed rows with KV past the window
    q1: float  # lower quartile of the residuals, seconds
    q3: float  # upper quartile, seconds
    data: str  # which table and rows


def window_residuals(
    rows: list[dict[str, str]], perf: GpuPerfModel
) -> tuple[np.ndarray, np.ndarray]:
    """(measured − priced seconds, KV length / window) of each bf16-KV windowed decode row whose
    KV (``isl + step`` keys) is past its ``window_size``; the price is ``perf``'s decode curve
    at the window's keys (what ``gpu_layers.attended`` gives a sliding layer)."""
    out, ratio = [], []
    for r in rows:
        w = int(r["window_size"])
        kv = int(r["isl"]) + int(r["step"])
        if r["kv_cache_dtype"] != "bfloat16" or w <= 0 or kv <= w:
            continue
        b, H, KV, hd = (int(r[k]) for k in SHAPE)
        priced = perf.attention_decode(b, H, KV, hd, np.array([float(w)])).seconds
        out.append(float(r["latency"]) * 1e-3 - float(np.asarray(priced).ravel()[0]))
        ratio.append(kv / w)
    return np.array(out), np.array(ratio)


def fit_window_seconds(folder: Path, system: str) -> WindowFit | None:
    """``WindowFit`` of ``system``'s decode table (``SYSTEMS`` key), or None where the table has
    no windowed row past its window or its windowed rows grow like a full read
    (``GROWS_AS_FULL_READ``). The chip's decode curve is its built-in profile's."""
    path = folder / f"{system}_generation_attention_vllm-0.19.0.csv.gz"
    perf = GpuPerfModel(load_gpu_chip(SYSTEMS[system]), "bf16", 2.0, 2.0, 2.0)
    res, ratio = window_residuals(read_rows(path), perf)
    near, far = res[ratio <= 4], res[ratio >= 64]
    if res.size == 0 or (
        far.size and near.size and np.median(far) > GROWS_AS_FULL_READ * max(np.median(near), 1e-9)
    ):
        return None
    q1, med, q3 = (float(x) for x in np.percentile(res, [25, 50, 75]))
    data = f"{path.name} kv_cache_dtype=bfloat16 window_size>0, KV past the window"
    return WindowFit(med, int(res.size), q1, q3, data)


def main(kernels: str = "../shared/data/kernels") -> None:  # pragma: no cover - for people
    for system in SYSTEMS:
        fit = fit_window_seconds(Path(kernels), system)
        if fit is None:
            print(f"{system}: no windowed decode rows past the window that time a windowed kernel")
            continue
        print(
            f"{system}: {fit.seconds * 1e6:.2f} us (IQR {fit.q1 * 1e6:.2f}..{fit.q3 * 1e6:.2f}; "
            f"{fit.rows} rows of {fit.data})"
        )


if __name__ == "__main__":  # pragma: no cover
    main(*sys.argv[1:])
