"""Mixed GPU pools (issue 30, item 3): the exact solver against brute force and by hand."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.search.serving.pool_mix import (
    METHOD,
    PoolOption,
    cheapest_fixed_mix,
    cheapest_mix,
    cheapest_mix_per_interval,
)


def brute_force(options: list[PoolOption], demand: float) -> tuple[float, int] | None:
    """(cost, GPUs) of the cheapest mix (then fewest GPUs) by trying every count up to the cap
    (uncapped: twice what serves the demand alone, more than any cheapest mix uses)."""
    ranges = []
    for o in options:
        alone = 2 * math.ceil(demand / o.tokens_per_second) + 1
        cap = alone if o.max_gpus is None else min(alone, o.max_gpus // o.gpus_per_replica)
        ranges.append(range(cap + 1))
    best = None
    for counts in itertools.product(*ranges):
        served = sum(r * o.tokens_per_second for r, o in zip(counts, options, strict=True))
        if served < demand:
            continue
        cost = sum(
            r * o.gpus_per_replica * o.usd_per_gpu_hour
            for r, o in zip(counts, options, strict=True)
        )
        gpus = sum(r * o.gpus_per_replica for r, o in zip(counts, options, strict=True))
        if best is None or (cost, gpus) < best:
            best = (cost, gpus)
    return best


def _random_case(rng: random.Random) -> tuple[list[PoolOption], float]:
    options = [
        PoolOption(
            name=f"g{i}",
            gpus_per_replica=rng.choice([1, 2, 4, 8]),
            usd_per_gpu_hour=rng.choice([1.5, 2.0, 2.25, 3.75, 4.0]),
            tokens_per_second=rng.choice([300.0, 700.0, 1000.0, 1600.0, 2500.0]),
            max_gpus=rng.choice([None, 0, 4, 8, 16, 24]),
        )
        for i in range(rng.randint(1, 3))
    ]
    return options, rng.choice([0.0, 500.0, 1800.0, 4000.0, 7300.0])


@pytest.mark.parametrize("seed", range(60))
def test_the_solver_matches_brute_force(seed):
    options, demand = _random_case(random.Random(seed))
    want = brute_force(options, demand)
    got = cheapest_mix(options, demand)
    if want is None:
        assert got is None
        return
    assert got is not None and got.method == METHOD
    assert got.usd_per_hour == pytest.approx(want[0], rel=1e-12, abs=1e-12)
    assert got.gpus == want[1]
    assert got.tokens_per_second >= demand
    for o in options:
        if o.max_gpus is not None:
            assert got.replicas[o.name] * o.gpus_per_replica <= o.max_gpus


def test_a_hand_computed_mix():
    """Demand 10 000 tokens/s. H200 replicas (8 × $2.25 = $18/h, 3000 tokens/s: $0.006 per
    token/s·h) are cheaper per token than H100 ones (8 × $2 = $16/h, 2000 tokens/s: $0.008) but
    only 16 H200 GPUs (2 replicas, 6000 tokens/s) are available: the rest, 4000 tokens/s, is two
    H100 replicas. $36 + $32 = $68/h. (Three H200 replicas would be $54/h.)"""
    h100 = PoolOption("h100", 8, 2.0, 2000.0)
    h200 = PoolOption("h200", 8, 2.25, 3000.0, max_gpus=16)
    mix = cheapest_mix([h100, h200], 10_000.0)
    assert mix.replicas == {"h100": 2, "h200": 2}
    assert mix.usd_per_hour == pytest.approx(68.0)
    assert mix.gpus == 32 and mix.tokens_per_second == 10_000.0
    # Without the cap the cheapest rate alone needs 4 H200 replicas ($72/h, 12 000 tokens/s of
    # which 2000 idle); 3 H200 + 1 H100 is $70; the exact mix is still 2 + 2 at $68.
    uncapped = cheapest_mix([h100, PoolOption("h200", 8, 2.25, 3000.0)], 10_000.0)
    assert uncapped.replicas == {"h100": 2, "h200": 2} and uncapped.usd_per_hour == 68.0


def test_per_interval_and_fixed_mixes():
    opts = [PoolOption("a", 1, 1.0, 100.0), PoolOption("b", 4, 1.0, 500.0)]
    per = cheapest_mix_per_interval(opts, [0.0, 100.0, 450.0, 520.0])
    assert [m.usd_per_hour for m in per] == [0.0, 1.0, 4.0, 5.0]
    fixed = cheapest_fixed_mix(opts, [0.0, 100.0, 450.0, 520.0])
    assert fixed.usd_per_hour == 5.0 and fixed.tokens_per_second >= 520.0


def test_an_unservable_load_has_no_mix():
    assert cheapest_mix([PoolOption("a", 8, 2.0, 1000.0, max_gpus=8)], 1500.0) is None


@pytest.mark.parametrize(
    ("options", "demand", "field"),
    [
        ([], 1.0, "options"),
        ([PoolOption("a", 0, 1.0, 1.0)], 1.0, "options.a.gpus_per_replica"),
        ([PoolOption("a", 1, 1.0, 0.0)], 1.0, "options.a.tokens_per_second"),
        ([PoolOption("a", 1, 1.0, 1.0), PoolOption("a", 1, 1.0, 1.0)], 1.0, "options"),
        ([PoolOption("a", 1, 1.0, 1.0)], math.nan, "demand_tps"),
    ],
)
def test_bad_options_name_the_field(options, demand, field):
    with pytest.raises(PlenaInputError) as info:
        cheapest_mix(options, demand)
    assert info.value.field == field
