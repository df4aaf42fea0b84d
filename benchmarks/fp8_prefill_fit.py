"""Hopper fp8 GEMM table rows against the profile's curves by M band, and prefill-range curves
fitted on them (README_serving r16fp8; numbers only, nothing here is used by the product).

``python benchmarks/fp8_prefill_fit.py [KERNELS_DIR]`` reads the H100 and H200 vLLM GEMM tables
(``gemm_dtype=fp8``, per-tensor scales) and prints markdown tables:

1. the built-in profiles' curves (``gemm_decode`` for m <= 128, ``gemm`` above) per M band
   (``BANDS``) and weight size n·k (``SIZES``): rows, MAPE, median predicted / measured - 1;
2. the same split by M alignment (the table's rows above m = 256 are m = 256·j and 256·j + 1);
3. Llama-3.1-70B's four GEMMs (QKV, O, gate-up, down at TP 2 / 4 / 8) over 80 layers, priced
   (``GpuPerfModel.gemm``, the product's fp8 bytes) against the table (bilinear in n, k as
   ``llama70b_prefill_breakdown.table_ms``) at aligned and unaligned M;
4. prefill-range candidates (``FORMS``), each priced at m >= ``PREFILL_MIN_M`` only (below, the
   shipped curves: identical by construction), fitted jointly on both tables (what the GH100 die
   sets shared, the bandwidth efficiency per table) and leave-one-GPU-out (the die constants from
   one table, only the other's bandwidth efficiency refitted, as ``gh100_die_logo.py``); scored
   on all shapes, on model shapes (n, k >= 1024) and on their unaligned rows (m % 256 != 0: the
   token counts a serving step meets, prompt lengths being drawn).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from llama70b_prefill_breakdown import gemm_table, llama_gemms, table_ms
from scipy.optimize import least_squares

from plena_opt.chip.gpu.perf import GpuPerfModel
from plena_opt.chip.gpu.profile import load_gpu_chip, profiles_dir
from plena_opt.chip.precision import GPU_BYTES
from plena_opt.validate.calibrate import _peaks, block_peaks, read_rows
from plena_opt.validate.calibrate_gemm import SAME_DIE, _arrays

CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
NAMES = ("compute_efficiency", "bandwidth_efficiency", "fixed_seconds", "blend")
BANDS = ((1, 128), (129, 1023), (1024, 4095), (4096, 1 << 30))
SIZES = ((0, 4 << 20), (4 << 20, 32 << 20), (32 << 20, 128 << 20), (128 << 20, 1 << 40))
PREFILL_MIN_M = 1024
PREFILL_BANDS = BANDS[2:]
ALIGN = 256
MODEL_MIN = 1024  # n and k of a "model shape"


class Table:
    """One GEMM table's fp8 rows as arrays, with its chip's fp8 peak and HBM bandwidth."""

    def __init__(self, folder: Path, system: str) -> None:
        prof = json.loads((profiles_dir() / f"{CHIPS[system]}.json").read_text())
        self.prof = prof
        self.peak = block_peaks(_peaks(prof))["fp8"]
        self.bw = prof["hbm"]["bandwidth_bytes_per_s"]["value"]
        rows = [r for r in read_rows(folder / f"{system}_gemm_vllm-0.19.0.csv.gz")
                if r["gemm_dtype"] == "fp8"]  # fmt: skip
        self.f, self.b, self.t = _arrays(rows, "fp8")
        self.m, self.n, self.k = (np.array([float(r[c]) for r in rows]) for c in "mnk")
        self.unaligned = self.m % ALIGN != 0

    def shipped(self, key: str) -> list[float]:
        c = self.prof[key]["fp8"]
        return [c[k]["value"] * (1e6 if k == "fixed_seconds" else 1) for k in NAMES]

    def price(self, x: list[float], sel: np.ndarray | None = None) -> np.ndarray:
        """The curve ``x`` = (ce, be, t0 µs, p[, u]) on rows ``sel``; ``u``: unaligned rows'
        compute rate / aligned."""
        s = slice(None) if sel is None else sel
        u = np.where(self.unaligned[s], x[4], 1.0) if len(x) > 4 else 1.0
        tc = self.f[s] / (self.peak * x[0] * u)
        tm = self.b[s] / (self.bw * x[1])
        return x[2] * 1e-6 + (tc ** x[3] + tm ** x[3]) ** (1.0 / x[3])


def _stat(pred: np.ndarray, t: np.ndarray, q: np.ndarray) -> str:
    r = pred[q] / t[q]
    return f"{100 * np.mean(np.abs(r - 1)):.1f} / {100 * (np.median(r) - 1):+.1f}"


def _fit(tables: list[Table], rows, build, start: list[float], lo: list[float], hi: list[float],
         full: list[float]) -> list[list[float]]:  # fmt: skip
    """Per table the curve vector of ``build(shared, be, full)``, ``shared`` fitted jointly on
    ``tables`` (log error over their ``rows``), ``be`` per table."""
    sels = [rows(tb) for tb in tables]
    k = len(start)

    def resid(x):
        out = []
        for i, (tb, sel) in enumerate(zip(tables, sels, strict=True)):
            out.append(np.log(tb.price(build(list(x[:k]), x[k + i], full), sel) / tb.t[sel]))
        return np.concatenate(out)

    nt = len(tables)
    x = least_squares(resid, start + [0.7] * nt, bounds=(lo + [0.01] * nt, hi + [1] * nt)).x
    return [[float(v) for v in build(list(x[:k]), x[k + i], full)] for i in range(nt)]


def _refit_be(tb: Table, x: list[float], rows) -> list[float]:
    """``x`` with only the bandwidth efficiency refitted on ``tb``'s ``rows``."""
    sel = rows(tb)

    def resid(e):
        return np.log(tb.price([x[0], e[0], *x[2:]], sel) / tb.t[sel])

    e = least_squares(resid, [0.7], bounds=([0.01], [1])).x[0]
    return [x[0], float(e), *x[2:]]


