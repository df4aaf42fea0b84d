"""Monte Carlo in bounded column slices (pipeline-simulator §6.2: ``O(V · N_chunk)`` memory): a
block simulated in slices gives every sample exactly the same makespan, probe ends and critical
path as the whole block, and the buffers stay within the cell budget."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from plena_opt.simulator import build_schedule, simulate
from plena_opt.simulator.engine import build_graph, parse_noise
from plena_opt.simulator.engine import monte_carlo as mc_mod
from plena_opt.simulator.engine.noise import SAMPLE_BLOCK
from plena_opt.simulator.engine.run import base_durations

NOISE = "sigma=0.1,rank=0.05,straggler_p=0.05"


def test_slice_width_bounds_the_buffers() -> None:
    assert mc_mod.slice_width(8193) == SAMPLE_BLOCK  # 8,192 ops: one slice per block
    assert mc_mod.slice_width(1_048_577) == mc_mod.MAX_CELLS // 1_048_577 == 31
    assert mc_mod.slice_width(10**9) == 1
    assert mc_mod.slice_width(100, max_cells=700) == 7


@pytest.mark.parametrize("width", [97, 600])
def test_sliced_samples_equal_whole_blocks(monkeypatch, width: int) -> None:
    """Per sample (two blocks, the second short): identical makespans, probe ends and criticality
    counts; only float32 busy sums (rank idle) change order, and the representative samples are
    taken from the last slice."""
    plan = build_schedule("interleaved-1f1b", 4, 8, 2)
    dur = {"F": 1.0, "B": 2.0}
    probes = {"first": 0, "last": plan.n_ops - 1}
    samples = SAMPLE_BLOCK + 301
    whole = simulate(plan, dur, NOISE, samples=samples, seed=5, probes=probes)
    monkeypatch.setattr(mc_mod, "MAX_CELLS", (plan.n_ops + 1) * width)
    sliced = simulate(plan, dur, NOISE, samples=samples, seed=5, probes=probes)
    a, b = whole.mc, sliced.mc
    np.testing.assert_array_equal(a.makespan_samples, b.makespan_samples)
    for k in probes:
        np.testing.assert_array_equal(a.probe_ends[k], b.probe_ends[k])
    np.testing.assert_array_equal(a.criticality_by_op, b.criticality_by_op)
    assert a.makespan == b.makespan  # same samples: same quantiles and intervals
    np.testing.assert_allclose(a.rank_idle_mean, b.rank_idle_mean, rtol=1e-5, atol=1e-6)
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        rep = b.representative[name].makespan
        assert rep == pytest.approx(np.quantile(b.makespan_samples, q), rel=0.02)


def test_sliced_run_holds_a_slice_not_a_block(monkeypatch) -> None:
    """Traced numpy memory of a 2,048-op, 2,048-sample Monte Carlo pass with 256-sample slices
    stays far below one whole-block float32 buffer (2,049 × 2,048 × 4 B = 16 MiB)."""
    plan = build_schedule("1f1b", 4, 256)
    graph = build_graph(plan)
    base = base_durations(plan, {"F": 1.0, "B": 2.0})
    monkeypatch.setattr(mc_mod, "MAX_CELLS", (plan.n_ops + 1) * 256)
    spec = parse_noise("sigma=0.05")
    tracemalloc.start()
    try:
        mc_mod.monte_carlo(graph, base, spec, SAMPLE_BLOCK, 1, {}, True, representative=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    block = (plan.n_ops + 1) * SAMPLE_BLOCK * 4
    # slices: 2,049 × 256 × 9 B (durations, ends, binding slots) ≈ 4.7 MB plus draw scratch;
    # whole blocks would hold 2.25 × ``block``
    assert peak < block / 2
