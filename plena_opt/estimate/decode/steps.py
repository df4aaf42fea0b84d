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
attention tiles vary) take ``runs.RunGrid`` instead: blocks of equal-tile runs priced at
their corners with closed-form weights, and checked exactly there (no fit, no SVD).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from plena_opt.estimate.decode.blocks import CheckBlocks, one_check_blocks
from plena_opt.estimate.decode.stairs import (
    KV,
    ONE,
    Check,
    GridMemo,
    Piece,
    StairSpec,
    _compress,
    _kv_of,
    _weights_of,
)
from plena_opt.estimate.pricing import StepWeights

ENUM_KV = 2048  # ranges up to this many KV lengths are priced point by point
ZONE_KV = 8192  # an uncertain zone up to this many KV lengths is priced point by point at once
MAX_REFINES = 64
MIN_AFFINE_KV = 8  # a run of equal attention tiles at least this long is priced as affine


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


def stair_grid(input_len: int, steps: int, cp: int, spec: StairSpec) -> DecodeGrid:
    """The base grid: step 0, the partial end KV lengths, then the inner KV lengths (each ``cp``
    steps) cut at chunk starts and at the sliding window (below it: every KV length).
    ``decode.grid.decode_grid`` takes a ``runs.RunGrid`` instead where that applies."""
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
