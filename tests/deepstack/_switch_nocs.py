"""Random all-switch NoCs and every parallel scheme of a size, for the routing property tests."""

from __future__ import annotations

import itertools
from dataclasses import replace

import deepstack as ds
import numpy as np
from deepstack.topology import Level


def switch_profile(s3: int, s2: int, s1: int, nic: float | None, salt: int = 0) -> ds.NocProfile:
    """A three-level switch hierarchy of fan-outs ``s3`` × ``s2`` × ``s1`` with seeded random
    latencies (0–5 µs) and bandwidths (10–400 GB/s) per level; ``nic``: NIC bandwidth, B/s."""
    rng = np.random.default_rng(s3 * 100 + s2 * 10 + s1 + salt)

    def sw(n: int) -> Level:
        return Level("switch", 1, n, float(rng.uniform(0, 5e-6)), float(rng.uniform(10e9, 400e9)))

    prof = ds.make_hierarchy("sw", sw(s3), sw(s2), sw(s1), ds.EnergyConfig(1.0, 2.5, 4.0))
    return replace(prof, nic_bandwidth_bps=nic)


def all_schemes(n: int) -> list[ds.ParallelScheme]:
    """Every (tp, cp, dp, pp) scheme whose product is ``n`` devices."""
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return [
        ds.ParallelScheme(tp=tp, cp=cp, dp=dp, pp=n // (tp * cp * dp))
        for tp, cp, dp in itertools.product(divisors, repeat=3)
        if n % (tp * cp * dp) == 0
    ]


def assert_same_pattern(a, b, *, with_one: bool = False) -> None:
    """Two routed ``StagePattern``s are the same: flows, hop, energy per unit, unmodelled share
    (and the one-flow flag with ``with_one``), link ids, multiplicities and capacities."""
    fields = ("flows", "hop", "energy_per_unit", "unmodelled") + (("_one",) if with_one else ())
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    for name in ("link_ids", "mult", "cap"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
