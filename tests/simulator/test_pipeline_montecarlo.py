"""Monte Carlo statistics, noise model and common random numbers (pipeline-simulator §2, §3,
§7.2, §7.5)."""

from __future__ import annotations

import numpy as np
import pytest

from plena_opt.simulator import build_schedule, simulate
from plena_opt.simulator.engine import NoiseSampler, parse_noise
from plena_opt.simulator.engine.noise import moe_imbalance_pool

DUR = {"F": 1.0, "B": 2.0}


def test_zero_variance_every_sample_is_the_deterministic_timeline() -> None:
    plan = build_schedule("interleaved-1f1b", 4, 8, 2)
    res = simulate(plan, DUR, noise=None, samples=300, seed=3)
    assert np.all(res.mc.makespan_samples == res.makespan)
    for name in ("p50", "p99"):
        tl = res.mc.representative[name]
        for a, b in zip(tl.ops, res.deterministic.ops, strict=True):
            assert (a.start, a.end) == (b.start, b.end)
    # sigma = 0 written explicitly, and a zero straggler probability, are zero noise too
    res2 = simulate(plan, DUR, noise="sigma=0,straggler_p=0", samples=50)
    assert np.all(res2.mc.makespan_samples == res.makespan)


def test_mean_above_deterministic_and_matches_spec_magnitude() -> None:
    """Spec §3 table, 1F1B p=4 m=8 σ=0.1: mean/det ≈ 1.0339, p99/det ≈ 1.0815 (sampling
    dependent); 4,000 samples give a standard error of the mean ratio of about 0.0004."""
    res = simulate(build_schedule("1f1b", 4, 8), DUR, noise="sigma=0.1", samples=4000, seed=1)
    mc = res.mc
    assert mc.makespan.mean > res.makespan
    assert mc.makespan.mean / res.makespan == pytest.approx(1.0339, abs=0.003)
    assert mc.makespan.p99 / res.makespan == pytest.approx(1.0815, abs=0.01)
    lo, hi = mc.makespan.mean_ci
    assert lo < mc.makespan.mean < hi
    for q in ("p50", "p90", "p99"):
        lo, hi = getattr(mc.makespan, f"{q}_ci")
        assert lo <= getattr(mc.makespan, q) <= hi and lo < hi
    # representative samples are the ones nearest the quantiles
    assert mc.representative["p99"].makespan == pytest.approx(mc.makespan.p99, rel=0.01)


def test_fixed_seed_is_bit_identical_and_seeds_differ() -> None:
    plan = build_schedule("zb-h1", 4, 8)
    dur = {"F": 1.0, "I": 1.0, "W": 1.0}
    noise = "sigma=0.05,rank=0.03,straggler_p=0.05"
    a = simulate(plan, dur, noise, samples=2500, seed=7).mc
    b = simulate(plan, dur, noise, samples=2500, seed=7).mc
    c = simulate(plan, dur, noise, samples=2500, seed=8).mc
    assert np.array_equal(a.makespan_samples, b.makespan_samples)
    assert np.array_equal(a.criticality_by_op, b.criticality_by_op)
    assert not np.array_equal(a.makespan_samples, c.makespan_samples)


def test_common_random_numbers_same_slot_same_noise() -> None:
    """GPipe and 1F1B hold the same (rank, op type, micro-batch) slots in different orders: the
    same seed gives every slot the same factor in both plans."""
    spec = parse_noise("sigma=0.1,rank=0.05,straggler_p=0.1")
    g, o = build_schedule("gpipe", 4, 8), build_schedule("1f1b", 4, 8)
    fg = NoiseSampler(g, spec, 11).factors(0, 100)
    fo = NoiseSampler(o, spec, 11).factors(0, 100)
    slot_o = {(x.rank, x.op_type, x.microbatch): x.id for x in o.ops}
    for x in g.ops:
        assert np.array_equal(fg[x.id], fo[slot_o[(x.rank, x.op_type, x.microbatch)]])
    # a plan with more micro-batches keeps the first ones' noise (prefix-stable rows)...
    # ...and block 1 differs from block 0
    assert not np.array_equal(fg, NoiseSampler(g, spec, 11).factors(1, 100))
    # the same sample prefix is reproduced whatever the number of samples requested
    assert np.array_equal(fg[:, :40], NoiseSampler(g, spec, 11).factors(0, 40))


def test_crn_reduces_variance_of_plan_differences() -> None:
    g, o = build_schedule("gpipe", 4, 8), build_schedule("1f1b", 4, 8)
    kw = {"noise": "sigma=0.1", "samples": 2000}
    dg = simulate(g, DUR, seed=5, **kw).mc.makespan_samples
    same = simulate(o, DUR, seed=5, **kw).mc.makespan_samples
    other = simulate(o, DUR, seed=6, **kw).mc.makespan_samples
    assert np.var(dg - same) < 0.5 * np.var(dg - other)


