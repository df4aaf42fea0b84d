"""Hopper fp8 GEMM table rows against the profile's curves by M band, and a prefill-range curve
fitted on them (README_serving r16fp8).

``python benchmarks/fp8_prefill_fit.py [KERNELS_DIR]`` reads the H100 and H200 vLLM GEMM tables
(``gemm_dtype=fp8``, per-tensor scales) and prints, per table and M band (``BANDS``):

1. MAPE and median predicted / measured of the built-in profile's curves (``gemm_decode`` for
   m <= 128, ``gemm`` above), split by the row's M alignment (m % 256 == 0 against m % 256 == 1,
   the table's two kinds of row above m = 256);
2. a prefill-range curve (the four ``GemmCurve`` constants; compute efficiency, fixed time and
   blend shared by the GH100 pair, bandwidth efficiency per table) fitted on the rows
   m >= ``PREFILL_MIN_M``, in sample (joint) and leave-one-GPU-out (fitted on one table, only the
   other's bandwidth efficiency refitted, as ``gh100_die_logo.py``), against the full-range
   curve refitted the same two ways;
3. the same with the prefill curve fitted on the unaligned rows (m % 256 != 0) alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from plena_opt.chip.gpu.profile import profiles_dir
from plena_opt.validate.calibrate import _peaks, block_peaks, curve, read_rows
from plena_opt.validate.calibrate_gemm import SAME_DIE, _arrays, _die_x

CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
NAMES = ("compute_efficiency", "bandwidth_efficiency", "fixed_seconds", "blend")
BANDS = ((1, 128), (129, 1023), (1024, 4095), (4096, 1 << 30))
PREFILL_MIN_M = 1024
ALIGN = 256


def _x(c: dict) -> list[float]:
    return [c[k]["value"] * (1e6 if k == "fixed_seconds" else 1) for k in NAMES]


def _joint(arr: dict, pk: dict, bw: dict, sel: dict, x0: list[float]) -> np.ndarray:
    """(compute eff, t0 µs, blend, bandwidth eff per table) on the tables in ``arr`` (rows
    ``sel``)."""
    pair = list(arr)

    def resid(x):
        out = []
        for i, s in enumerate(pair):
            f, b, t = (a[sel[s]] for a in arr[s])
            out.append(np.log(curve(_die_x(x, i), f, b, pk[s], bw[s]) / t))
        return np.concatenate(out)

    lo, hi = [0.01, 0.0, 1.0] + [0.01] * len(pair), [1, 100, 20] + [1] * len(pair)
    return least_squares(resid, x0 + [0.7] * len(pair), bounds=(lo, hi)).x


def _hbm(x4: list[float], arr: tuple, pk: float, bw: float, sel: np.ndarray) -> list[float]:
    """``x4`` with the bandwidth efficiency refitted on ``arr``'s rows ``sel``."""
    f, b, t = (a[sel] for a in arr)

    def resid(e):
        return np.log(curve([x4[0], e[0], x4[2], x4[3]], f, b, pk, bw) / t)

    e = least_squares(resid, [0.7], bounds=([0.01], [1])).x[0]
    return [x4[0], float(e), x4[2], x4[3]]


def _bands(pred: np.ndarray, t: np.ndarray, m: np.ndarray) -> str:
    out = []
    for lo, hi in BANDS:
        q = (m >= lo) & (m <= hi)
        r = pred[q] / t[q]
        out.append(f"{100 * np.mean(np.abs(r - 1)):5.1f} / {100 * (np.median(r) - 1):+5.1f}")
    r = pred / t
    out.append(f"{100 * np.mean(np.abs(r - 1)):5.1f}")
    return " | ".join(out)


def main(folder: Path) -> None:
    pair = SAME_DIE[0]
    prof = {s: json.loads((profiles_dir() / f"{CHIPS[s]}.json").read_text()) for s in pair}
    bw = {s: prof[s]["hbm"]["bandwidth_bytes_per_s"]["value"] for s in pair}
    pk = {s: block_peaks(_peaks(prof[s]))["fp8"] for s in pair}
    arr, ms = {}, {}
    for s in pair:
        rows = [r for r in read_rows(folder / f"{s}_gemm_vllm-0.19.0.csv.gz")
                if r["gemm_dtype"] == "fp8"]  # fmt: skip
        arr[s] = _arrays(rows, "fp8")
        ms[s] = np.array([float(r["m"]) for r in rows])
    print("MAPE % / median bias % by M band: " + " | ".join(f"{lo}-{hi}" for lo, hi in BANDS)
          + " | all")  # fmt: skip
    dec = {s: _x(prof[s]["gemm_decode"]["fp8"]) for s in pair}
    shipped = {s: _x(prof[s]["gemm"]["fp8"]) for s in pair}

    def price(s, full, pre=None):
        f, b, _ = arr[s]
        m = ms[s]
        t = np.where(m <= 128, curve(dec[s], f, b, pk[s], bw[s]), curve(full, f, b, pk[s], bw[s]))
        if pre is not None:
            t = np.where(m >= PREFILL_MIN_M, curve(pre, f, b, pk[s], bw[s]), t)
        return t

    for s in pair:
        t, m = arr[s][2], ms[s]
        p = price(s, shipped[s])
        print(f"{s} shipped: {_bands(p, t, m)}")
        for lab, q in (("m%256==0", m % ALIGN == 0), ("m%256==1", m % ALIGN == 1)):
            q = q & (m > ALIGN)
            r = p[q] / t[q]
            print(f"  {lab} (m > {ALIGN}, {q.sum()} rows): MAPE {100 * np.mean(np.abs(r - 1)):.1f}"
                  f" median {100 * (np.median(r) - 1):+.1f}")  # fmt: skip
    allrows = {s: np.ones_like(ms[s], bool) for s in pair}
    pre_rows = {s: ms[s] >= PREFILL_MIN_M for s in pair}
    unal_rows = {s: (ms[s] >= PREFILL_MIN_M) & (ms[s] % ALIGN != 0) for s in pair}
    x0 = shipped[pair[0]]
    x0 = [x0[0], x0[2], x0[3]]
    full = _joint(arr, pk, bw, allrows, x0)
    for name, sel in (("prefill (m >= 1024)", pre_rows), ("prefill, unaligned rows", unal_rows)):
        pre = _joint(arr, pk, bw, sel, x0)
        print(f"\n{name}: joint ce {pre[0]:.4f} t0 {pre[1]:.3f} us blend {pre[2]:.3f} "
              f"be {pre[3]:.4f} / {pre[4]:.4f}")  # fmt: skip
        for i, s in enumerate(pair):
            t, m = arr[s][2], ms[s]
            print(f"  {s} in sample, old : {_bands(price(s, _die_x(full, i)), t, m)}")
            print(f"  {s} in sample, new : {_bands(price(s, _die_x(full, i), _die_x(pre, i)), t, m)}")
        for train, test in (pair, pair[::-1]):
            t, m = arr[test][2], ms[test]
            fo = _joint({train: arr[train]}, pk, bw, {train: allrows[train]}, x0)
            fn = _joint({train: arr[train]}, pk, bw, {train: sel[train]}, x0)
            old = _hbm(_die_x(fo, 0), arr[test], pk[test], bw[test], allrows[test])
            new = _hbm(_die_x(fn, 0), arr[test], pk[test], bw[test], sel[test])
            print(f"  {train} -> {test}, old : {_bands(price(test, old), t, m)}")
            print(f"  {train} -> {test}, new : {_bands(price(test, old, new), t, m)}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if sys.argv[1:] else "../shared/data/kernels"))
