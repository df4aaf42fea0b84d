"""Whether a decode grid's compressed pieces keep every branch (see ``steps``).

All checks of a grid are judged together: their pseudo-inverses and bases side by side in one
block-diagonal matrix, per-check maxima and sums by ``reduceat``, so a grid with many pieces
costs one set of array operations instead of one per piece.
"""

from __future__ import annotations

from math import ceil, floor

import numpy as np

from plena_opt.estimate.decode.blocks import CheckBlocks
from plena_opt.estimate.decode.runs import RUN_CUTS, Corners, RunGrid
from plena_opt.estimate.decode.stairs import FIT_TOL, SIGN_TOL
from plena_opt.estimate.decode.steps import DecodeGrid


def _zones(values: np.ndarray, strict: np.ndarray, b: CheckBlocks) -> list[list[int] | None]:
    """Per check: None where every quantity (rows of ``values`` [Q, P] at the checks' points)
    fits the stairs and keeps its sign on the piece (``strict`` [Q, 1] or [Q, checks]: > 0 or
    < 0; else ≥ 0 suffices, ties being harmless in a maximum); otherwise the KV lengths
    bounding the uncertain zones (empty: no estimate). A quantity that is zero at every point
    of a check is ignored there."""
    absval = np.abs(values)
    scale = np.maximum.reduceat(absval, b.col_starts, axis=1)  # [Q, C]
    coef = values @ b.pinv.T  # [Q, K]
    resid = np.abs(coef @ b.matrix.T - values)
    fits = np.maximum.reduceat(resid, b.col_starts, axis=1) <= FIT_TOL * scale
    gap = np.add.reduceat(np.abs(coef) * b.is_ceil, b.k_starts, axis=1)
    lo0 = np.add.reduceat(coef * b.lo + np.minimum(coef, 0.0) * b.is_ceil, b.k_starts, axis=1)
    slope = np.add.reduceat(coef * b.slope, b.k_starts, axis=1)
    tol = SIGN_TOL * scale
    lo1 = lo0 + slope * (b.u1 - 1 - b.u0)
    lo_min = np.minimum(lo0, lo1)
    hi_max = np.maximum(lo0, lo1) + gap
    fixed = (lo_min > tol) | (~strict & (lo_min >= -tol)) | (strict & (hi_max < -tol))
    bad = ~(fixed & fits) & (scale > 0.0)
    out: list[list[int] | None] = [None] * len(b.u0)
    for ci in np.flatnonzero(bad.any(axis=0)):
        cuts: list[int] = []
        for i in np.flatnonzero(bad[:, ci] & fits[:, ci] & (slope[:, ci] != 0.0)):
            t, g, l0, sl = tol[i, ci], gap[i, ci], lo0[i, ci], slope[i, ci]
            ends = [b.u0[ci] + (z - l0) / sl for z in (-t, t, -t - g)]
            ends.append(b.u0[ci] + (t - g - l0) / sl)
            cuts += [floor(min(ends)), ceil(max(ends)) + 1]
        out[ci] = cuts
    return out


def failed_pieces(
    grid: DecodeGrid | RunGrid, signs: list[np.ndarray], rows: np.ndarray
) -> dict[int, list[int]]:
    """Compressed pieces where a branch may switch, with the KV lengths to cut them at.

    ``signs``: quantities whose sign is a branch (``t_m − t_c``, ``comm − layer``); ``rows``:
    stage times whose maximum is the period (the largest at the middle point must stay ≥ all,
    and every row must fit the stairs).
    """
    if not grid.checks:
        return {}
    if isinstance(grid, RunGrid):
        return failed_spans(grid, signs, rows)
    b = grid.blocks
    base = np.vstack([*signs, rows]) if signs else rows
    values = base[:, b.cols]
    strict = (np.arange(len(base)) < len(signs))[:, None]
    if len(rows) > 1:  # the largest stage at each check's middle point stays ≥ every stage
        top = np.argmax(rows[:, b.mids], axis=0)  # per check
        top_cols = np.repeat(top, np.diff([*b.col_starts, len(b.cols)]))
        part = rows[:, b.cols]
        values = np.vstack([values, part[top_cols, np.arange(len(b.cols))] - part])
        strict = np.vstack([strict, np.zeros((len(rows), 1), dtype=bool)])
    failed: dict[int, list[int]] = {}
    for c, zone in zip(grid.checks, _zones(values, strict, b), strict=True):
        if zone is not None:
            failed[c.piece] = [u for u in zone if c.u0 < u < c.u1]
    return failed


