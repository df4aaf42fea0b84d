"""A plan's decode checks on a ``RunGrid`` from memoised facts about its layers.

``passes.PassResult.failed_checks`` judges, at every block's corners (``checks``), the
roofline sign of each layer kind, under full comm overlap the sign of ``comm − layer seconds``,
and the stage rows (affine, ≥ 0). The priced layers are shared by every plan of a shard (one
object per kind and grid), so what they contribute is judged once per object and kept on the
grid: whether the roofline sign holds on every block, the extremes of the layer seconds over
every corner, and its largest fit residual. A plan's comm sign then holds on every block when
the constant comm time clears those extremes by the sign tolerance and its fit residual stays
below the fit tolerance with a rounding allowance; the single stage row is judged with one
product. Each test is a sufficient condition for ``checks.failed_pieces`` returning no
failure, so where one does not hold the caller runs the full check: the grids, and so the
metrics, are the same as when the full check always runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plena_opt.estimate.decode.checks import corner_ok, failed_pieces, residuals
from plena_opt.estimate.decode.grid_checks import grid_checks_hold, layers_hold
from plena_opt.estimate.decode.runs import Corners, RunGrid
from plena_opt.estimate.decode.stairs import FIT_TOL, SIGN_TOL, LayerFacts
from plena_opt.estimate.decode.steps import DecodeGrid

EPS = 2.0**-52
ROUNDING = 64 * EPS  # allowance for rounding between two float evaluations of one residual
ROW_MARGIN = 0.5  # a row's residual must stay below this share of the fit tolerance


def plan_checks_hold(grid: object, layer: Mapping, comm: Mapping | None, rows: np.ndarray) -> bool:
    """True only if ``failed_pieces(grid, signs, rows)`` finds nothing, where ``signs`` are each
    layer's ``memory_seconds − compute_seconds`` and, with ``comm`` (one layer's collective
    seconds by kind, full overlap), ``comm − seconds``; False: run the full check."""
    if isinstance(grid, DecodeGrid):
        return grid_checks_hold(grid, layer, comm, rows)
    if not isinstance(grid, RunGrid) or len(rows) != 1:
        return False
    b = grid.corners
    if b is None or b.residuals is None:
        return False
    for kind, la in layer.items():
        roof, lo, hi, resid = _facts(grid, b, la)
        if not roof or (comm is not None and not _clears(comm[kind], lo, hi, resid)):
            return False
    return _row_holds(rows[0], b)


def layer_checks(grid: object, layers: Sequence) -> dict[int, list[int]]:
    """``failed_pieces`` of the layers' roofline signs alone (a layer's own grid); where they
    hold on a ``RunGrid``, each layer's facts are kept for ``plan_checks_hold``."""
    if isinstance(grid, DecodeGrid) and grid.checks and layers_hold(grid, layers):
        return {}
    signs = [la.memory_seconds - la.compute_seconds for la in layers]
    failed = failed_pieces(grid, signs, np.zeros((0, len(grid.kv))))
    if not failed and isinstance(grid, RunGrid):
        b = grid.corners
        if b is not None and b.residuals is not None:
            at, n = b.start, len(b.piece)
            values = np.array([la.seconds[at:] for la in layers])
            c = values.reshape(len(layers), n, 5)[:, :, :4]
            lo, hi = c.min(axis=(1, 2)).tolist(), c.max(axis=(1, 2)).tolist()
            resid = residuals(values, b).max(axis=1).tolist()
            for la, facts in zip(layers, zip(lo, hi, resid, strict=True), strict=True):
                grid.layer_facts[id(la)] = (la, LayerFacts(True, *facts))
    return failed


def _facts(grid: RunGrid, b: Corners, la) -> LayerFacts:
    """(roofline sign holds on every block, min and max of ``la.seconds`` over every corner,
    its largest fit residual), memoised on the grid per priced layer object."""
    hit = grid.layer_facts.get(id(la))
    if hit is not None and hit[0] is la:  # the object is kept with its facts: ids stay unique
        return hit[1]
    at, n = b.start, len(b.piece)
    sign = (la.memory_seconds - la.compute_seconds)[at:]
    ok, _, _ = corner_ok(sign.reshape(1, n, 5), 1, b)
    seconds = la.seconds[at:]
    c = seconds.reshape(n, 5)[:, :4]
    resid = float(residuals(seconds.reshape(1, -1), b).max())
    facts = LayerFacts(bool(ok.all()), float(c.min()), float(c.max()), resid)
    grid.layer_facts[id(la)] = (la, facts)
    return facts


def _clears(c: float, lo: float, hi: float, resid: float) -> bool:
    """Whether ``c − seconds`` keeps a strict sign and fits on every block (sufficient)."""
    if c - hi > 0.0:
        gap, far = c - hi, c - lo
    elif lo - c > 0.0:
        gap, far = lo - c, hi - c
    else:
        return False
    slack = ROUNDING * (abs(c) + max(abs(lo), abs(hi)) + 2.0 * resid)
    return gap > SIGN_TOL * far and resid + slack <= FIT_TOL * gap


def _row_holds(row: np.ndarray, b: Corners) -> bool:
    """Whether one stage row is ≥ 0 and fits on every block (sufficient): every block value
    ≥ 0 and each residual below ``ROW_MARGIN`` of the fit tolerance times the block's mean
    corner (≤ its largest)."""
    v = row[b.start :]
    if not min(v.tolist()) >= 0.0:
        return False
    n = len(b.piece)
    y = (v @ b.residuals).tolist()  # [two residuals per block …, corner sums …]
    worst = max(map(abs, y[: 2 * n]))
    return worst <= ROW_MARGIN * FIT_TOL * 0.25 * min(y[2 * n :])
