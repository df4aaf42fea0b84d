"""All-switch stages priced from per-level port loads equal per-pair routing (network-model §4.2).

Every pattern the collectives build (all-to-all from the group shape, xor, ring, tree, p2p) is
priced both ways on random all-switch hierarchies, default and ``paper_compat`` link identity.
"""

from __future__ import annotations

import itertools
import math

import deepstack as ds
import numpy as np
import pytest
from deepstack.placement import groups
from deepstack.stage import StagePattern
from deepstack.switch_loads import all_to_all_loads
from deepstack.topology import Level

REL = 1e-12


def _profile(s3: int, s2: int, s1: int, seed: int) -> ds.NocProfile:
    rng = np.random.default_rng(seed)

    def sw(n: int) -> Level:
        return Level("switch", 1, n, float(rng.uniform(0, 5e-6)), float(rng.uniform(10e9, 400e9)))

    return ds.make_hierarchy("sw", sw(s3), sw(s2), sw(s1), ds.EnergyConfig(1.0, 2.5, 4.0))


def _same(a: StagePattern, b: StagePattern, payload: int = 12345) -> None:
    ca, cb = a.cost(payload), b.cost(payload)
    assert a.flows == b.flows
    assert ca.hop_seconds == pytest.approx(cb.hop_seconds, rel=REL, abs=0.0)
    assert ca.link_seconds == pytest.approx(cb.link_seconds, rel=REL, abs=0.0)
    assert ca.energy_pj == pytest.approx(cb.energy_pj, rel=REL, abs=0.0)
    assert a.unmodelled == b.unmodelled == 0


SHAPES = [(1, 1, 8), (1, 4, 8), (2, 2, 4), (4, 2, 2), (2, 3, 4)]


