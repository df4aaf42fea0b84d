"""Decode grids for memory without a transfer quantum: runs of equal attention tiles in closed form.

Without a transfer quantum, chunked or sliding layers (``StairSpec`` with only MLEN), a decode
step's cost depends on its KV length only through kv and the attention tiles ``ceil(kv / M)``.
Write ``kv = 1 + M·t + p`` (period t, phase 0 ≤ p < M): the tiles are ``t + 1``, so where no
branch switches (roofline side, comm overlap side, slowest stage) every quantity the reports sum
is affine in (t, p).

Exact sums. A *block* (periods t0…t1 × phases p0…p1) is priced at its four corners, each
weighted ``cp·Nt·Np / 4``: the mean of an affine function over a rectangle of integer points is
the mean of its corners, so the weighted sum is the block's exact sum (no fit, no SVD). A fifth
point, the block's middle (weight 0), checks that the values are affine. A KV interval
``[u0, u1)`` is at most three blocks: a partial first period, the whole periods, a partial last.

Exact checks. An affine function on a rectangle takes its extremes at the corners, so a sign is
fixed on a block iff it is at the four corners. Where it is not, the block is cut in one step:
the periods whose phase range meets the tolerance band around zero follow in closed form from
the corner values, and inside each such period the crossing phase; the band (its width is the
tolerance over the slope, about one KV length) is priced point by point. So the number of points
depends on how many periods a branch switches in, not on the output length.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from plena_opt.estimate.decode import steps as steps_mod
from plena_opt.estimate.decode.stairs import GridMemo, StairSpec, _kv_of, _weights_of
from plena_opt.estimate.pricing import StepWeights

SMALL_KV = 8  # an interval up to this many KV lengths is priced point by point
DENSE_BLOCKS = 64  # up to this many blocks the fit residuals are one (dense) matrix product
LIST_KV = 64  # enumerated spans up to this long are built as Python lists (no array call each)
RUN_CUTS = 2048  # a block switching in more periods than this is halved instead of cut per period


def applies(spec: StairSpec) -> bool:
    """Whether a decode of ``spec`` is built from kv and ``ceil(kv / MLEN)`` alone."""
    return (
        spec.read_over_quantum is None
        and spec.chunk is None
        and spec.window is None
        and not spec.every_step
    )


class Span(NamedTuple):
    """KV lengths ``[u0, u1)``, each standing for ``cp`` steps; ``enumerated``: priced at every
    KV length (else as blocks). A tuple: grids are memoised by their spans (fast to hash)."""

    u0: int
    u1: int
    enumerated: bool = False


@dataclass(frozen=True, eq=False)
class Corners:
    """The blocks of a grid: their points are the grid's last ``5·len(piece)`` points, five per
    block (corners (t0,p0), (t0,p1), (t1,p0), (t1,p1), then the middle (tm, pm))."""

    start: int  # grid index of the first block point
    piece: np.ndarray  # [C] the span each block belongs to
    t0: np.ndarray
    t1: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    ft: np.ndarray  # (tm − t0) / (t1 − t0), 0 for one period
    fp: np.ndarray  # (pm − p0) / (p1 − p0), 0 for one phase
    # [5·C, 3·C]: point values → per block, two values 0 when affine (columns 2c, 2c + 1),
    # then each block's sum of its four corners (column 2C + c); None above DENSE_BLOCKS
    residuals: np.ndarray | None


def blocks_of(u0: int, u1: int, m: int) -> list[tuple[int, int, int, int]]:
    """``[u0, u1)`` as blocks (t0, t1, p0, p1) with ``kv = 1 + m·t + p``: at most three."""
    ta, pa = divmod(u0 - 1, m)
    tb, pb = divmod(u1 - 2, m)
    if ta == tb:
        return [(ta, ta, pa, pb)]
    out = []
    if pa > 0:
        out.append((ta, ta, pa, m - 1))
        ta += 1
    tail = []
    if pb < m - 1:
        tail.append((tb, tb, 0, pb))
        tb -= 1
    if ta <= tb:
        out.append((ta, tb, 0, m - 1))
    return out + tail


@dataclass(frozen=True, eq=False)
class RunGrid(GridMemo):
    """Evaluation points (KV lengths) with the number of decode steps each stands for: point 0 is
    step 0 alone (the first-token reports), then the partial KV lengths at both ends, the
    enumerated spans' KV lengths, then five points per block (``Corners``)."""

    input_len: int
    cp: int
    steps: int
    spec: StairSpec
    pieces: tuple[Span, ...]
    kv: np.ndarray
    weights: StepWeights
    checks: tuple[int, ...]  # per block: the span it belongs to (empty: nothing to check)
    corners: Corners | None
    base: bool = True

    @property
    def key(self) -> tuple:
        """Hashable identity of the point set (cache key)."""
        return ("runs", self.input_len, self.cp, self.steps, self.spec, self.pieces)

    def refine(self, cuts: dict[int, list[int]], enumerate_failed: bool = False) -> RunGrid:
        """Cut each failed span at the given KV lengths (halved without any; priced point by
        point when short or ``enumerate_failed``); pieces up to ``SMALL_KV`` are enumerated."""
        spans: list[Span] = []
        for i, s in enumerate(self.pieces):
            if i not in cuts:
                spans.append(s)
                continue
            inner = sorted({c for c in cuts[i] if s.u0 < c < s.u1})
            if enumerate_failed or (not inner and s.u1 - s.u0 <= steps_mod.ENUM_KV):
                spans.append(Span(s.u0, s.u1, True))
                continue
            edges = [s.u0, *(inner or [(s.u0 + s.u1) // 2]), s.u1]
            spans.extend(Span(a, b, b - a <= SMALL_KV) for a, b in pairwise(edges))
        return assemble(self.input_len, self.cp, self.steps, self.spec, spans, base=False)


def assemble(s: int, cp: int, n: int, spec: StairSpec, spans: list[Span], *, base: bool) -> RunGrid:
    """The grid of ``spans`` (steps 1 … n−1 between the partial end KV lengths)."""
    kv: list[float] = [float(_kv_of(s, cp, 0))]
    w: list[float] = [1.0]
    if n > 1:  # the partial KV lengths at both ends of steps 1 … n-1
        ends = sorted({_kv_of(s, cp, 1), _kv_of(s, cp, n - 1)})
        kv += [float(v) for v in ends]
        w += [float(_weights_of(s, cp, n, v, 1)) for v in ends]
    kvs: list[np.ndarray] = []  # long enumerated spans
    ws: list[np.ndarray] = []
    blocks: list[tuple[int, int, int, int]] = []
    owner: list[int] = []
    m, step = spec.mlen, float(cp)
    for i, sp in enumerate(spans):
        if not sp.enumerated:
            got = blocks_of(sp.u0, sp.u1, m)
            blocks += got
            owner += [i] * len(got)
        elif sp.u1 - sp.u0 <= LIST_KV or kvs:  # short: Python floats; after a long one: arrays
            if kvs:
                kvs.append(np.arange(sp.u0, sp.u1, dtype=float))
                ws.append(np.full(sp.u1 - sp.u0, step))
            else:
                kv += [float(u) for u in range(sp.u0, sp.u1)]
                w += [step] * (sp.u1 - sp.u0)
        else:
            kvs += [np.array(kv), np.arange(sp.u0, sp.u1, dtype=float)]
            ws += [np.array(w), np.full(sp.u1 - sp.u0, step)]
    if not kvs:
        kvs, ws = [np.array(kv)], [np.array(w)]
    corners = None
    if blocks:
        corners, ckv, cw = _corners(sum(len(k) for k in kvs), blocks, owner, m, cp)
        kvs.append(ckv)
        ws.append(cw)
    return RunGrid(
        s,
        cp,
        n,
        spec,
        tuple(spans),
        np.concatenate(kvs),
        StepWeights(np.concatenate(ws), n),
        tuple(owner),
        corners,
        base,
    )


@lru_cache(maxsize=256)
def _residual_index(n: int) -> np.ndarray:
    """Flat indices into the [5n, 3n] residual matrix of each block's twelve coefficients, in
    ``_corners``' order (a function of the block count alone)."""
    out: list[int] = []
    w3 = 3 * n
    for c in range(n):
        row = 5 * c * w3
        out += [row + j * w3 + 2 * c for j in range(4)]
        out += [row + j * w3 + 2 * c + 1 for j in (0, 1, 2, 4)]
        out += [row + j * w3 + 2 * n + c for j in range(4)]
    return np.array(out, dtype=np.int64)


def _corners(
    start: int, blocks: list[tuple[int, int, int, int]], owner: list[int], m: int, cp: int
) -> tuple[Corners, np.ndarray, np.ndarray]:
    """The blocks' layout, their points' KV lengths and weights (five points per block). Plain
    Python per block: a grid has a few dozen blocks, fewer than numpy's per-call overhead."""
    n = len(blocks)
    kv: list[int] = []
    w: list[float] = []
    coef: list[float] = []  # per block: the residuals' coefficients, then the corner sum's
    fts: list[float] = []
    fps: list[float] = []
    for t0, t1, p0, p1 in blocks:
        tm, pm = (t0 + t1) // 2, (p0 + p1) // 2
        a, b = 1 + m * t0, 1 + m * t1
        kv += [a + p0, a + p1, b + p0, b + p1, 1 + m * tm + pm]
        corner = cp * (t1 - t0 + 1) * (p1 - p0 + 1) / 4.0  # exact: an integer / 4
        w += [corner, corner, corner, corner, 0.0]
        ft = (tm - t0) / (t1 - t0) if t1 > t0 else 0.0
        fp = (pm - p0) / (p1 - p0) if p1 > p0 else 0.0
        fts.append(ft)
        fps.append(fp)
        # affine in (t, p) ⇔ v11 − v10 − v01 + v00 = 0 and mid = v00 + ft·Δt + fp·Δp
        coef += [1.0, -1.0, -1.0, 1.0, ft + fp - 1.0, -fp, -ft, 1.0, 1.0, 1.0, 1.0, 1.0]
    residuals = None
    if n <= DENSE_BLOCKS:
        residuals = np.zeros((5 * n, 3 * n))
        residuals.reshape(-1)[_residual_index(n)] = coef
    t0s, t1s, p0s, p1s = np.array(blocks, dtype=np.int64).T
    ft_, fp_ = np.array(fts), np.array(fps)
    corners = Corners(start, np.array(owner), t0s, t1s, p0s, p1s, ft_, fp_, residuals)
    return corners, np.array(kv, dtype=float), np.array(w)


def run_grid(input_len: int, steps: int, cp: int, spec: StairSpec) -> RunGrid:
    """The base grid: step 0, the partial end KV lengths, then the inner KV lengths (each ``cp``
    steps) as one span (priced point by point up to ``ENUM_KV`` KV lengths, as ``steps``)."""
    spans: list[Span] = []
    if steps > 1:
        u0, u1 = _kv_of(input_len, cp, 1) + 1, _kv_of(input_len, cp, steps - 1)
        if u1 > u0:
            spans.append(Span(u0, u1, u1 - u0 <= steps_mod.ENUM_KV))
    return assemble(input_len, cp, steps, spec, spans, base=True)
