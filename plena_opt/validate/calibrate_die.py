"""Decode-attention constants of one compute die fitted once on its two kernel tables.

H100 SXM and H200 are one GH100 die at one clock (``calibrate_gemm.SAME_DIE``, datasheets cited
there and in the profiles); only their HBM differs (3.35 vs 4.8 TB/s). The decode-attention
curve ``t0 + ((s·b·H + u·b·KV)^p + (bytes/(bw·e))^p)^(1/p)`` (``calibrate.decode_curve``) has one
term the memory sets, the bandwidth efficiency ``e`` against the table's own HBM, and the rest
the die sets: the per-(sequence, head) and per-(sequence, KV head) times ``s`` and ``u``, the
fixed time ``t0`` and the blend ``p``.

Fitted per table on every row, the H200 curve streamed at 0.5724 × 4.8 = 2.75 TB/s against
H100's 0.8681 × 3.35 = 2.91 TB/s and priced the H200 table's bandwidth-bound tenth (its rows
with the most bytes) +31 % median (H100's +2.3 %): its many shorter rows, where the H200 is no
faster than the H100 (median H200 / H100 0.98-1.02 up to 67 MB), pulled its ``e`` down, and a
KV-read-bound H200 decode was priced up to 2.3 % slower than the same decode on H100
(README_serving r13mono), where the tables put the H200 at 0.79-0.81 × the H100's time on that
tenth (3.2-3.5 TB/s against 2.7). Here, as ``calibrate_gemm.streaming_efficiency`` does for
GEMMs, ``e`` is each table's own, fitted on its bandwidth-bound rows alone (``t = t0 + bytes /
(bw · e)`` over the ``STREAMING_SHARE`` of its rows with the most bytes), and ``s``, ``u``,
``t0`` and ``p`` are fitted once on both tables' rows with each table's ``e`` held
(README_serving r15h200 has the figures and the leave-one-GPU-out check).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plena_opt.validate.calibrate import (
    Fit,
    decode_attention_arrays,
    decode_curve,
    decode_values,
)
from plena_opt.validate.calibrate_gemm import SAME_DIE

STREAMING_SHARE = 0.1  # the bandwidth-bound rows: this share of a table's rows with the most bytes


def streaming_efficiency(seq_heads, nbytes, t, bw: float) -> float:
    """HBM efficiency ``e`` of the least-squares (log error) ``t = t0 + bytes / (bw · e)`` over
    the ``STREAMING_SHARE`` of rows with the most bytes (``bw`` in bytes/s, ``t`` in s);
    ``seq_heads`` is unused (the ``decode_attention_arrays`` order)."""
    from scipy.optimize import least_squares

    m = nbytes >= np.quantile(nbytes, 1 - STREAMING_SHARE)
    res = least_squares(lambda x: np.log((x[1] * 1e-6 + nbytes[m] / (bw * x[0])) / t[m]),
                        [0.7, 5.0], bounds=([0.01, 0.0], [1.0, 100.0]))  # fmt: skip
    return float(res.x[0])


def die_fit(arrays: dict[str, tuple], bws: dict[str, float], e: dict[str, float]) -> list[float]:
    """(s ns, t0 µs, p, u ns) fitted on every table in ``arrays`` (system → ``(seq_heads,
    bytes, seconds, name)``) with each table's bandwidth efficiency ``e`` held; ``bws``: HBM
    bytes/s."""
    from scipy.optimize import least_squares

    def resid(x):
        return np.concatenate([np.log(decode_curve([e[s], *x], a[0], a[1], bws[s]) / a[2])
                               for s, a in arrays.items()])  # fmt: skip

    x = least_squares(resid, [0.2, 9.0, 2.0, 20.0], bounds=([0, 0, 1, 0], [1e4, 100, 20, 1e4])).x
    return [float(v) for v in x]


def decode_fit(arrays: tuple, bw: float, e: float, die: list[float], note: str) -> Fit:
    """The ``Fit`` of one table (``decode_attention_arrays``) at efficiency ``e`` and the die's
    constants ``die`` = (s ns, t0 µs, p, u ns)."""
    seq_heads, nbytes, t, name = arrays
    ape = np.abs(decode_curve([e, *die], seq_heads, nbytes, bw) / t - 1)
    return Fit(
        decode_values(e, die), f"{name} ({note})", len(t), float(ape.mean()), float(np.median(ape))
    )


def pooled_attention_fits(
    folder: Path, specs: dict[str, tuple[float, float]], fits: dict[str, dict[str, Fit]]
) -> dict[str, dict[str, Fit]]:
    """``fits`` (system → phase → ``calibrate.attention_fits`` fit) with each ``SAME_DIE`` pair's
    decode curve refitted: ``e`` per table on its bandwidth-bound rows, the die's constants once
    on both tables; ``specs``: system → (bf16 peak, HBM bytes/s). A pair one of whose tables
    fails the bandwidth check keeps its per-table fits."""
    out = {s: dict(f) for s, f in fits.items()}
    for pair in SAME_DIE:
        if not all(s in fits for s in pair):
            continue
        arrays = {s: decode_attention_arrays(folder, s, specs[s][1]) for s in pair}
        if any(a is None for a in arrays.values()):
            continue
        bws = {s: specs[s][1] for s in pair}
        e = {s: streaming_efficiency(*arrays[s][:3], bws[s]) for s in pair}
        die = die_fit(arrays, bws, e)
        for s in pair:
            others = " and ".join(o for o in pair if o != s)
            share = f"{100 * STREAMING_SHARE:.0f} %"
            note = (f"bandwidth_efficiency on its {share} rows with the most bytes; the rest "
                    f"fitted jointly with the {others} table: one GH100 die")  # fmt: skip
            out[s]["decode"] = decode_fit(arrays[s], bws[s], e[s], die, note)
    return out
