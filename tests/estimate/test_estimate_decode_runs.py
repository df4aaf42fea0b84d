"""Decode grids of runs of equal attention tiles (``decode.runs``): corner weights give exact sums,
the corner checks cut exactly where a branch switches, and the evaluator's metrics on such grids
equal the per-step sum (independent reference: ``estimate.reference.decode_sums``)."""

from __future__ import annotations

import numpy as np
import pytest
from deepstack import load_noc_profile
from hypothesis import given, settings
from hypothesis import strategies as st

from plena_opt.estimate import Evaluator, Workload
from plena_opt.estimate.decode import MAX_REFINES, DecodeGrid, StairSpec
from plena_opt.estimate.decode.checks import _few_band_cuts, _many_band_cuts, failed_pieces
from plena_opt.estimate.decode.runs import RunGrid, Span, assemble, blocks_of, run_grid
from plena_opt.estimate.distributed import PlanCost
from plena_opt.memory import FixedBandwidthMemory, load_memory
from plena_opt.models import load_model
from tests.estimate.test_estimate_decode_steps import compressed, reference

NOC = load_noc_profile("illustrative_gpu_cluster_32")
FIXED = FixedBandwidthMemory(0.9e12, None, name="fixed")


def _steps_kv(s: int, cp: int, n: int) -> np.ndarray:
    """KV length of every decode step j (ceil((S + j) / cp)), as integers."""
    return (s + np.arange(n, dtype=np.int64) + cp - 1) // cp


