"""``decode.plan_checks``: a plan's fast checks on a run grid are sufficient conditions for
``decode.checks.failed_pieces`` finding nothing, and they hold in the plain cases."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from plena_opt.estimate.decode import StairSpec
from plena_opt.estimate.decode.checks import failed_pieces
from plena_opt.estimate.decode.plan_checks import layer_checks, plan_checks_hold
from plena_opt.estimate.decode.runs import Span, assemble

M = 64


@dataclass(eq=False)
class Layer:
    """The three arrays of a priced layer the checks read (``pricing.StageArrays``' names)."""

    memory_seconds: np.ndarray
    compute_seconds: np.ndarray
    seconds: np.ndarray


def _grid(cuts: list[int]):
    s, n = 2048, 400_000
    u0, u1 = s + 2, s + n - 1
    edges = [u0, *sorted({c for c in cuts if u0 < c < u1}), u1]
    spans = [Span(a, b, b - a <= 8) for a, b in zip(edges, edges[1:], strict=False)]
    return assemble(s, 1, n, StairSpec(M, None, None, None), spans, base=False)


def _layer(kv: np.ndarray, mem: tuple, comp: tuple) -> Layer:
    tiles = np.ceil(kv / M)
    t_m = mem[0] + mem[1] * kv + mem[2] * tiles
    t_c = comp[0] + comp[1] * kv + comp[2] * tiles
    return Layer(t_m, t_c, np.maximum(t_m, t_c))


coef = st.tuples(st.floats(1e-6, 1e-3), st.floats(0, 1e-9), st.floats(0, 1e-7))


@settings(max_examples=60, deadline=None)
@given(
    mem=coef,
    comp=coef,
    comm=st.floats(0.0, 2e-3),
    extra=st.floats(0.0, 1e-3),
    count=st.integers(1, 80),
    cuts=st.lists(st.integers(2050, 402_000), max_size=4),
    overlap=st.booleans(),
    bend=st.booleans(),
)
def test_fast_checks_imply_the_full_check(mem, comp, comm, extra, count, cuts, overlap, bend):
    """Whenever the fast path says the plan's checks hold, the full check finds no failure
    (random roofline signs, comm times, stage rows; ``bend``: a row that is not affine)."""
    grid = _grid(cuts)
    la = _layer(grid.kv, mem, comp)
    layer_checks(grid, [la])  # keeps the facts where the layer's own check holds
    comb = np.maximum(la.seconds, comm) if overlap else la.seconds + comm
    row = count * comb + extra
    if bend:
        row = row + 1e-6 * np.sqrt(grid.kv)
    rows = row[None, :]
    signs = [la.memory_seconds - la.compute_seconds]
    if overlap:
        signs.append(comm - la.seconds)
    comm_map = {"k": comm} if overlap else None
    if plan_checks_hold(grid, {"k": la}, comm_map, rows):
        assert failed_pieces(grid, signs, rows) == {}


def test_fast_checks_hold_in_the_plain_case_and_refuse_the_rest() -> None:
    """Memory-bound everywhere, comm far below or far above the layer, one affine row: the
    fast path holds (no full check needed); a comm time inside the layer's range, a row that
    is not affine, or two rows: it does not (the caller runs the full check)."""
    grid = _grid([100_000])
    la = _layer(grid.kv, (1e-4, 1e-9, 0.0), (1e-5, 0.0, 1e-9))
    assert layer_checks(grid, [la]) == {}
    row = (3 * la.seconds + 1e-5)[None, :]
    assert plan_checks_hold(grid, {"k": la}, None, row)
    assert plan_checks_hold(grid, {"k": la}, {"k": 1e-9}, row)
    assert plan_checks_hold(grid, {"k": la}, {"k": 1.0}, row)
    mid = float(np.median(la.seconds))
    assert not plan_checks_hold(grid, {"k": la}, {"k": mid}, row)
    assert not plan_checks_hold(grid, {"k": la}, None, row + 1e-6 * np.sqrt(grid.kv))
    assert not plan_checks_hold(grid, {"k": la}, None, np.vstack([row, row]))
    other = _layer(grid.kv, (1e-4, 1e-9, 0.0), (1e-5, 0.0, 2e-9))  # facts computed on demand
    assert plan_checks_hold(grid, {"k": other}, None, (2 * other.seconds)[None, :])
