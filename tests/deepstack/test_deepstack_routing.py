"""Routing invariants on every topology kind at every level (network-model §3)."""

from __future__ import annotations

import itertools

import deepstack as ds
import numpy as np
import pytest
from deepstack.stage import StagePattern
from deepstack.topology import CENTRE, Level

SHAPES = {
    "switch": (1, 4),
    "all_to_all": (2, 2),
    "ring": (1, 4),
    "chain": (1, 4),
    "mesh2d": (2, 2),
    "torus2d": (2, 4),
    "mchain_nring": (2, 2),
    "mring_nchain": (4, 2),
}
COMBOS = [("torus2d", k2, k1) for k2, k1 in itertools.product(SHAPES, SHAPES)] + [
    ("all_to_all", "mesh2d", "switch"),
    ("all_to_all", "ring", "chain"),
    ("switch", "ring", "switch"),
    ("switch", "mesh2d", "torus2d"),
]


def _profile(k3: str, k2: str, k1: str) -> ds.NocProfile:
    def lv(kind: str, hop: float, bw: float) -> Level:
        return Level(kind, *SHAPES[kind], hop, bw)

    return ds.make_hierarchy(
        "x", lv(k3, 3e-6, 10e9), lv(k2, 2e-6, 20e9), lv(k1, 1e-6, 40e9), ds.EnergyConfig(1, 2, 3)
    )


@pytest.mark.parametrize(("k3", "k2", "k1"), COMBOS)
def test_routes_reach_destination_by_single_level_steps(k3: str, k2: str, k1: str) -> None:
    prof = _profile(k3, k2, k1)
    router = ds.Network(prof).router
    n = prof.num_devices
    for src in range(0, n, 9):
        for dst in range(1, n, 4):
            if src == dst:
                continue
            states = router.states(src, dst)
            assert states[0] == router.coords(src) and states[-1] == router.coords(dst)
            latency = 0.0
            for prev, cur in zip(states, states[1:], strict=False):
                level = next(i for i in range(3) if prev[i] != cur[i])
                latency += prof.levels[level].hop_latency_s
                u, v = prev[level], cur[level]
                lv = prof.levels[level]
                # an intra-level step is a physical neighbour hop or a move to/from a centre
                assert CENTRE in (u, v) or (u, v) in lv.neighbours, (level, u, v)
            assert router.chain(src, dst)[1] == pytest.approx(latency, rel=1e-12)
            if router.coords(src)[:2] == router.coords(dst)[:2] and k1 == "switch":
                assert latency == pytest.approx(2e-6)


def test_switch_only_route_shape() -> None:
    """§3.3: device → L1 centre → node port → L2 centre → other node → L1 centre → device."""
    router = ds.Network(ds.switch_noc(16, 2)).router
    assert router.states(1, 10) == [
        (0, 0, 1),
        (0, 0, CENTRE),
        (0, CENTRE, CENTRE),
        (0, 1, CENTRE),
        (0, 1, 2),
    ]


def test_memoised_fast_path_equals_per_pair_routing() -> None:
    """The shared-segment fast path (innermost switch) loads exactly the links that routing every
    pair separately loads, with the same longest route (multi-port mesh sides exercise the port
    hash)."""
    prof = ds.torus_mesh_switch((2, 2), (4, 4), 4)
    net = ds.Network(prof)
    n = prof.num_devices
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    keep = (src * 7 + dst * 3) % 5 == 0
    src, dst = src[keep], dst[keep]
    w = (src % 3 + 1).astype(np.int64)
    fast = StagePattern(net.router, src, dst, w)
    loads: dict[tuple, float] = {}
    ref = ds.Router(prof)
    hop = 0.0
    for s, d, k in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        states = ref.states(s, d)
        ids, lat = ref._steps(states)
        hop = max(hop, lat)
        for i in ids:
            loads[ref.link_keys[i]] = loads.get(ref.link_keys[i], 0.0) + k
    cap = {ref.link_keys[i]: c for i, c in enumerate(ref.arrays()[0])}
    worst = max(load / cap[key] for key, load in loads.items() if cap[key] > 0)
    got = fast.cost(1000)
    assert got.hop_seconds == pytest.approx(hop, rel=1e-12)
    assert got.link_seconds == pytest.approx(worst * 1000, rel=1e-12)
    epb = {ref.link_keys[i]: e for i, e in enumerate(ref.arrays()[1])}
    energy = sum(load * 1000 * 8 * epb[key] for key, load in loads.items())
    assert got.energy_pj == pytest.approx(energy, rel=1e-12)
