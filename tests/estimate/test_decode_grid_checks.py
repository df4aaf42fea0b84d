"""``decode.grid_checks``: a plan's fast checks on a stair-compressed grid (memory with a
transfer quantum) are sufficient conditions for ``decode.checks.failed_pieces`` finding nothing,
they hold in the plain case, and stacked-DRAM decodes still equal the per-step reference."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from deepstack import load_noc_profile
from hypothesis import given, settings
from hypothesis import strategies as st

from plena_opt.estimate import Evaluator, Workload
from plena_opt.estimate.decode import DecodeGrid, StairSpec, decode_grid
from plena_opt.estimate.decode.checks import failed_pieces
from plena_opt.estimate.decode.plan_checks import plan_checks_hold
from plena_opt.estimate.distributed import PlanCost
from plena_opt.memory import load_memory
from plena_opt.models import load_model
from tests.estimate.test_estimate_decode_steps import compressed, reference

M, RATIO = 2048, Fraction(48, 7)  # MLEN and read / quantum of the stacked DRAM's grids
NOC = load_noc_profile("illustrative_gpu_cluster_32")


@dataclass(eq=False)
class Layer:
    """The three arrays of a priced layer the checks read (``pricing.StageArrays``' names)."""

    memory_seconds: np.ndarray
    compute_seconds: np.ndarray
    seconds: np.ndarray


def _grid(n: int = 400_000) -> DecodeGrid:
    grid = decode_grid(2048, n, 1, StairSpec(M, RATIO, None, None))
    assert isinstance(grid, DecodeGrid) and grid.checks
    return grid


def _layer(kv: np.ndarray, mem: tuple, comp: tuple) -> Layer:
    tiles = np.ceil(kv / M)
    waves = np.ceil(kv * float(RATIO))
    t_m = mem[0] + mem[1] * kv + mem[2] * waves
    t_c = comp[0] + comp[1] * kv + comp[2] * tiles
    return Layer(t_m, t_c, np.maximum(t_m, t_c))


coef = st.tuples(st.floats(1e-6, 1e-3), st.floats(0, 1e-9), st.floats(0, 1e-9))


@settings(max_examples=80, deadline=None)
@given(
    mem=coef,
    comp=coef,
    comm=st.floats(0.0, 2e-3),
    extra=st.floats(0.0, 1e-3),
    count=st.integers(1, 80),
    n=st.integers(3_000, 500_000),
    overlap=st.booleans(),
    bend=st.booleans(),
    stages=st.lists(st.tuples(st.integers(1, 80), st.floats(0.0, 2e-3)), max_size=3),
)
def test_fast_checks_imply_the_full_check(mem, comp, comm, extra, count, n, overlap, bend, stages):
    """Whenever the fast path says the plan's checks hold, the full check finds no failure
    (random roofline signs, comm times, stage rows; ``bend``: a row not made of the stairs;
    ``stages``: more stage rows, of other layer counts and constant extras)."""
    grid = _grid(n)
    la = _layer(grid.kv, mem, comp)
    comb = np.maximum(la.seconds, comm) if overlap else la.seconds + comm
    row = count * comb + extra
    if bend:
        row = row + 1e-6 * np.sqrt(grid.kv)
    rows = np.vstack([row, *(k * comb + e for k, e in stages)])
    signs = [la.memory_seconds - la.compute_seconds]
    if overlap:
        signs.append(comm - la.seconds)
    comm_map = {"k": comm} if overlap else None
    if plan_checks_hold(grid, {"k": la}, comm_map, rows):
        assert failed_pieces(grid, signs, rows) == {}


def test_fast_checks_hold_in_the_plain_case_and_refuse_the_rest() -> None:
    """Memory-bound everywhere, comm far from the layer, rows made of the stairs that keep
    their order: the fast path holds; comm inside the layer's range, a row not made of the
    stairs, a compute-bound switch inside the decode, or two rows that cross: it does not (the
    caller runs the full check)."""
    grid = _grid()
    la = _layer(grid.kv, (1e-4, 1e-9, 1e-10), (1e-5, 0.0, 1e-9))
    row = (3 * la.seconds + 1e-5)[None, :]
    assert failed_pieces(grid, [la.memory_seconds - la.compute_seconds], row) == {}
    assert plan_checks_hold(grid, {"k": la}, None, row)
    assert plan_checks_hold(grid, {"k": la}, {"k": 1e-9}, row)
    assert plan_checks_hold(grid, {"k": la}, {"k": 1.0}, row)
    mid = float(np.median(la.seconds))
    assert not plan_checks_hold(grid, {"k": la}, {"k": mid}, row)
    assert not plan_checks_hold(grid, {"k": la}, None, row + 1e-6 * np.sqrt(grid.kv))
    two = np.vstack([row, 2 * row])  # the larger stays the larger: holds
    assert plan_checks_hold(grid, {"k": la}, None, two)
    assert failed_pieces(grid, [la.memory_seconds - la.compute_seconds], two) == {}
    cross = np.vstack([row, np.full_like(row, float(np.median(row)))])  # the rows cross
    assert not plan_checks_hold(grid, {"k": la}, None, cross)
    assert failed_pieces(grid, [la.memory_seconds - la.compute_seconds], cross) != {}
    switch = _layer(grid.kv, (1e-4, 1e-9, 0.0), (0.0, 0.0, 1e-5))  # compute-bound from 13 tiles
    signs = [switch.memory_seconds - switch.compute_seconds]
    assert failed_pieces(grid, signs, (2 * switch.seconds)[None, :]) != {}
    assert not plan_checks_hold(grid, {"k": switch}, None, (2 * switch.seconds)[None, :])


@pytest.mark.parametrize("model", ["llama-3.1-70b", "deepseek-v3", "mixtral-8x7b"])
@pytest.mark.parametrize("output_len", [30_001, 150_000])
def test_stacked_metrics_equal_every_step(model: str, output_len: int) -> None:
    """Legal plans (up to 24) of a stacked-DRAM decode (transfer quantum, dense, MLA, MoE): the
    compressed sums equal the independent per-step reference at rel 1e-12."""
    ev = Evaluator(
        load_model(model),
        NOC,
        load_memory("fictional_stacked_dram"),
        Workload(batch_size=16, input_seq_len=2048, output_seq_len=output_len),
    )
    for plan in ev.legal_plans()[:24]:
        cost = PlanCost(ev.ctx, plan)
        assert cost.decode.steps.points < 2_000
        want, got = reference(cost), compressed(cost)
        for name, value in want.items():
            assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-300), (plan, name)
