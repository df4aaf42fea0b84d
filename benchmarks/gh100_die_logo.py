"""Leave-one-GPU-out of the GH100 die's constants (README_serving r15h200).

``python benchmarks/gh100_die_logo.py [KERNELS_DIR]`` fits what the die sets on one kernel table
alone (GEMM: compute efficiency, fixed time, blend; decode attention: ``s``, ``u``, ``t0``,
``p``), refits only the other table's HBM term (GEMM: its bandwidth efficiency; attention: ``e``
on its bandwidth-bound rows, ``calibrate_die.streaming_efficiency``) and prints that table's
per-kernel MAPE beside the joint fit's (the built-in profiles') on the same table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from plena_opt.chip.gpu.profile import profiles_dir
from plena_opt.validate.calibrate import (
    GEMM_DTYPES,
    _peaks,
    block_peaks,
    curve,
    decode_attention_arrays,
    decode_curve,
    read_rows,
)
from plena_opt.validate.calibrate_die import die_fit, streaming_efficiency
from plena_opt.validate.calibrate_gemm import SAME_DIE, _arrays

CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
NAMES = ("compute_efficiency", "bandwidth_efficiency", "fixed_seconds", "blend")


def _mape(pred: np.ndarray, t: np.ndarray) -> float:
    return 100 * float(np.mean(np.abs(pred / t - 1)))


def _fit(arrays: tuple, peak: float, bw: float) -> np.ndarray:
    """The four GEMM curve constants (µs fixed time) fitted on one table's ``arrays``."""
    f, b, t = arrays
    res = least_squares(lambda x: np.log(curve(x, f, b, peak, bw) / t), [0.7, 0.8, 5, 2],
                        bounds=([0.01, 0.01, 0, 1], [1, 1, 100, 20]))  # fmt: skip
    return res.x


def _hbm_only(x: np.ndarray, arrays: tuple, peak: float, bw: float) -> float:
    """MAPE on ``arrays`` of the die constants of ``x`` with only the bandwidth efficiency
    refitted."""
    f, b, t = arrays

    def pred(e):
        return curve([x[0], e[0], x[2], x[3]], f, b, peak, bw)

    e = least_squares(lambda e: np.log(pred(e) / t), [0.8], bounds=([0.01], [1])).x
    return _mape(pred(e), t)


def main(folder: Path) -> None:
    pair = SAME_DIE[0]
    prof = {s: json.loads((profiles_dir() / f"{CHIPS[s]}.json").read_text()) for s in pair}
    bw = {s: prof[s]["hbm"]["bandwidth_bytes_per_s"]["value"] for s in pair}
    pk = {s: block_peaks(_peaks(prof[s])) for s in pair}
    tables = {s: read_rows(folder / f"{s}_gemm_vllm-0.19.0.csv.gz") for s in pair}
    for dtype, fmt in GEMM_DTYPES.items():
        if not all(fmt in prof[s]["gemm"] for s in pair):
            continue
        arr = {s: _arrays([r for r in tables[s] if r["gemm_dtype"] == dtype], fmt) for s in pair}
        for train, test in (pair, pair[::-1]):
            x = _fit(arr[train], pk[train][fmt], bw[train])
            g = prof[test]["gemm"][fmt]
            xj = [g[k]["value"] * (1e6 if k == "fixed_seconds" else 1) for k in NAMES]
            f, b, t = arr[test]
            joint = _mape(curve(xj, f, b, pk[test][fmt], bw[test]), t)
            logo = _hbm_only(x, arr[test], pk[test][fmt], bw[test])
            print(f"gemm.{fmt:9} {train} -> {test}: MAPE {logo:.1f} % (joint {joint:.1f} %)")
    arrays = {s: decode_attention_arrays(folder, s, bw[s]) for s in pair}
    e = {s: streaming_efficiency(*arrays[s][:3], bw[s]) for s in pair}
    joint = die_fit(arrays, bw, e)
    for train, test in (pair, pair[::-1]):
        sh, b, t, _ = arrays[test]
        alone = die_fit({train: arrays[train]}, bw, e)
        own = die_fit({test: arrays[test]}, bw, e)
        m = [_mape(decode_curve([e[test], *d], sh, b, bw[test]), t) for d in (alone, joint, own)]
        print(f"attention_decode {train} -> {test} (e {e[test]:.4f}): MAPE {m[0]:.1f} % "
              f"(joint {m[1]:.1f} %, {test} alone {m[2]:.1f} %)")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1] if sys.argv[1:] else "../shared/data/kernels"))
