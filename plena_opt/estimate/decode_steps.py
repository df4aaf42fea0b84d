"""Decode steps as a few weighted evaluation points instead of one array entry per token.

Decode step ``j`` (0 ≤ j < n) attends to ``kv_j = ceil((S_in + j) / cp)`` tokens, so every KV
length inside the decode stands for ``cp`` steps. A decode step's cost depends on kv only through
a few *stairs* (``ceil((a·kv + c) / b)`` with integers a, b, c, or affine ``a·kv + c``): the
attention tiles ``ceil(att / MLEN)``, the KV read rounded up to whole transfer quanta
``ceil(β·att / Q)`` (``β / Q = a / b`` exactly), the constant and kv itself, where ``att`` is kv
(full attention), ``kv − C·m + 1`` inside chunk ``m`` of a chunked layer, or the constant window
``W`` of a sliding layer once ``kv ≥ W`` (kv below W is priced at every value: at most W points).

Exact sums. On a range of KV lengths where every branch of every maximum is fixed (roofline side,
comm overlap side, slowest stage), every quantity the reports sum is affine in the stairs, so its
sum over the range is the same combination of the stairs' sums, which have closed forms (affine:
arithmetic series; ``ceil``: the floor-sum recursion, O(log) steps in exact integers). A range is
priced at ``2·k`` points (``k`` stairs) whose weights ``w`` solve ``Pᵀw = cp·Σ stairs``: weighted
point sums then equal the exact range sums of every affine combination (up to float rounding).

Branches are checked, not assumed. From the point values each checked quantity's stair
coefficients are recovered (``P`` has full column rank; a fit residual above ``FIT_TOL`` refuses
the range), and since ``ceil(x) ∈ [x, x + 1)`` the quantity lies between two affine functions of
kv; its sign is fixed on the range if they agree at both ends. Where they do not, the range is cut
exactly where the envelopes cross zero (the uncertain zone's width depends on the slopes, not on
the output length), the zone is halved while longer than ``ENUM_KV`` and priced point by point
below that. So the number of points does not grow with the output length.

Memory without a transfer quantum and models without chunked or sliding layers (only kv and the
attention tiles vary) take ``decode_runs.RunGrid`` instead: blocks of equal-tile runs priced at
their corners with closed-form weights, and checked exactly there (no fit, no SVD).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from itertools import count
from typing import TYPE_CHECKING

import numpy as np

from plena_opt.estimate.pricing import StepWeights

if TYPE_CHECKING:
    from plena_opt.estimate.decode_checks import CheckBlocks
    from plena_opt.estimate.decode_runs import RunGrid

FIT_TOL = 1e-9  # refuse a range whose point values do not fit its stairs (relative)
SIGN_TOL = 1e-12  # a sign is fixed when the envelopes clear zero by this (relative to scale)
ENUM_KV = 2048  # ranges up to this many KV lengths are priced point by point
ZONE_KV = 8192  # an uncertain zone up to this many KV lengths is priced point by point at once
MAX_REFINES = 64
_TOKENS = count(1)  # ``DecodeGrid.token`` ids
MIN_AFFINE_KV = 8  # a run of equal attention tiles at least this long is priced as affine
# Where a compressed range's points lie (fractions of it): both ends, then irregular spacing so
# that no stair is affine in kv at the points by accident (that would make the fit ambiguous).
SPREAD = np.array(
    [0.0, 1.0, 0.5, 0.2134, 0.7741, 0.3619, 0.6052, 0.1087, 0.8893, 0.4471, 0.9378, 0.0531]
)


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} floor((a·i + b) / m) for integers, m > 0 (the floor-sum recursion)."""
    ans = 0
    while n > 0:
        q, a = divmod(a, m)
        ans += q * (n * (n - 1) // 2)
        q, b = divmod(b, m)
        ans += q * n
        y = a * n + b
        if y < m:
            break
        n, b, m, a = y // m, y % m, a, m
    return ans


@dataclass(frozen=True)
class Stair:
    """``ceil((a·kv + c) / b)`` for ``b > 0``, the affine ``a·kv + c`` for ``b == 0``."""

    a: int
    c: int
    b: int = 0

    def at(self, kv: int) -> int:
        return self.a * kv + self.c if self.b == 0 else -((-(self.a * kv + self.c)) // self.b)

    def total(self, u0: int, u1: int) -> int:
        """Σ over kv in [u0, u1)."""
        n = u1 - u0
        if self.b == 0:
            return self.a * (u0 + u1 - 1) * n // 2 + self.c * n
        return floor_sum(n, self.b, self.a, self.a * u0 + self.c + self.b - 1)


ONE, KV = Stair(0, 1), Stair(1, 0)


@dataclass(frozen=True)
class StairSpec:
    """What the decode's stairs are made of: MLEN, the KV read's ``β / Q`` (None without a
    transfer quantum), the chunk C of chunked layers, the sliding window W; ``every_step``: a
    cost model whose steps are not built from these stairs (GPU kernels) is priced at every
    KV length, with exact integer weights."""

    mlen: int
    read_over_quantum: Fraction | None
    chunk: int | None
    window: int | None
    every_step: bool = False  # price every KV length (costs not made of these stairs: GPUs)

    def stairs(self, chunk_start: int | None) -> tuple[Stair, ...]:
        """The stairs of a range (``chunk_start``: first kv of its chunk, if chunked)."""
        out = [ONE, KV, Stair(1, 0, self.mlen)]
        f = self.read_over_quantum
        if f is not None:
            out.append(Stair(f.numerator, 0, f.denominator))
        if chunk_start is not None:
            off = 1 - chunk_start  # attended = kv − start + 1
            out.append(Stair(1, off, self.mlen))
            if f is not None:
                out.append(Stair(f.numerator, f.numerator * off, f.denominator))
        return tuple(out)


@dataclass(frozen=True)
class Piece:
    """KV lengths ``[u0, u1)``, each standing for ``cp`` steps; compressed with ``stairs``."""

    u0: int
    u1: int
    stairs: tuple[Stair, ...] = ()

    @property
    def compressed(self) -> bool:
        return bool(self.stairs)


@dataclass(frozen=True, eq=False)
class Check:
    """Where a compressed piece's points lie in the grid, and their ``basis`` matrix [points, k]."""

    piece: int
    span: slice
    matrix: np.ndarray
    pinv: np.ndarray  # [k, points]: point values → basis coefficients (full column rank)
    stairs: tuple[Stair, ...]
    u0: int
    u1: int

    @cached_property
    def envelope_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per basis function: value at u0, slope per kv, and 1 for a stair excess (in [0, 1))."""
        k = len(self.stairs)
        lo = np.zeros(k)
        lo[0] = 1.0
        slope = np.zeros(k)
        slope[1] = 1.0 / (self.u1 - self.u0)
        excess = np.ones(k)
        excess[:2] = 0.0
        return lo, slope, excess


class GridMemo:
    """What both grid kinds (``DecodeGrid``, ``decode_runs.RunGrid``) keep per grid object."""

    @cached_property
    def token(self) -> int:
        """A small id of this grid object (a cheap cache key; one sequence for both kinds, and
        equal grids of one context are one object, as ``EstimateContext`` memoises them)."""
        return next(_TOKENS)

    @cached_property
    def layer_facts(self) -> dict:
        """Memo of ``decode_plan_checks`` / ``decode_grid_checks`` (facts about priced layers
        at these points)."""
        return {}


@dataclass(frozen=True)
class DecodeGrid(GridMemo):
    """Evaluation points (KV lengths) with the number of decode steps each stands for.

    Point 0 is step 0 alone (the first-token reports); then the partial KV lengths at the ends,
    then ``pieces``.
    """

    input_len: int
    cp: int
    steps: int
    spec: StairSpec
    pieces: tuple[Piece, ...]
    kv: np.ndarray
    weights: StepWeights
    checks: tuple[Check, ...]
    base: bool = True

    @cached_property
    def blocks(self) -> CheckBlocks:
        """The checks side by side (``failed_pieces`` judges them all at once); one check's
        are shared by every grid with that compressed piece at that place (memoised)."""
        from plena_opt.estimate.decode_checks import CheckBlocks, one_check_blocks

        if len(self.checks) == 1:
            c = self.checks[0]
            return one_check_blocks(self.pieces[c.piece], self.cp, c.span.start)
        return CheckBlocks.of(self.checks)

    @property
    def key(self) -> tuple:
        """Hashable identity of the point set (cache key)."""
        return (self.input_len, self.cp, self.steps, self.spec, self.pieces)

    def refine(self, cuts: dict[int, list[int]], enumerate_failed: bool = False) -> DecodeGrid:
        """Cut each failed compressed piece at the given KV lengths (halved without any), or
        price it point by point (``enumerate_failed``)."""
        pieces: list[Piece] = []
        for i, p in enumerate(self.pieces):
            if i not in cuts:
                pieces.append(p)
                continue
            if enumerate_failed:
                pieces.append(Piece(p.u0, p.u1))
                continue
            inner = sorted({c for c in cuts[i] if p.u0 < c < p.u1})
            if not inner:
                inner = [(p.u0 + p.u1) // 2]
            edges = [p.u0, *inner, p.u1]
            for a, b in zip(edges, edges[1:], strict=False):
                zone = len(edges) > 2 and b - a <= ZONE_KV and (a, b) != (p.u0, p.u1)
                if zone:
                    pieces.extend(_zone_pieces(self.spec, a, b))
                else:
                    pieces.append(_piece(self.spec, a, b))
        return _assemble(self.input_len, self.cp, self.steps, self.spec, pieces, base=False)


def _chunk_start(spec: StairSpec, u: int) -> int | None:
    return None if spec.chunk is None else (u // spec.chunk) * spec.chunk


def _piece(spec: StairSpec, u0: int, u1: int) -> Piece:
    """A compressed piece with the stairs that vary on it (affine or constant ones folded)."""
    if u1 - u0 <= ENUM_KV:
        return Piece(u0, u1)
    stairs = [ONE, KV]
    for st in spec.stairs(_chunk_start(spec, u0))[2:]:
        if st.b != 1 and st.at(u0) != st.at(u1 - 1):
            stairs.append(st)
    return Piece(u0, u1, tuple(stairs))


def _zone_pieces(spec: StairSpec, u0: int, u1: int) -> list[Piece]:
    """An uncertain zone [u0, u1): point by point, or, when the attention tiles
    ``ceil(kv / MLEN)`` are its only stair, one affine piece per run of equal tiles.

    On such a run every quantity is affine in kv, so a branch switches at most once inside it
    and the next refinement cuts it exactly there (the envelopes of an affine quantity have no
    gap). A zone then costs a few points per run instead of one per KV length. Runs shorter
    than ``MIN_AFFINE_KV`` are priced point by point.
    """
    if spec.read_over_quantum is not None or spec.chunk is not None or spec.every_step:
        return [Piece(u0, u1)]
    if spec.window is not None and u0 < spec.window:
        return [Piece(u0, u1)]
    m = spec.mlen
    # ceil(kv / m) steps up at kv = m·t + 1
    edges = [u0, *range((u0 - 1) // m * m + m + 1, u1, m), u1]
    out = []
    for a, b in zip(edges, edges[1:], strict=False):
        out.append(Piece(a, b, (ONE, KV)) if b - a >= MIN_AFFINE_KV else Piece(a, b))
    return out


def _kv_of(s: int, cp: int, j: int) -> int:
    return -(-(s + j) // cp)


def _weights_of(s: int, cp: int, n: int, v: int, j_lo: int) -> int:
    """Steps j in [j_lo, n) with ceil((s + j) / cp) == v."""
    lo = max((v - 1) * cp + 1 - s, j_lo)
    hi = min(v * cp - s, n - 1)
    return max(0, hi - lo + 1)


def basis(p: Piece, u: int) -> list[float]:
    """A compressed piece's basis at kv ``u``: 1, ``(u − u0) / (u1 − u0)``, and each ceil stair's
    excess over its affine lower envelope (in [0, 1)). Well conditioned at any kv, and every
    function affine in the stairs is affine in it."""
    out = [1.0, (u - p.u0) / (p.u1 - p.u0)]
    for st in p.stairs[2:]:
        out.append(((-(st.a * u + st.c)) % st.b) / st.b)
    return out


def basis_sums(p: Piece) -> list[float]:
    """Exact Σ over kv in [u0, u1) of each basis function (rounded to float once)."""
    n = p.u1 - p.u0
    out = [float(n), (n - 1) / 2]
    for st in p.stairs[2:]:
        lower = Fraction(st.a * KV.total(p.u0, p.u1) + st.c * n, st.b)
        out.append(float(st.total(p.u0, p.u1) - lower))
    return out


@lru_cache(maxsize=4096)
def _compress(p: Piece, cp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Points, weights, basis matrix and its pseudo-inverse of a compressed piece (None:
    enumerate it instead). Cached: refined grids share their unchanged pieces."""
    k = len(p.stairs)
    pts = list(np.round(p.u0 + (p.u1 - 1 - p.u0) * SPREAD[: 2 * k]).astype(np.int64))
    for st in p.stairs:  # both sides of a step of each unit-slope stair (tiles of nearby offsets)
        if st.a == 1 and st.b > 1:
            for x in (p.u0 + 1, (p.u0 + p.u1) // 2):
                j = x + (1 - st.c - x) % st.b
                pts += [j - 1, j] if j < p.u1 else []
    pts = np.unique(np.array(pts, dtype=np.int64))
    mat = np.array([basis(p, int(u)) for u in pts])
    u, sv, vt = np.linalg.svd(mat, full_matrices=False)
    if sv[-1] <= 1e-9 * sv[0]:
        return None  # a stair is constant (or repeats another) on the range
    pinv = (vt.T / sv) @ u.T  # [k, points]
    target = cp * np.array(basis_sums(p))
    w = pinv.T @ target  # the least-norm weights with matᵀ·w = target, refined once
    w += pinv.T @ (target - mat.T @ w)
    if np.any(np.abs(mat.T @ w - target) > 1e-12 * (np.abs(mat.T) @ np.abs(w))):
        return None
    for arr in (w, mat, pinv):
        arr.flags.writeable = False
    return pts.astype(float), w, mat, pinv


def _assemble(
    s: int, cp: int, n: int, spec: StairSpec, pieces: list[Piece], *, base: bool
) -> DecodeGrid:
    kvs: list[np.ndarray] = [np.array([float(_kv_of(s, cp, 0))])]
    ws: list[np.ndarray] = [np.ones(1)]
    if n > 1:  # the partial KV lengths at both ends of steps 1 … n-1
        ends = sorted({_kv_of(s, cp, 1), _kv_of(s, cp, n - 1)})
        kvs.append(np.array(ends, dtype=float))
        ws.append(np.array([float(_weights_of(s, cp, n, v, 1)) for v in ends]))
    checks: list[Check] = []
    out: list[Piece] = []
    at = sum(len(k) for k in kvs)
    for p in pieces:
        comp = _compress(p, cp) if p.compressed else None
        if comp is None:
            p = Piece(p.u0, p.u1)
            kv, w = np.arange(p.u0, p.u1, dtype=float), np.full(p.u1 - p.u0, float(cp))
        else:
            kv, w, mat, pinv = comp
            span = slice(at, at + len(kv))
            checks.append(Check(len(out), span, mat, pinv, p.stairs, p.u0, p.u1))
        out.append(p)
        kvs.append(kv)
        ws.append(w)
        at += len(kv)
    return DecodeGrid(
        s,
        cp,
        n,
        spec,
        tuple(out),
        np.concatenate(kvs),
        StepWeights(np.concatenate(ws), n),
        tuple(checks),
        base,
    )


def decode_grid(input_len: int, steps: int, cp: int, spec: StairSpec) -> DecodeGrid | RunGrid:
    """The base grid: step 0, the partial end KV lengths, then the inner KV lengths (each ``cp``
    steps) cut at chunk starts and at the sliding window (below it: every KV length). A decode
    built from kv and ``ceil(kv / MLEN)`` alone is a ``decode_runs.RunGrid`` instead."""
    from plena_opt.estimate import decode_runs

    if decode_runs.applies(spec):
        return decode_runs.run_grid(input_len, steps, cp, spec)
    pieces: list[Piece] = []
    if steps > 1:
        u0, u1 = _kv_of(input_len, cp, 1) + 1, _kv_of(input_len, cp, steps - 1)
        if u1 > u0:
            cuts = {u0, u1}
            if spec.window is not None and u0 < spec.window < u1:
                cuts.add(spec.window)
            if spec.chunk is not None:
                c = spec.chunk
                cuts.update(range((u0 // c + 1) * c, u1, c))
            edges = sorted(cuts)
            for a, b in zip(edges, edges[1:], strict=False):
                below = spec.every_step or (spec.window is not None and b <= spec.window)
                pieces.append(Piece(a, b) if below else _piece(spec, a, b))
    return _assemble(input_len, cp, steps, spec, pieces, base=True)


def failed_pieces(grid: DecodeGrid, signs: list[np.ndarray], rows: np.ndarray) -> dict:
    """``decode_checks.failed_pieces`` (kept here for the callers that import it from here)."""
    from plena_opt.estimate.decode_checks import failed_pieces as judge

    return judge(grid, signs, rows)