def test_lognormal_jitter_has_mean_one_and_rank_factor_is_persistent() -> None:
    plan = build_schedule("gpipe", 2, 4)
    f = NoiseSampler(plan, parse_noise("sigma=0.2"), 0).factors(0, 2048)
    # mean of 16 × 2048 lognormals with σ=0.2: standard error ≈ 0.2/√32768 ≈ 0.0011
    assert f.mean() == pytest.approx(1.0, abs=0.005)
    assert np.log(f).std() == pytest.approx(0.2, rel=0.03)
    r = NoiseSampler(plan, parse_noise("rank=0.1"), 0).factors(0, 512)
    for rank in range(2):
        rows = r[[o.id for o in plan.ops if o.rank == rank]]
        assert np.all(rows == rows[0])  # same factor for every op of the rank in a sample
    assert not np.array_equal(r[plan.ranks[0][0]], r[plan.ranks[1][0]])


def test_stragglers_hit_at_their_rate_within_their_range() -> None:
    plan = build_schedule("gpipe", 4, 1)
    spec = parse_noise("straggler_p=0.2,straggler_low=1.5,straggler_high=2.0")
    f = NoiseSampler(plan, spec, 0).factors(0, 2048)
    hit = f > 1.0
    # binomial(8192, 0.2): sd ≈ 0.0044
    assert hit.mean() == pytest.approx(0.2, abs=0.02)
    assert np.all((f[hit] >= 1.5) & (f[hit] <= 2.0)) and np.all(f[~hit] == 1.0)


def test_moe_imbalance_pool_and_factor() -> None:
    spec = parse_noise({"moe": {"experts": 16, "top_k": 2, "ep": 4, "tokens": 64, "alpha": 2.0}})
    pool = moe_imbalance_pool(spec.moe, 0)
    assert np.all(pool >= 1.0) and pool.mean() > 1.05  # max over ranks ≥ mean load
    more_tokens = parse_noise(
        {"moe": {"experts": 16, "top_k": 2, "ep": 4, "tokens": 4096, "alpha": 50.0}}
    )
    assert moe_imbalance_pool(more_tokens.moe, 0).mean() < pool.mean()  # law of large numbers
    plan = build_schedule("gpipe", 2, 2)
    f = NoiseSampler(plan, spec, 0).factors(0, 256)
    frac = spec.moe.fraction
    assert np.all(f >= 1.0) and np.all(f <= 1 - frac + frac * pool.max() + 1e-6)
    only_f = parse_noise({"moe": {"experts": 8, "tokens": 32, "op_types": ["F"]}})
    f2 = NoiseSampler(plan, only_f, 0).factors(0, 64)
    assert np.all(f2[[o.id for o in plan.ops if o.op_type == "B"]] == 1.0)


def test_criticality_by_op_type() -> None:
    res = simulate(build_schedule("1f1b", 4, 8), DUR, "sigma=0.05", samples=500, seed=2)
    crit = res.mc.criticality_by_op
    assert np.all((crit >= 0) & (crit <= 1))
    # the first forward of rank 0 starts every critical path; the last op ends it
    assert crit[res.plan.ranks[0][0]] == 1.0
    assert set(res.mc.criticality_by_type) == {"F", "B"}
    # under zero noise the criticality is the deterministic critical path (0/1 per op)
    det = simulate(build_schedule("1f1b", 4, 8), DUR, None, samples=10)
    on_path = np.zeros(det.plan.n_ops)
    on_path[list(det.deterministic.critical_path)] = 1.0
    assert np.array_equal(det.mc.criticality_by_op, on_path)


def test_samples_must_be_non_negative_integer() -> None:
    from plena_opt.errors import PlenaInputError

    with pytest.raises(PlenaInputError) as exc:
        simulate(build_schedule("1f1b", 2, 2), DUR, samples=-1)
    assert exc.value.field == "samples"


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_must_be_a_uint32_even_without_samples(seed: int) -> None:
    """Rule (review fix 1): 0 <= seed < 2**32, checked by the library for CLI and server alike
    (numpy's SeedSequence raised a bare ValueError for negative seeds)."""
    from plena_opt.errors import PlenaInputError

    for samples in (0, 5):
        with pytest.raises(PlenaInputError) as exc:
            simulate(build_schedule("1f1b", 2, 2), DUR, samples=samples, seed=seed)
        assert exc.value.field == "seed" and "2**32" in exc.value.rule
    top = 2**32 - 1
    assert simulate(build_schedule("1f1b", 2, 2), DUR, samples=5, seed=top).mc.seed == top


@pytest.mark.parametrize(
    ("value", "rule"), [(1e308, "<= 1e+15"), (float("inf"), "finite"), (-0.5, ">= 0")]
)
def test_library_rejects_absurd_base_durations(value: float, rule: str) -> None:
    """Rule (review fix 2): a base duration above MAX_DURATION (1e15) made sums overflow to inf and
    Monte Carlo statistics NaN; map and per-op array forms are both checked."""
    from plena_opt.errors import PlenaInputError

    plan = build_schedule("1f1b", 2, 2)
    with pytest.raises(PlenaInputError) as exc:
        simulate(plan, {"F": value, "B": 1.0}, samples=10)
    assert exc.value.field == "durations.F" and rule in exc.value.rule
    with pytest.raises(PlenaInputError) as exc:
        simulate(plan, np.full(plan.n_ops, value))
    assert exc.value.field == "durations"
    res = simulate(plan, {"F": 1e15, "B": 1e15}, samples=10)  # the bound itself is accepted
    assert np.isfinite(res.mc.makespan.mean) and res.makespan == pytest.approx(3 * 2e15)
