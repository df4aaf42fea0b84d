"""The product's values where the reference is inconsistent (docs/deviations.md, issue 10).

Each test pins what the product does and says, next to it, why the reference's value differs.
"""

from __future__ import annotations

import deepstack as ds
import pytest
from deepstack.topology import CENTRE, Level

E = ds.EnergyConfig(1.0, 2.0, 3.0)
REL = 1e-12


def _hier(l3: Level, l2: Level, l1: Level) -> ds.NocProfile:
    return ds.make_hierarchy("deviation", l3, l2, l1, E)


def _approx(v: float) -> object:
    return pytest.approx(v, rel=REL, abs=0.0)


def test_non_switch_l1_under_non_switch_l2_never_goes_back_and_forth() -> None:
    """Deviation 1: the reference walks back and forth inside L1; the product's route is one
    shortest L1 walk per L2 hop, so no state repeats and no hop is reversed."""
    prof = _hier(
        Level("switch", 1, 1, 0.0, 50e9),
        Level("ring", 1, 4, 1e-6, 50e9),
        Level("mesh2d", 2, 2, 1e-7, 100e9),
    )
    net = ds.Network(prof)
    router = net.router
    n = prof.num_devices
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            states = router.states(src, dst)
            assert len(states) == len(set(states)), (src, dst, states)
            assert all(a != c for a, c in zip(states, states[2:], strict=False)), states
    # device 0 → 6: L1 walk 0 → 2 → 3 to the right-out port, cross to L2 node 1 at port 2
    assert router.states(0, 6) == [(0, 0, 0), (0, 0, 2), (0, 0, 3), (0, 1, 2)]
    assert router.chain(0, 6)[1] == _approx(2 * 1e-7 + 1e-6)
    got = net.all_reduce(ds.ParallelScheme(dp=16), "dp", 1 << 20)
    assert got.algorithm == "rabenseifner"
    assert got.hop_seconds == _approx(7.8e-06)
    assert got.link_seconds == _approx(5.767168e-05)
    assert got.noc_energy_pj == _approx(452984832.0)


def test_size_one_ring_dimension_has_no_self_loops() -> None:
    """Deviation 2: a size-1 ring dimension gives the reference self-loops that overwrite the
    switch centre's energy; the product has no such links and keeps the centre's own."""
    torus = Level("torus2d", 1, 4, 1e-6, 50e9)
    assert not [u for u, v in torus.neighbours if u == v]
    assert torus.neighbours == Level("ring", 1, 4, 1e-6, 50e9).neighbours
    prof = _hier(
        torus, Level("switch", 1, 1, 0.0, 50e9), Level("switch", 1, 4, 1e-7, 100e9, 4e11, 4e11)
    )
    net = ds.Network(prof)
    got = net.pipeline_p2p(ds.ParallelScheme(tp=2, dp=4, pp=2), 1000)
    # stage 0 = devices 0–7 (L3 nodes 0, 1), stage 1 = 8–15 (nodes 2, 3): 8 flows of 1000 B,
    # each two L1 port links + two centre self-loop increments (1 pJ/bit) + two L3 hops (3 pJ/bit)
    assert got.noc_energy_pj == _approx(8 * 1000 * 8 * (2 * 1 + 2 * 1 + 2 * 3))
    # hops: device → centre, two torus hops, centre → device; the L3 link 1 → 2 carries 8 flows
    assert got.hop_seconds == _approx(2 * 1e-7 + 2 * 1e-6)
    assert got.link_seconds == _approx(8 * 1000 / 50e9)


def test_every_routed_l3_crossing_is_timed() -> None:
    """Deviation 3: the reference leaves traffic on entries its bandwidth builder never creates
    untimed; every hop the product routes on physical neighbours has capacity."""
    prof = _hier(
        Level("torus2d", 2, 2, 2e-6, 25e9),
        Level("mesh2d", 2, 2, 1e-6, 50e9),
        Level("ring", 1, 4, 1e-7, 100e9),
    )
    net = ds.Network(prof)
    router = net.router
    n = prof.num_devices
    for src in range(n):
        for dst in range(n):
            if src != dst:
                ids, _ = router.chain(src, dst)
                assert not router.unmodelled(ids).any(), (src, dst)
    got = net.all_reduce(ds.ParallelScheme(dp=64), "dp", 1 << 20)
    assert got.warnings == ()
    assert got.algorithm == "rabenseifner"
    assert got.hop_seconds == _approx(2.84e-05)
    assert got.link_seconds == _approx(8.781824e-05)
    assert got.noc_energy_pj == _approx(2386558976.0)


def test_switch_centre_above_non_switch_l1_has_its_own_links() -> None:
    """Deviation 4: the reference turns the L2 centre (−1) into a negative link index that
    numpy wraps onto another link or raises on; the product keys links by coordinates, so
    centre links are distinct, and their (unmodelled) traffic is reported, not misattributed."""
    prof = _hier(
        Level("switch", 1, 1, 0.0, 50e9),
        Level("switch", 1, 4, 1e-6, 50e9, 2e11, 2e11),
        Level("ring", 1, 4, 1e-7, 100e9),
    )
    net = ds.Network(prof)
    got = net.all_reduce(ds.ParallelScheme(tp=4, dp=4), "dp", 1 << 20)
    keys = net.router.link_keys
    centre = [k for k in keys if k[0] == "link" and CENTRE in (k[1][1], k[2][1])]
    real = {k for k in keys if k[0] == "link" and CENTRE not in (k[1][1], k[2][1])}
    assert centre and not real.intersection(centre)
    assert len(got.warnings) == 1 and "not modelled" in got.warnings[0]
    assert got.algorithm == "rabenseifner"
    assert got.hop_seconds == _approx(9.6e-06)
    assert got.link_seconds == _approx(0.00025165824)
    assert got.noc_energy_pj == _approx(805306368.0)