def _all(tb: Table) -> np.ndarray:
    return np.ones_like(tb.m, bool)


def _prefill(tb: Table) -> np.ndarray:
    return tb.m >= PREFILL_MIN_M


def _prefill_unaligned(tb: Table) -> np.ndarray:
    return (tb.m >= PREFILL_MIN_M) & tb.unaligned


def _four(x, be, full):
    return [x[0], be, x[1], x[2]]


# name → (rows fitted, build, start, lower, upper bounds)
FORMS = {
    "full-range curve (shipped form)": (_all, _four, [0.7, 6.0, 1.5], [0.01, 0, 1], [1, 100, 20]),
    "prefill curve, m >= 1024": (_prefill, _four, [0.7, 6.0, 1.5], [0.01, 0, 1], [1, 100, 20]),
    "prefill curve, unaligned m >= 1024": (
        _prefill_unaligned, _four, [0.7, 6.0, 1.5], [0.01, 0, 1], [1, 100, 20]),
    "blend alone above 1024 (ce, t0 full-range)": (
        _prefill, lambda x, be, full: [full[0], be, full[2], x[0]], [1.5], [1], [20]),
    "prefill curve + unaligned rate u": (
        _prefill, lambda x, be, full: [x[0], be, x[1], x[2], x[3]], [0.7, 6.0, 1.5, 0.8],
        [0.01, 0, 1, 0.3], [1, 100, 20, 1]),
}  # fmt: skip


def _shipped_tables(tabs: dict[str, Table]) -> None:
    sizes = [f"n·k {a >> 20}–{b >> 20 if b < 1 << 40 else ''} M" for a, b in SIZES]
    print("\n| table | M band | " + " | ".join(sizes) + " | all shapes |")
    print("| --- | --- |" + " ---: |" * (len(SIZES) + 1))
    for s, tb in tabs.items():
        pred = np.where(
            tb.m <= 128, tb.price(tb.shipped("gemm_decode")), tb.price(tb.shipped("gemm"))
        )
        for lo, hi in BANDS:
            band = (tb.m >= lo) & (tb.m <= hi)
            nk = tb.n * tb.k
            cells = [_stat(pred, tb.t, band & (nk >= a) & (nk < b)) for a, b in SIZES]
            print(f"| {s} | {lo}–{hi if hi < 1 << 20 else ''} | " + " | ".join(cells)
                  + f" | {_stat(pred, tb.t, band)} ({band.sum()}) |")  # fmt: skip
        model = (tb.n >= MODEL_MIN) & (tb.k >= MODEL_MIN) & (tb.m > ALIGN)
        for lab, q in (("m = 256·j", ~tb.unaligned), ("m = 256·j + 1", tb.unaligned)):
            print(
                f"| {s} | m > 256, {lab}, model shapes | | | | | {_stat(pred, tb.t, q & model)} |"
            )


