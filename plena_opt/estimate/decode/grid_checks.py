"""A plan's decode checks on a stair-compressed ``DecodeGrid`` from memoised layer facts.

The counterpart of ``plan_checks`` for the grids of memory with a transfer quantum (and
chunked or sliding layers): ``checks.failed_pieces`` recovers each quantity's stair
coefficients at every compressed piece's points, bounds it between two affine envelopes and
asks that the sign keep clear of zero and the fit residual stay small. The priced layers are
shared by the plans of a shard, so per layer object the envelopes of its seconds (lowest and
highest over every piece), its largest fit residual and whether its roofline sign holds are
computed once and kept on the grid; a plan's comm sign ``comm − seconds`` then holds where the
constant clears those envelopes, and its single stage row is judged with one matrix product.

Each test is a sufficient condition for ``failed_pieces`` finding nothing, with margins (half
the tolerances, a rounding allowance) for the differently ordered float arithmetic; where one
does not hold the caller runs the full check, so the grids and metrics are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plena_opt.estimate.decode.blocks import CheckBlocks
from plena_opt.estimate.decode.stairs import FIT_TOL, SIGN_TOL, LayerFacts
from plena_opt.estimate.decode.steps import DecodeGrid

MARGIN = 0.5  # share of a tolerance the fast tests may use


def grid_checks_hold(
    grid: DecodeGrid, layer: Mapping, comm: Mapping | None, rows: np.ndarray
) -> bool:
    """True only if ``failed_pieces(grid, signs, rows)`` finds nothing (``signs``: each layer's
    roofline sign and, with ``comm``, ``comm − seconds``); False: run the full check."""
    b = grid.blocks
    for kind, la in layer.items():
        roof, lo, hi, resid = _facts(grid, b, la)
        if not roof or (comm is not None and not _clears(comm[kind], lo, hi, resid, b.rounding)):
            return False
    return rows_hold(rows, b)


def envelopes(values: np.ndarray, b: CheckBlocks) -> list[list[tuple[float, float, float, float]]]:
    """Per quantity (rows of ``values`` [Q, grid points]) and check: (the largest |value| at
    its points, the largest fit residual, the lowest and the highest envelope value), as
    ``checks._zones`` bounds them; plain Python on one product (a few dozen numbers)."""
    op, parts = b.row_test
    v = values[:, b.cols]
    ys = (v @ op.T).tolist()
    out = []
    for y, vs in zip(ys, np.abs(v).tolist(), strict=True):
        k = len(y) - len(vs)
        row = []
        for k0, k1, r0, r1, factor in parts:
            lo0, gap = y[k0], 0.0
            for x in y[k0 + 2 : k1]:  # each stair's excess in [0, 1): its coefficient's range
                if x < 0.0:
                    lo0 += x
                    gap -= x
                else:
                    gap += x
            lo1 = lo0 + y[k0 + 1] * factor
            r = y[r0:r1]
            resid = max(max(r), -min(r))
            row.append((max(vs[r0 - k : r1 - k]), resid, min(lo0, lo1), max(lo0, lo1) + gap))
        out.append(row)
    return out


def layers_hold(grid: DecodeGrid, layers: Sequence) -> bool:
    """True only if ``failed_pieces(grid, roofline signs of layers, no rows)`` finds nothing;
    then each layer's facts are kept for ``grid_checks_hold``. False: run the full check."""
    n = len(layers)
    signs = [la.memory_seconds - la.compute_seconds for la in layers]
    env = envelopes(np.vstack([*signs, *(la.seconds for la in layers)]), grid.blocks)
    if not all(_roof(e, grid.blocks.rounding) for e in env[:n]):
        return False
    for la, e in zip(layers, env[n:], strict=True):
        grid.layer_facts[id(la)] = (la, LayerFacts(True, *_extremes(e)))
    return True


def _roof(env: list[tuple[float, float, float, float]], rounding: float) -> bool:
    """Whether a sign (``envelopes`` of one quantity) clears zero by twice the sign tolerance
    and fits within half the fit tolerance on every check (or is zero there), with
    ``rounding`` (relative, ``CheckBlocks.rounding``) to spare."""
    for scale, resid, lo, hi in env:
        margin = (2.0 * SIGN_TOL + rounding) * scale
        clear = lo > margin or hi < -margin
        if scale != 0.0 and not (clear and resid + rounding * scale <= MARGIN * FIT_TOL * scale):
            return False
    return True


def _extremes(env: list[tuple[float, float, float, float]]) -> tuple[float, float, float]:
    """The lowest and highest envelope over every check and the largest fit residual."""
    return min(e[2] for e in env), max(e[3] for e in env), max(e[1] for e in env)


def _facts(grid: DecodeGrid, b: CheckBlocks, la) -> LayerFacts:
    """(the roofline sign clears zero and fits on every piece with margin, the lowest and
    highest envelope of ``la.seconds``, its largest fit residual), memoised per layer object."""
    hit = grid.layer_facts.get(id(la))
    if hit is not None and hit[0] is la:  # the object is kept with its facts: ids stay unique
        return hit[1]
    sign, seconds = envelopes(np.vstack([la.memory_seconds - la.compute_seconds, la.seconds]), b)
    facts = LayerFacts(_roof(sign, b.rounding), *_extremes(seconds))
    grid.layer_facts[id(la)] = (la, facts)
    return facts


def _clears(c: float, lo: float, hi: float, resid: float, rounding: float) -> bool:
    """Whether ``c − seconds`` keeps a strict sign and fits on every piece (sufficient): the
    constant clears the envelopes [lo, hi] by twice the sign tolerance of the largest value,
    and the residual stays below half the fit tolerance of the smallest, with ``rounding``
    (relative, ``CheckBlocks.rounding``) of every value to spare."""
    if c - hi > 0.0:
        gap, far = c - hi, c - lo
    elif lo - c > 0.0:
        gap, far = lo - c, hi - c
    else:
        return False
    slack = rounding * (abs(c) + max(abs(lo), abs(hi)) + resid)
    gap -= slack + resid
    return gap > 2.0 * SIGN_TOL * (far + resid + slack) and resid + slack <= MARGIN * FIT_TOL * gap


def rows_hold(rows: np.ndarray, b: CheckBlocks) -> bool:
    """Whether the stage rows [U, points] stay ≥ 0 and fit on every piece, and (U > 1, one
    check) the largest at the check's middle point stays ≥ every row: per quantity, its lower
    envelope ≥ −half the sign tolerance and its residual ≤ half the fit tolerance, with
    ``CheckBlocks.rounding`` to spare (sufficient)."""
    if len(rows) > 1:
        if len(b.u0) != 1:
            return False
        top = int(np.argmax(rows[:, int(b.mids[0])]))  # as ``failed_pieces`` picks it
        rows = np.vstack([rows, rows[top] - rows])
    r = b.rounding
    for env in envelopes(rows, b):
        for scale, resid, lo, _ in env:
            if not (
                lo >= (r - MARGIN * SIGN_TOL) * scale and resid <= (MARGIN * FIT_TOL - r) * scale
            ):
                return False
    return True
