"""Double-tree down-sweep stages from their up-sweep's loads (``StagePatterns.pairs(reverse=)``).

On an all-switch NoC a down-sweep level is its up-sweep level's pairs reversed in the same order,
so its per-level loads are the up-sweep's with up and down swapped (``LevelLoads.reversed``).
Each such pattern must be exactly the one routed from its own flows (busiest links, loads,
capacities, energy per unit, hop latency, flow count), and the router must number its links in
the same order as when every stage is routed apart (the busiest link reported on a tie).
"""

from __future__ import annotations

import deepstack as ds
import numpy as np
import pytest
from deepstack.placement import groups
from deepstack.stage import StagePattern
from deepstack.stage_patterns import StagePatterns, double_tree_levels
from deepstack.switch_loads import flow_loads

from tests.deepstack._switch_nocs import all_schemes, assert_same_pattern, switch_profile


def _profile(s3: int, s2: int, s1: int, nic: float | None) -> ds.NocProfile:
    return switch_profile(s3, s2, s1, nic, salt=7)


def _schemes(n: int) -> list[ds.ParallelScheme]:
    return all_schemes(n)


def _same(a: StagePattern, b: StagePattern) -> None:
    assert_same_pattern(a, b, with_one=True)


def _routed_apart(stages: StagePatterns, scheme: ds.ParallelScheme, dim: str, g: int) -> list:
    """The double-tree stages routed one by one from their own pairs (no ``reverse``), in the
    order ``tree_stages`` asks for them."""
    levels = double_tree_levels(g)
    up = [stages.pairs(scheme, dim, f"u{i}", lambda lvl=lvl: [(1, s, d) for s, d in lvl])
          for i, lvl in enumerate(levels)]  # fmt: skip
    down = [stages.pairs(scheme, dim, f"d{i}", lambda i=i: [(1, d, s) for s, d in levels[i]])
            for i in range(len(levels) - 1, -1, -1)]  # fmt: skip
    return up + down


@pytest.mark.parametrize(
    ("shape", "nic", "paper"),
    [((4, 2, 4), None, False), ((4, 2, 4), 30e9, False), ((2, 4, 4), None, True),
     ((8, 2, 2), 50e9, False)],
)  # fmt: skip
def test_tree_down_from_reversed_loads_equals_routed(shape, nic, paper: bool) -> None:
    prof = _profile(*shape, nic)
    fast, apart = ds.Network(prof, paper_compat=paper), ds.Network(prof, paper_compat=paper)
    n = fast.router.num_devices
    checked = 0
    for scheme in _schemes(n):
        for dim in ("tp", "cp", "dp", "pp"):
            g = scheme.size(dim)
            if g < 2 or g & (g - 1):
                continue
            # one StagePatterns per router, as a Network keeps: later layouts share patterns
            got = fast._stages.tree_stages(scheme, dim, g)
            want = _routed_apart(apart._stages, scheme, dim, g)
            assert len(got) == len(want)
            for a, b in zip(got, want, strict=True):
                _same(a, b)
            checked += len(got)
            assert not fast._stages._reversed  # every kept reversed load was taken
    assert checked > 0
    # links numbered in the same first-use order as when every stage is routed apart
    assert fast.router.link_keys == apart.router.link_keys


def test_reversed_loads_are_the_reversed_flows_loads() -> None:
    """``LevelLoads.reversed`` is ``flow_loads`` of the swapped flows, array for array."""
    router = ds.Network(_profile(4, 2, 4, 30e9)).router
    scheme = ds.ParallelScheme(tp=8, dp=4)
    g = groups(scheme, "tp")
    pairs = np.array([(s, d) for s, d in double_tree_levels(8)[0]])
    src, dst = g[:, pairs[:, 0]].ravel(), g[:, pairs[:, 1]].ravel()
    w = np.ones(len(src), dtype=np.int64)
    fwd, rev = flow_loads(router, src, dst, w), flow_loads(router, dst, src, w)
    mirrored = fwd.reversed()
    for a, b in zip((*mirrored.up, *mirrored.down, *mirrored.nic),
                    (*rev.up, *rev.down, *rev.nic), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)
    assert (mirrored.hop, mirrored.flows, mirrored.tiles) == (rev.hop, rev.flows, rev.tiles)
