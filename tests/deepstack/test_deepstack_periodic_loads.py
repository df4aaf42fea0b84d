"""All-switch stages priced from one period of a repeating layout equal the whole layout's.

A dimension's groups fill runs of size · stride devices, so on an all-switch NoC the link loads
of every pod-aligned period are the same numbers at shifted keys (``switch_loads.period_devices``).
The patterns ``StagePatterns`` builds from one period must be exactly those of every group listed:
same busiest links, loads, capacities, energy per unit, hop latency and flow count.
"""

from __future__ import annotations

import deepstack as ds
import numpy as np
import pytest
from deepstack.placement import DIMS, groups, layout
from deepstack.stage import StagePattern
from deepstack.stage_patterns import StagePatterns, double_tree_levels
from deepstack.switch_loads import all_to_all_loads, flow_loads, period_devices

from tests.deepstack._switch_nocs import all_schemes, assert_same_pattern, switch_profile


def _profile(s3: int, s2: int, s1: int, nic: float | None) -> ds.NocProfile:
    return switch_profile(s3, s2, s1, nic)


def _schemes(n: int) -> list[ds.ParallelScheme]:
    return all_schemes(n)


def _stage_pairs(g: int) -> dict[str, list[tuple[int, int, int]]]:
    """Every position-pair stage the collectives build for a group of ``g``."""
    out = {"ring": [(1, i, (i + 1) % g) for i in range(g)], "p2p": [(1, 0, g - 1)]}
    if g & (g - 1) == 0:
        for k in range(g.bit_length() - 1):
            out[f"xor{k}"] = [(1, i, i ^ (1 << k)) for i in range(g)]
        for i, lvl in enumerate(double_tree_levels(g)):
            out[f"tree{i}"] = [(1, s, d) for s, d in lvl]
    return out


def _same(a: StagePattern, b: StagePattern) -> None:
    assert_same_pattern(a, b)


@pytest.mark.parametrize(
    ("shape", "nic"), [((4, 2, 4), None), ((4, 2, 4), 30e9), ((8, 2, 2), None), ((2, 4, 4), None)]
)
def test_period_patterns_equal_whole_layout(shape: tuple[int, int, int], nic) -> None:
    """Each stage of each (scheme, dim) built from one period is the one built from all groups,
    and at least some layouts of every profile do repeat."""
    router = ds.Network(_profile(*shape, nic)).router
    n = router.num_devices
    periodic = 0
    for scheme in _schemes(n):
        for dim in ("tp", "cp", "dp", "pp"):
            g = scheme.size(dim)
            if g < 2:
                continue
            stages = StagePatterns(router)  # fresh: no pattern shared between checks
            whole = groups(scheme, dim)
            period = period_devices(router, g * int(np.prod(scheme.sizes()[: DIMS.index(dim)])))
            periodic += period is not None
            for name, pairs in _stage_pairs(g).items():
                got = stages.pairs(scheme, dim, name, lambda pairs=pairs: pairs)
                arr = np.array(pairs)
                src, dst = whole[:, arr[:, 1]], whole[:, arr[:, 2]]
                _same(got, StagePattern(router, src, dst, np.broadcast_to(arr[:, 0], src.shape)))
            got = stages.a2a_stage(scheme, dim, g)
            _same(got, StagePattern.from_level_loads(router, all_to_all_loads(router, whole)))
    assert periodic > 0


def test_period_loads_repeat_at_shifted_keys() -> None:
    """The whole layout's per-level loads are the period's loads repeated (default link
    identity), and the flow count counts every period."""
    router = ds.Network(_profile(4, 2, 4, 30e9)).router
    scheme = ds.ParallelScheme(tp=2, cp=2, dp=8)
    period = period_devices(router, 4)  # cp groups: size 2, stride 2
    assert period == 8
    whole = groups(scheme, "cp")
    part = whole[whole[:, 0] < period]
    tiles = router.num_devices // period
    got = flow_loads(router, part[:, 0], part[:, 1], np.ones(len(part), np.int64), period)
    want = flow_loads(router, whole[:, 0], whole[:, 1], np.ones(len(whole), np.int64))
    assert (got.tiles, got.flows, got.hop) == (tiles, want.flows, want.hop)
    for x, y in zip(got.up + got.down + got.nic, want.up + want.down + want.nic, strict=True):
        np.testing.assert_array_equal(np.tile(x, tiles), y)


def test_no_period_with_paper_link_identity_or_whole_cluster() -> None:
    """Port-numbered (``paper_compat``) keys sum over instances: no period is used there, nor
    for a layout that spans the whole NoC."""
    prof = _profile(4, 2, 4, None)
    assert period_devices(ds.Network(prof, paper_compat=True).router, 2) is None
    assert period_devices(ds.Network(prof).router, 32) is None
    assert period_devices(ds.Network(prof).router, 2) == 8


def test_layout_key_equal_exactly_when_groups_equal() -> None:
    """``placement.layout`` identifies the groups array of a (scheme, dim): equal keys, equal
    arrays, and different keys, different arrays."""
    seen: dict[tuple, np.ndarray] = {}
    by_bytes: dict[bytes, tuple] = {}
    for scheme in _schemes(24):
        for dim in DIMS:
            g = groups(scheme, dim)
            key = layout(scheme, dim)
            if key in seen:
                np.testing.assert_array_equal(seen[key], g)
            seen[key] = g
            raw = g.shape[1].to_bytes(4, "little") + g.tobytes()
            assert by_bytes.setdefault(raw, key) == key
