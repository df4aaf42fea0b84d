"""Property-based invariants of the simulator (pipeline-simulator §7.3) with hypothesis."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from plena_opt.simulator import build_schedule, simulate
from plena_opt.simulator.engine import DepReason
from plena_opt.simulator.scheduler import SCHEDULE_OP_TYPES

EPS = 1e-9  # float64 sums of at most a few hundred durations in [0, 10]


@st.composite
def plans(draw):
    name = draw(st.sampled_from(sorted(SCHEDULE_OP_TYPES)))
    p = draw(st.integers(1, 4))
    if name in ("interleaved-1f1b", "bigmac-vpp"):
        v = draw(st.integers(1, 3))
        m = p * draw(st.integers(1, 3))
    else:
        v, m = 1, draw(st.integers(1, 6))
    plan = build_schedule(name, p, m, v)
    dur = {
        t: draw(st.floats(0.0, 10.0, allow_nan=False, allow_infinity=False))
        for t in SCHEDULE_OP_TYPES[name]
    }
    return plan, dur


@settings(max_examples=40, deadline=None)
@given(plans())
def test_timeline_invariants(case) -> None:
    plan, dur = case
    before = plan.fingerprint()
    res = simulate(plan, dur)
    det = res.deterministic
    assert plan.fingerprint() == before  # the plan is never mutated
    end = {t.op.id: t.end for t in det.ops}
    for t in det.ops:
        for d in t.deps:  # every op starts after each dependency ends
            assert t.start >= end[d.src] + d.lag - EPS
        assert t.wait >= -EPS
        assert t.duration == dur[t.op.op_type] or abs(t.duration - dur[t.op.op_type]) < EPS
    for order in plan.ranks:  # rank order kept, no overlap on a rank
        for a, b in zip(order, order[1:], strict=False):
            assert det.ops[b].start >= det.ops[a].end - EPS
    assert det.makespan >= max(det.rank_busy) - EPS
    # makespan ≥ the longest pure-data dependency chain
    longest = {}
    for j in res.graph.topo:
        t = det.ops[j]
        data = [longest[d.src] for d in t.deps if d.reason is not DepReason.RANK_ORDER]
        longest[t.op.id] = max(data, default=0.0) + t.duration
    assert det.makespan >= max(longest.values(), default=0.0) - EPS
    # the critical path is a chain of binding dependencies ending at the makespan
    if det.critical_path:
        assert abs(det.ops[det.critical_path[-1]].end - det.makespan) < EPS


@settings(max_examples=30, deadline=None)
@given(plans(), st.floats(0.1, 10.0))
def test_scale_invariance(case, c: float) -> None:
    plan, dur = case
    base = simulate(plan, dur).makespan
    scaled = simulate(plan, {k: v * c for k, v in dur.items()}).makespan
    assert abs(scaled - c * base) <= 1e-9 * max(1.0, c * base)


@settings(max_examples=30, deadline=None)
@given(plans(), st.data())
def test_monotonicity(case, data) -> None:
    plan, dur = case
    base = np.array([dur[o.op_type] for o in plan.ops])
    j = data.draw(st.integers(0, plan.n_ops - 1))
    delta = data.draw(st.floats(0.0, 5.0))
    m0 = simulate(plan, base).makespan
    bumped = base.copy()
    bumped[j] += delta
    m1 = simulate(plan, bumped).makespan
    assert m0 - EPS <= m1 <= m0 + delta + EPS


@settings(max_examples=15, deadline=None)
@given(plans(), st.integers(0, 2**31 - 1))
def test_monte_carlo_samples_respect_the_deterministic_structure(case, seed: int) -> None:
    """Sampling never mutates the plan and keeps makespans non-negative (positive when the
    deterministic one is)."""
    plan, dur = case
    res = simulate(plan, dur, noise={"jitter_sigma": 0.1}, samples=64, seed=seed)
    assert res.plan.fingerprint() == plan.fingerprint()
    assert np.all(res.mc.makespan_samples >= 0)
    if res.makespan > 1e-30:  # float32 samples: smaller values underflow to 0
        assert np.all(res.mc.makespan_samples > 0)