@pytest.mark.parametrize(("shape", "paper"), list(itertools.product(SHAPES, [False, True])))
def test_closed_form_matches_routed_pairs(shape: tuple[int, int, int], paper: bool) -> None:
    prof = _profile(*shape, seed=sum(shape))
    net = ds.Network(prof, paper_compat=paper)
    router = net.router
    n = prof.num_devices
    rng = np.random.default_rng(n)
    for tp, dp in [(d, n // d) for d in range(1, n + 1) if n % d == 0]:
        scheme = ds.ParallelScheme(tp=tp, dp=dp)
        for dim in ("tp", "dp"):
            g = groups(scheme, dim)
            size = g.shape[1]
            if size < 2:
                continue
            i, j = np.nonzero(~np.eye(size, dtype=bool))
            routed = StagePattern(
                router, g[:, i], g[:, j], np.ones((g.shape[0], len(i))), routed=True
            )
            _same(StagePattern.from_level_loads(router, all_to_all_loads(router, g)), routed)
            # ring, an xor stage and random weights
            ring = np.arange(size)
            for dst_pos in ((ring + 1) % size, ring ^ (1 << int(math.log2(size) // 2))):
                if dst_pos.max() >= size:
                    continue
                w = rng.integers(0, 4, size=(g.shape[0], size))
                src, dst = g[:, ring], g[:, dst_pos]
                _same(
                    StagePattern(router, src, dst, w),
                    StagePattern(router, src, dst, w, routed=True),
                )


def test_collectives_on_big_switch_cluster_use_no_pair_routes() -> None:
    """A whole-cluster all-reduce on 4,096 devices is priced without routing any pair."""
    prof = _profile(4, 16, 64, seed=1)
    net = ds.Network(prof)
    got = net.all_reduce(ds.ParallelScheme(dp=4096), "dp", 1 << 20)
    assert got.algorithm is not None and got.seconds > 0
    assert net.router.cached_routes == 0
    # the one-shot candidate: a device's link carries 4,095 messages, a node's uplink 64 × 4,032,
    # a pod's uplink 1,024 × 3,072
    a2a = got.candidates["all_to_all"]
    bw3, bw2, bw1 = (lv.link_bandwidth_bps for lv in prof.levels)
    want = max(4095 / bw1, 64 * 4032 / bw2, 1024 * 3072 / bw3) * (1 << 20)
    assert a2a.link_seconds == pytest.approx(want, rel=REL)


def _reference_cost(router, src, dst, w, payload: int) -> tuple[float, float, float]:
    """(hop s, link s, energy pJ) from every pair's scalar route (``Router.chain``)."""
    hop, loads = 0.0, {}
    for a, b, x in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        if a == b or x <= 0:
            continue
        ids, lat = router.chain(a, b)
        hop = max(hop, lat)
        for i in ids.tolist():
            loads[i] = loads.get(i, 0.0) + x
    cap, epb = router.arrays()
    link = max((v * payload / cap[i] for i, v in loads.items() if cap[i] > 0), default=0.0)
    energy = sum(v * 8.0 * epb[i] for i, v in loads.items()) * payload
    return hop, link, energy


MIXED = [
    (Level("torus2d", 4, 4, 3e-6, 20e9), Level("mesh2d", 4, 4, 1e-6, 60e9), 2),
    (Level("mesh2d", 4, 2, 3e-6, 20e9), Level("torus2d", 2, 4, 1e-6, 60e9), 4),
    (Level("ring", 1, 6, 2e-6, 30e9), Level("mchain_nring", 2, 6, 1e-6, 50e9), 2),
    (Level("all_to_all", 2, 2, 2e-6, 30e9), Level("mring_nchain", 4, 4, 1e-6, 50e9), 2),
    (Level("switch", 1, 4, 2e-6, 30e9), Level("ring", 1, 6, 1e-6, 50e9), 2),
    (Level("torus2d", 2, 6, 2e-6, 30e9), Level("switch", 1, 3, 1e-6, 50e9), 2),
    (Level("chain", 1, 4, 2e-6, 30e9), Level("all_to_all", 2, 3, 1e-6, 50e9), 3),
]


@pytest.mark.parametrize("case", range(len(MIXED)))
def test_split_middles_match_scalar_routes(case: int) -> None:
    """Innermost-switch hierarchies with hashed port choices: walks + cores = scalar routes."""
    l3, l2, ports = MIXED[case]
    l1 = Level("switch", 1, ports, 0.5e-6, 100e9, 200e9, 200e9)
    prof = ds.make_hierarchy("mixed", l3, l2, l1, ds.EnergyConfig(1.0, 2.0, 3.0))
    n = prof.num_devices
    rng = np.random.default_rng(case)
    src = rng.integers(0, n, 3000)
    dst = rng.integers(0, n, 3000)
    w = rng.integers(0, 3, 3000)
    pair = src * n + dst  # StagePattern sums repeated pairs; the reference must see each once
    _, first = np.unique(pair, return_index=True)
    src, dst, w = src[first], dst[first], w[first]
    payload = 4099
    got = StagePattern(ds.Network(prof).router, src, dst, w).cost(payload)
    ref_router = ds.Network(prof).router
    hop, link, energy = _reference_cost(ref_router, src, dst, w, payload)
    assert got.hop_seconds == pytest.approx(hop, rel=REL, abs=0.0)
    assert got.link_seconds == pytest.approx(link, rel=REL, abs=0.0)
    assert got.energy_pj == pytest.approx(energy, rel=REL, abs=0.0)


@pytest.mark.parametrize("case", [0, 1, 3, 6])
def test_all_to_all_from_class_counts_matches_routed_pairs(case: int, monkeypatch) -> None:
    """Few big groups on an innermost-switch NoC: the class-count path equals routing pairs."""
    import deepstack.all_to_all as coll

    l3, l2, ports = MIXED[case]
    l1 = Level("switch", 1, ports, 0.5e-6, 100e9, 200e9, 200e9)
    prof = ds.make_hierarchy("mixed", l3, l2, l1, ds.EnergyConfig(1.0, 2.0, 3.0))
    n = prof.num_devices
    for dp in (n, n // 2, n // 4):
        scheme = ds.ParallelScheme(tp=n // dp, dp=dp)
        monkeypatch.setattr(coll, "A2A_COUNT_PAIRS", 1)  # force the class-count path
        fast = ds.Network(prof)
        got = fast.all_to_all(scheme, "dp", 777)
        assert fast.router.split._a2a_tables is not None
        monkeypatch.setattr(coll, "A2A_COUNT_PAIRS", 1 << 40)  # per-pair routes
        want = ds.Network(prof).all_to_all(scheme, "dp", 777)
        for k in ("hop_seconds", "link_seconds", "noc_energy_pj"):
            assert getattr(got, k) == pytest.approx(getattr(want, k), rel=REL, abs=0.0), k


@pytest.mark.parametrize(
    ("shape", "paper", "nic"),
    [(s, p, n) for s in SHAPES for p in (False, True) for n in (None, 25e9)],
)
def test_group_loads_equal_the_listed_pairs(shape, paper: bool, nic: float | None) -> None:
    """The routed EP exchange's loads from per-member sums (``group_flow_loads``) are exactly the
    loads of its pairs listed one by one (``flow_loads``): same arrays, hop and flow count."""
    from dataclasses import replace

    from deepstack.switch_loads import flow_loads, group_flow_loads

    prof = _profile(*shape, seed=3 * sum(shape) + paper)
    prof = replace(prof, nic_bandwidth_bps=nic)
    router = ds.Network(prof, paper_compat=paper).router
    n = prof.num_devices
    rng = np.random.default_rng(n + paper)
    cases = []
    for ep in [d for d in (2, 4, 8) if n % d == 0]:
        stack = rng.integers(0, 5, size=(3, ep, ep)) * rng.integers(0, 2, size=(1, ep, ep))
        for c in stack:
            np.fill_diagonal(c, 0)
        scattered = rng.permutation(n).reshape(-1, ep)  # every group its own shape
        regular = np.arange(n).reshape(ep, -1).T  # strided groups: shapes repeat
        for members in (scattered, regular):
            cases.append((members, stack, np.arange(len(members)) % len(stack)))
    for members, stack, slot in cases:
        ep = members.shape[1]
        pairs = (np.repeat(np.arange(ep), ep), np.tile(np.arange(ep), ep))
        got = group_flow_loads(router, members, pairs, stack.reshape(len(stack), -1), slot)
        counts = stack[slot].reshape(-1)
        keep = counts > 0
        src = np.repeat(members, ep, axis=1).reshape(-1)[keep]
        dst = np.tile(members, (1, ep)).reshape(-1)[keep]
        want = flow_loads(router, src, dst, counts[keep])
        assert (got.hop, got.flows) == (want.hop, want.flows)
        for x, y in zip(got.up + got.down, want.up + want.down, strict=True):
            np.testing.assert_array_equal(x, y)
        if nic is None:
            assert got.nic is None and want.nic is None
        else:
            for x, y in zip(got.nic, want.nic, strict=True):
                np.testing.assert_array_equal(x, y)


def test_routed_ep_pattern_on_switches_equals_per_pair_pattern() -> None:
    """``routed_pattern`` on an all-switch NoC (per-member sums) prices like the same flows routed
    pair by pair (``routed=True``) — the reference of network-model §8.2."""
    from deepstack.ep_dispatch import _slot_stack, active_rows, routed_pattern

    prof = _profile(2, 2, 4, seed=7)
    router = ds.Network(prof).router
    for scheme in (
        ds.ParallelScheme(ep=4, dp=4),
        ds.ParallelScheme(ep=8, dp=2),
        ds.ParallelScheme(tp=2, ep=2, dp=4),
    ):
        active = active_rows(None, 24, 16, 4)
        pat, busiest = routed_pattern(router, scheme, active, 16)
        stack = _slot_stack(active, scheme.ep, 16, scheme.dp * scheme.sp)
        g = groups(scheme, "ep")
        slot = np.arange(g.shape[0]) % (scheme.dp * scheme.sp)
        src = np.repeat(g, scheme.ep, axis=1).reshape(-1)
        dst = np.tile(g, (1, scheme.ep)).reshape(-1)
        ref = StagePattern(router, src, dst, stack[slot].reshape(-1), routed=True)
        _same(pat, ref)
        assert busiest == max(int(stack.sum(axis=2).max()), int(stack.sum(axis=1).max()))


@pytest.mark.parametrize(("shape", "paper"), list(itertools.product(SHAPES, [False, True])))
def test_position_pair_stages_equal_their_routed_pairs(shape, paper: bool) -> None:
    """Ring, xor and double-tree stages (``StagePatterns.pairs``: per-level loads of their listed
    flows on an all-switch NoC) price like their flows routed pair by pair."""
    from deepstack.stage_patterns import StagePatterns, double_tree_levels

    router = ds.Network(_profile(*shape, seed=sum(shape) + 11), paper_compat=paper).router
    n = router.num_devices
    for tp in [d for d in range(2, n + 1) if n % d == 0]:
        scheme = ds.ParallelScheme(tp=tp, dp=n // tp)
        pats = StagePatterns(router)
        g = groups(scheme, "tp")
        built = [(pats.ring_stage(scheme, "tp", tp), [(1, i, (i + 1) % tp) for i in range(tp)])]
        if tp & (tp - 1) == 0:
            built.append((pats.xor_stage(scheme, "tp", tp, 0), [(1, i, i ^ 1) for i in range(tp)]))
            levels = double_tree_levels(tp)
            tree = pats.tree_stages(scheme, "tp", tp)[0]
            built.append((tree, [(1, s, d) for s, d in levels[0]]))
        for pat, arr in built:
            a = np.array(arr).reshape(-1, 3)
            src, dst = g[:, a[:, 1]], g[:, a[:, 2]]
            w = np.broadcast_to(a[:, 0], src.shape)
            _same(pat, StagePattern(router, src, dst, w, routed=True))


def test_row_classes_are_exact_even_on_a_hash_collision(monkeypatch) -> None:
    """Rows hashed into classes; a forced collision (every row hashing alike) falls back to the
    exact row sort, so two different group shapes never share sums."""
    from deepstack import switch_loads

    rows = np.array([[0, 1, 2], [0, 1, 2], [5, 1, 0], [0, 1, 2], [5, 1, 0], [7, 7, 7]])
    first, inverse = switch_loads._row_classes(rows)
    np.testing.assert_array_equal(rows[first][inverse], rows)
    assert len(first) == 3
    real = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda seed: _ZeroMix(real(seed)))
    first, inverse = switch_loads._row_classes(rows)
    np.testing.assert_array_equal(rows[first][inverse], rows)
    assert len(first) == 3


class _ZeroMix:
    """An rng whose hash multipliers are all equal: rows with the same sum collide."""

    def __init__(self, rng) -> None:
        self.rng = rng

    def integers(self, low, high, size, dtype):
        return np.ones(size, dtype=dtype)