def _llama(folder: Path) -> None:
    print("\n| GPU | TP | " + " | ".join(str(m) for m in (1024, 1025, 2048, 2049, 4096, 4097, 8192))
          + " |")  # fmt: skip
    print("| --- | --- |" + " ---: |" * 7)
    fb = GPU_BYTES["fp8"]
    for gpu, chip in CHIPS.items():
        t = gemm_table(gpu, "fp8")
        pm = GpuPerfModel(load_gpu_chip(chip), "fp8", fb.weight, fb.activation, 1.0)
        for tp in (2, 4, 8):
            cells = []
            for m in (1024, 1025, 2048, 2049, 4096, 4097, 8192):
                meas = 80 * sum(table_ms(t, m, n, k) for n, k in llama_gemms(tp))
                pr = 80e3 * sum(float(pm.gemm(m, n, k).seconds) for n, k in llama_gemms(tp))
                cells.append(f"{pr:.1f} / {meas:.1f} ({pr / meas:.2f})")
            print(f"| {gpu[:4]} | {tp} | " + " | ".join(cells) + " |")


def main(folder: Path) -> None:
    pair = SAME_DIE[0]
    tabs = {s: Table(folder, s) for s in pair}
    _shipped_tables(tabs)
    _llama(folder)
    subsets = {
        "all shapes": lambda tb: np.ones_like(tb.m, bool),
        "model shapes": lambda tb: (tb.n >= MODEL_MIN) & (tb.k >= MODEL_MIN),
        "model, unaligned": lambda tb: (tb.n >= MODEL_MIN) & (tb.k >= MODEL_MIN) & tb.unaligned,
    }
    heads = [
        f"{sub} {lo}–{hi if hi < 1 << 20 else ''}" for sub in subsets for lo, hi in PREFILL_BANDS
    ]
    print("\n| form | constants (H100 table) | scored | " + " | ".join(heads) + " |")
    print("| --- | --- | --- |" + " ---: |" * len(heads))
    tl = list(tabs.values())
    for name, (rows, build, start, lo, hi) in FORMS.items():
        full = _fit(tl, _all, _four, *list(FORMS.values())[0][2:], full=[])
        joint = _fit(tl, rows, build, start, lo, hi, full[0])
        logo = {}
        for train, test in (pair, pair[::-1]):
            alone_full = _fit([tabs[train]], _all, _four, *list(FORMS.values())[0][2:], full=[])
            alone = _fit([tabs[train]], rows, build, start, lo, hi, alone_full[0])[0]
            logo[test] = _refit_be(tabs[test], alone, rows)
        cases = [(f"in sample {s[:4]}", tabs[s], joint[i]) for i, s in enumerate(pair)]
        cases += [(f"{s[:4]} → {t[:4]}", tabs[t], logo[t]) for s, t in (pair, pair[::-1])]
        x0 = joint[0]
        consts = (f"ce {x0[0]:.4f}, be {x0[1]:.4f} / {joint[1][1]:.4f}, t0 {x0[2]:.2f} µs, "
                  f"p {x0[3]:.3f}" + (f", u {x0[4]:.3f}" if len(x0) > 4 else ""))  # fmt: skip
        for j, (lab, tb, x) in enumerate(cases):
            pred = tb.price(x)
            cells = []
            for sub in subsets.values():
                for blo, bhi in PREFILL_BANDS:
                    cells.append(_stat(pred, tb.t, sub(tb) & (tb.m >= blo) & (tb.m <= bhi)))
            print(f"| {name if j == 0 else ''} | {consts if j == 0 else ''} | {lab} | "
                  + " | ".join(cells) + " |")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1] if sys.argv[1:] else "../shared/data/kernels"))