def failed_spans(grid: RunGrid, signs: list[np.ndarray], rows: np.ndarray) -> dict[int, list[int]]:
    """``failed_pieces`` of a ``RunGrid``: every quantity judged at its blocks' corners."""
    b = grid.corners
    assert b is not None
    n, ns, at = len(b.piece), len(signs), b.start
    values = np.empty((ns + len(rows), 5 * n))
    for i, s in enumerate(signs):
        values[i] = s[at:]
    values[ns:] = rows[:, at:]
    values = values.reshape(len(values), n, 5)
    if len(rows) > 1:  # the largest stage at each block's middle stays ≥ every stage
        part = values[ns:]
        top = np.argmax(part[:, :, 4], axis=0)
        values = np.concatenate([values, part[top, np.arange(n)][None] - part])
    failed: dict[int, list[int]] = {}
    m = grid.spec.mlen
    for c, cuts in _corner_cuts(values, ns, b, m).items():
        sp = grid.pieces[int(b.piece[c])]
        failed.setdefault(int(b.piece[c]), []).extend(u for u in cuts if sp.u0 < u < sp.u1)
    return failed


def corner_ok(values: np.ndarray, ns: int, b: Corners) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per quantity and block (``values`` [Q, blocks, 5] at the block points; the first ``ns``
    quantities keep a strict sign, the others stay ≥ 0): (whether it holds there, whether it
    is affine there, the sign tolerance). A quantity zero at every corner holds."""
    q, n, _ = values.shape
    c0, c1, c2, c3, _ = np.ascontiguousarray(values.transpose(2, 0, 1))  # contiguous: faster
    lo = np.minimum(np.minimum(c0, c1), np.minimum(c2, c3))
    hi = np.maximum(np.maximum(c0, c1), np.maximum(c2, c3))
    scale = np.maximum(hi, -lo)  # max |corner|
    tol = SIGN_TOL * scale
    fits = residuals(values.reshape(q, 5 * n), b) <= FIT_TOL * scale
    ok = np.empty((q, n), dtype=bool)
    np.greater(np.maximum(lo[:ns], -hi[:ns]), tol[:ns], out=ok[:ns])  # > tol or < −tol
    np.greater_equal(lo[ns:], -tol[ns:], out=ok[ns:])
    ok &= fits
    ok |= scale == 0.0
    return ok, fits, tol


def residuals(values: np.ndarray, b: Corners) -> np.ndarray:
    """Per quantity and block (``values`` [Q, 5·blocks]): the larger of its two affinity
    residuals (0 when the block's values are affine in (t, p))."""
    if b.residuals is not None:
        n2 = 2 * (values.shape[1] // 5)
        r = np.abs(values @ b.residuals)
        return np.maximum(r[:, 0:n2:2], r[:, 1:n2:2])
    v00, v01, v10, v11, mid = np.moveaxis(values.reshape(len(values), -1, 5), 2, 0)
    dt, dp = v10 - v00, v01 - v00
    return np.maximum(np.abs(v11 - v10 - dp), np.abs(mid - v00 - dt * b.ft - dp * b.fp))


def _corner_cuts(values: np.ndarray, ns: int, b: Corners, m: int) -> dict[int, list[int]]:
    """Per failed block (``values`` [Q, blocks, 5] at its points; the first ``ns`` quantities
    must keep a strict sign, the others stay ≥ 0): the KV lengths to cut it at (empty: a value
    is not affine there, halve it). A quantity zero at every point is ignored."""
    ok, fits, tol = corner_ok(values, ns, b)
    if np.logical_and.reduce(ok, axis=None):
        return {}
    bad = ~ok
    out: dict[int, list[int]] = {}
    for c in np.flatnonzero(bad.any(axis=0)):
        blk = (int(b.t0[c]), int(b.t1[c]), int(b.p0[c]), int(b.p1[c]))
        nt, np_ = max(blk[1] - blk[0], 1), max(blk[3] - blk[2], 1)
        cuts: list[int] = []
        for i in np.flatnonzero(bad[:, c] & fits[:, c]):
            v00, v01, v10 = (float(x) for x in values[i, c, :3])
            coef = (v00, (v10 - v00) / nt, (v01 - v00) / np_)
            cuts += band_cuts(coef, float(tol[i, c]), blk, m)
        out[int(c)] = cuts
    return out


def band_cuts(
    coef: tuple[float, float, float], tol: float, blk: tuple[int, int, int, int], m: int
) -> list[int]:
    """Where to cut a block (t0, t1, p0, p1) on which ``f = a + β·(t − t0) + γ·(p − p0)`` meets
    ``[−tol, tol]``: around every period whose phase range meets the band, and around the band
    inside it (``kv = 1 + m·t + p``); more than ``RUN_CUTS`` such periods: their ends and middle."""
    a, beta, gamma = coef
    t0, t1, p0, p1 = blk
    reach = gamma * (p1 - p0)
    lo_p, hi_p = min(0.0, reach), max(0.0, reach)
    d0, d1 = 0, t1 - t0
    if beta != 0.0 and t1 > t0:  # periods d with a + β·d + [lo_p, hi_p] meeting [−tol, tol]
        x, y = (-tol - a - hi_p) / beta, (tol - a - lo_p) / beta
        x, y = (min(max(v, -1.0), d1 + 1.0) for v in (x, y))  # no inf to floor (tiny β)
        d0, d1 = max(d0, floor(min(x, y))), min(d1, ceil(max(x, y)))
        if d0 > d1:
            return []
    if d1 - d0 >= RUN_CUTS:
        return [1 + m * (t0 + d) for d in (d0, (d0 + d1) // 2, d1 + 1)]
    if d1 - d0 < 16:  # few periods: plain Python is cheaper than numpy's per-call overhead
        return _few_band_cuts(coef, tol, blk, m, range(d0, d1 + 1))
    return _many_band_cuts(coef, tol, blk, m, np.arange(d0, d1 + 1))


def _many_band_cuts(
    coef: tuple[float, float, float],
    tol: float,
    blk: tuple[int, int, int, int],
    m: int,
    d: np.ndarray,
) -> list[int]:
    """``band_cuts`` of the periods ``t0 + d``, vectorised."""
    a, beta, gamma = coef
    t0, _, p0, p1 = blk
    start = 1 + m * (t0 + d)
    parts = [start + p0, start + p1 + 1]
    if gamma != 0.0:
        with np.errstate(over="ignore"):  # a tiny slope puts the band past the block: clipped
            e1, e2 = p0 + (-tol - a - beta * d) / gamma, p0 + (tol - a - beta * d) / gamma
        band_lo = np.clip(np.floor(np.minimum(e1, e2)), p0, p1 + 1)
        band_hi = np.clip(np.ceil(np.maximum(e1, e2)) + 1, p0, p1 + 1)
        parts += [start + band_lo.astype(np.int64), start + band_hi.astype(np.int64)]
    return np.concatenate(parts).astype(np.int64).tolist()


def _few_band_cuts(
    coef: tuple[float, float, float],
    tol: float,
    blk: tuple[int, int, int, int],
    m: int,
    periods: range,
) -> list[int]:
    """``band_cuts`` for a few periods (the same cuts, one period at a time)."""
    a, beta, gamma = coef
    t0, _, p0, p1 = blk
    out: list[int] = []
    for d in periods:
        start = 1 + m * (t0 + d)
        out += [start + p0, start + p1 + 1]
        if gamma != 0.0:
            e1, e2 = p0 + (-tol - a - beta * d) / gamma, p0 + (tol - a - beta * d) / gamma
            lo = min(max(min(e1, e2), p0 - 1.0), p1 + 2.0)  # clipped first: no inf to floor
            hi = min(max(max(e1, e2), p0 - 1.0), p1 + 2.0)
            out += [start + min(max(floor(lo), p0), p1 + 1)]
            out += [start + min(max(ceil(hi) + 1, p0), p1 + 1)]
    return out