@given(u0=st.integers(1, 50_000), length=st.integers(1, 50_000), m=st.integers(1, 3000))
def test_blocks_partition_the_interval(u0: int, length: int, m: int) -> None:
    """Every KV length of [u0, u1) lies in exactly one block, each at most three blocks, and
    inside a block the tiles are the period + 1 (``kv = 1 + m·t + p``)."""
    u1 = u0 + length
    blocks = blocks_of(u0, u1, m)
    assert 1 <= len(blocks) <= 3
    got = []
    for t0, t1, p0, p1 in blocks:
        assert 0 <= p0 <= p1 < m and t0 <= t1
        t, p = np.meshgrid(np.arange(t0, t1 + 1), np.arange(p0, p1 + 1), indexing="ij")
        kv = (1 + m * t + p).ravel()
        assert np.all(-(-kv // m) == t.ravel() + 1)
        got.append(kv)
    assert np.array_equal(np.sort(np.concatenate(got)), np.arange(u0, u1))


@settings(max_examples=60, deadline=None)
@given(
    s=st.integers(1, 9000),
    n=st.integers(1, 60_000),
    cp=st.sampled_from([1, 2, 3, 8]),
    m=st.sampled_from([1, 7, 64, 2048]),
    coef=st.tuples(*[st.integers(-1000, 1000)] * 3),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
)
def test_corner_weights_sum_every_step(s, n, cp, m, coef, cuts) -> None:
    """Σ weights·f at the grid points equals the plain per-step sum of any f affine in
    (1, kv, ceil(kv / MLEN)), on base grids and grids cut anywhere."""
    spec = StairSpec(m, None, None, None)
    grid = run_grid(s, n, cp, spec)
    if grid.pieces:
        sp = grid.pieces[0]
        inner = sorted({sp.u0 + c % (sp.u1 - sp.u0) for c in cuts} - {sp.u0})
        edges = [sp.u0, *inner, sp.u1]
        spans = [Span(a, b, b - a <= 3) for a, b in zip(edges, edges[1:], strict=False)]
        grid = assemble(s, cp, n, spec, spans, base=False)

    def f(kv):
        return coef[0] + coef[1] * kv + coef[2] * (-(-kv // m))

    want = float(np.sum(f(_steps_kv(s, cp, n))))
    got = grid.weights.total(f(grid.kv.astype(np.int64)).astype(float))
    assert grid.weights.steps == n and float(np.sum(grid.weights.weights)) == n
    assert got == pytest.approx(want, rel=1e-12, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    s=st.integers(1, 5000),
    n=st.integers(3000, 400_000),
    m=st.sampled_from([16, 128, 2048]),
    root=st.floats(0.0, 1.0),
    drift=st.floats(-3.0, 3.0),
)
def test_checks_cut_where_a_sign_switches(s, n, m, root, drift) -> None:
    """A roofline-like sign ``a + b·kv + c·ceil(kv / M)`` that changes sign inside the decode
    (once, or once per period when the per-period drift is small): refining until the checks
    pass prices Σ max(x, 0) exactly, with far fewer points than steps where it switches rarely."""
    spec = StairSpec(m, None, None, None)
    grid = run_grid(s, n, 1, spec)
    kv_all = _steps_kv(s, 1, n).astype(float)
    lo, hi = kv_all[1], kv_all[-1]
    c = 1.0
    b = -(c / m) * (1.0 + drift * 1e-3)  # average slope b + c/M: small, so many periods may switch
    a = -(b * (lo + root * (hi - lo)) + c * np.ceil((lo + root * (hi - lo)) / m))

    def x(kv):
        return a + b * kv + c * np.ceil(kv / m)

    for tries in range(MAX_REFINES):
        failed = failed_pieces(grid, [x(grid.kv)], np.zeros((0, len(grid.kv))))
        if not failed:
            break
        grid = grid.refine(failed, enumerate_failed=tries == MAX_REFINES - 1)
    want = float(np.maximum(x(kv_all), 0.0).sum())
    got = grid.weights.total(np.maximum(x(grid.kv), 0.0))
    assert got == pytest.approx(want, rel=1e-11, abs=1e-9 * float(np.abs(x(kv_all)).sum()))
    # points: a few per period in which the sign switches (about 1000 / |drift| of them)
    switching = min(n // m + 2, 1000 / max(abs(drift), 1e-9) + 3)
    assert len(grid.kv) <= 60 * switching + 100


@given(
    coef=st.tuples(st.floats(-1e3, 1e3), st.floats(-10, 10), st.floats(-1, 1)),
    tol=st.floats(0, 1e-3),
    t0=st.integers(0, 100),
    nt=st.integers(0, 40),
    p0=st.integers(0, 60),
    np_=st.integers(0, 60),
)
def test_band_cuts_python_and_numpy_agree(coef, tol, t0, nt, p0, np_) -> None:
    """The per-period cuts for a few periods (plain Python) equal the vectorised ones."""
    m = 64
    p1 = min(p0 + np_, m - 1)
    blk = (t0, t0 + nt, p0, p1)
    d = range(nt + 1)
    few = _few_band_cuts(coef, tol, blk, m, d)
    many = _many_band_cuts(coef, tol, blk, m, np.arange(nt + 1))
    assert sorted(few) == sorted(many)


def test_fixed_bandwidth_uses_runs_and_quanta_do_not() -> None:
    """Fixed bandwidth without a quantum builds a ``RunGrid``; a transfer quantum, sliding or
    chunked layers keep the stair-compressed ``DecodeGrid``."""
    w = Workload(batch_size=16, input_seq_len=2048, output_seq_len=1 << 20)
    ctx = Evaluator(load_model("llama-3.1-70b"), NOC, FIXED, w).ctx
    assert isinstance(ctx.decode_grid(1, 1024.0), RunGrid)
    stacked = load_memory("fictional_stacked_dram")
    ctx = Evaluator(load_model("llama-3.1-70b"), NOC, stacked, w).ctx
    assert isinstance(ctx.decode_grid(1, 1024.0), DecodeGrid)
    ctx = Evaluator(load_model("gemma-2-27b"), NOC, FIXED, w).ctx
    assert isinstance(ctx.decode_grid(1, 1024.0), DecodeGrid)


@pytest.mark.parametrize("model", ["llama-3.1-70b", "deepseek-v3", "mixtral-8x7b"])
@pytest.mark.parametrize("output_len", [30_001, 150_000])
def test_run_grid_metrics_equal_every_step(model: str, output_len: int) -> None:
    """Every legal plan (up to 40) of a fixed-bandwidth decode: the run-grid sums equal the
    independent per-step reference at rel 1e-12, with a bounded number of points."""
    ev = Evaluator(
        load_model(model),
        NOC,
        FIXED,
        Workload(batch_size=16, input_seq_len=2048, output_seq_len=output_len),
    )
    for plan in ev.legal_plans()[:40]:
        cost = PlanCost(ev.ctx, plan)
        assert cost.decode.steps.points < 2_000
        want, got = reference(cost), compressed(cost)
        for name, value in want.items():
            assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-300), (plan, name)
