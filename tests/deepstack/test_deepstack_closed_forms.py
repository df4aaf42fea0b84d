"""network-model.md §14: closed-form test vectors and worked examples, exactly (rel 1e-12)."""

from __future__ import annotations

import deepstack as ds
import pytest
from deepstack.topology import Level

MIB = 2**20
X = 64 * MIB
REL = 1e-12


def _switch(n: int, bw: float, hop: float) -> Level:
    return Level("switch", 1, n, hop, bw)


def _net(l3: Level, l2: Level, l1: Level, energy: ds.EnergyConfig | None = None) -> ds.Network:
    return ds.Network(ds.make_hierarchy("t", l3, l2, l1, energy))


def single_switch(n: int = 8, bw: float = 450e9, h: float = 1e-6) -> ds.Network:
    return _net(_switch(1, bw, 0.0), _switch(1, bw, 0.0), _switch(n, bw, h))


def nodes(n_nodes: int, bw1: float, h1: float, bw2: float, h2: float, energy=None) -> ds.Network:
    return _net(_switch(1, bw2, 0.0), _switch(n_nodes, bw2, h2), _switch(8, bw1, h1), energy)


def approx(v: float) -> object:
    return pytest.approx(v, rel=REL, abs=0.0)


def test_all_gather_candidates_on_one_switch() -> None:
    """§14 items 1–3 (DeepStack tests/test_all_gather_wrapper.py)."""
    net, bw, h, shard = single_switch(), 450e9, 1e-6, X / 8
    got = net.all_gather(ds.ParallelScheme(tp=8), "tp", X)
    ring, rd, direct = (got.candidates[k] for k in ("ring", "recursive_doubling", "all_to_all"))
    assert ring.link_seconds == approx(7 * shard / bw)
    assert ring.hop_seconds == approx(7 * 2 * h)
    assert rd.link_seconds == approx((1 + 2 + 4) * shard / bw)
    assert rd.hop_seconds == approx(3 * 2 * h)
    assert direct.link_seconds == approx(7 * shard / bw)
    assert direct.hop_seconds == approx(2 * h)
    assert got.algorithm == "all_to_all"


@pytest.mark.parametrize(
    ("net", "scheme", "dim"),
    [
        (single_switch(), ds.ParallelScheme(tp=8), "tp"),
        (nodes(4, 450e9, 1e-6, 50e9, 5e-6), ds.ParallelScheme(tp=8, dp=4), "tp"),
        (nodes(4, 450e9, 1e-6, 50e9, 5e-6), ds.ParallelScheme(tp=8, dp=4), "dp"),
        (nodes(4, 450e9, 1e-6, 50e9, 5e-6), ds.ParallelScheme(tp=32), "tp"),
        (
            _net(_switch(1, 50e9, 0.0), Level("ring", 1, 4, 1e-6, 50e9), _switch(8, 100e9, 2e-7)),
            ds.ParallelScheme(tp=8, dp=4),
            "dp",
        ),
        (
            _net(_switch(1, 200e9, 0), _switch(1, 200e9, 0), Level("torus2d", 4, 4, 5e-6, 200e9)),
            ds.ParallelScheme(tp=4, dp=4),
            "tp",
        ),
    ],
)
def test_ring_all_reduce_is_twice_ring_all_gather(net: ds.Network, scheme, dim: str) -> None:
    """§14 item 4."""
    ar = net.all_reduce(scheme, dim, X).candidates["ring"]
    ag = net.all_gather(scheme, dim, X).candidates["ring"]
    assert ar.hop_seconds == approx(2 * ag.hop_seconds)
    assert ar.link_seconds == approx(2 * ag.link_seconds)


def test_cross_node_dp_all_gather_is_uplink_bound() -> None:
    """§14 item 5: tp=8, dp=4 on 4×8 switched nodes: ring link = 3·8·(X/4)/50e9."""
    net = nodes(4, 450e9, 1e-6, 50e9, 5e-6)
    ring = net.all_gather(ds.ParallelScheme(tp=8, dp=4), "dp", X).candidates["ring"]
    assert ring.link_seconds == approx(3 * 8 * (X / 4) / 50e9)


def test_group_of_one_is_free() -> None:
    """§14 item 6."""
    net = single_switch()
    for op in (net.all_reduce, net.all_gather, net.reduce_scatter):
        got = op(ds.ParallelScheme(dp=8), "tp", X)
        assert (got.hop_seconds, got.link_seconds, got.algorithm) == (0.0, 0.0, None)
    assert net.pipeline_p2p(ds.ParallelScheme(tp=8), X).seconds == 0.0
    assert net.all_reduce(ds.ParallelScheme(tp=8), "tp", 0).seconds == 0.0


@pytest.mark.parametrize("n_nodes", [1, 2, 4])
def test_tp_ring_all_reduce_independent_of_node_count(n_nodes: int) -> None:
    """§14 item 7 (per-switch-instance links, §4.3)."""
    net = nodes(n_nodes, 100e9, 1e-6, 25e9, 5e-6)
    ring = net.all_reduce(ds.ParallelScheme(tp=8, dp=n_nodes), "tp", X).candidates["ring"]
    assert ring.link_seconds == approx(14 * (X / 8) / 100e9)
    assert ring.hop_seconds == approx(14 * 2 * 1e-6)


def test_paper_compat_shares_equally_numbered_ports() -> None:
    """§4.3 paper-era identity: TP=8 over DP=4 nodes sees 4× the L1 link load."""
    prof = nodes(4, 100e9, 1e-6, 25e9, 5e-6).profile
    fixed = ds.Network(prof).all_reduce(ds.ParallelScheme(tp=8, dp=4), "tp", X)
    paper = ds.Network(prof, paper_compat=True).all_reduce(ds.ParallelScheme(tp=8, dp=4), "tp", X)
    assert paper.candidates["ring"].link_seconds == approx(
        4 * fixed.candidates["ring"].link_seconds
    )


def test_route_hop_latency() -> None:
    """§14 item 8: same node 2·h1, different nodes 2·h1 + 2·h2."""
    net = nodes(4, 100e9, 1e-6, 25e9, 5e-6)
    assert net.router.chain(0, 5)[1] == approx(2 * 1e-6)
    assert net.router.chain(0, 13)[1] == approx(2 * 1e-6 + 2 * 5e-6)


def test_intra_node_energy_all_switch_and_mixed() -> None:
    """§14 item 9 and §6: B bytes inside a node cost 2·8·B·e1 (all-switch), 4·8·B·e1 (mixed)."""
    e = ds.EnergyConfig(1.0, 2.0, 3.0)
    net = nodes(2, 100e9, 1e-6, 25e9, 5e-6, e)
    flow = MIB
    got = net.all_to_all(ds.ParallelScheme(tp=8, dp=2), "tp", flow)
    flows = 2 * 8 * 7
    assert got.noc_energy_pj == approx(flows * flow * 8 * 2 * e.l1)
    mixed = ds.ring_switch_32()
    got = ds.Network(mixed).all_to_all(ds.ParallelScheme(tp=8, dp=4), "tp", flow)
    assert got.noc_energy_pj == approx(4 * 8 * 7 * flow * 8 * 4 * e.l1)


def test_node_uplink_carries_all_its_flows() -> None:
    """§14 item 10: 8 flows × 1 MiB through one node's L2 uplink at 25 GB/s."""
    net = nodes(2, 100e9, 1e-6, 25e9, 5e-6)
    got = net.pipeline_p2p(ds.ParallelScheme(tp=8, pp=2), MIB)
    assert got.link_seconds == approx(8 * MIB / 25e9)
    assert got.hop_seconds == approx(2 * 1e-6 + 2 * 5e-6)


def test_fig13_s5_rabenseifner_worked_example() -> None:
    """§14 item 11: payloads 274, 137, 68 B → 2·3·2·32 ns + 2·479/32e9 s = 413.9375 ns."""
    net = single_switch(8, 32e9, 32e-9)
    rab = net.all_reduce(ds.ParallelScheme(tp=8), "tp", 548).candidates["rabenseifner"]
    assert rab.seconds * 1e9 == approx(2 * 3 * 2 * 32 + 2 * 479 / 32)


def test_gpu_node_8_worked_example() -> None:
    """§14 item 12: X = 18,432 B; one-shot chosen (2.5 µs + 7·X/370e9)."""
    net = ds.Network("illustrative_gpu_node_8")
    x = 18432
    got = net.all_reduce(ds.ParallelScheme(tp=8), "tp", x)
    c = got.candidates
    assert c["ring"].seconds == approx(14 * (2 * 1.25e-6 + (x // 8) / 370e9))
    assert c["recursive_doubling"].seconds == approx(3 * (2 * 1.25e-6 + x / 370e9))
    assert c["rabenseifner"].seconds == approx(2 * 3 * 2 * 1.25e-6 + 2 * (x * 7 // 8) / 370e9)
    assert got.algorithm == "all_to_all"
    assert got.seconds == approx(2.5e-6 + 7 * x / 370e9)
    assert round(got.seconds * 1e6, 2) == 2.85


def test_fig08_ep_all_to_all_estimate() -> None:
    """§14 item 13: ep=8, ratio 1.4: 82,208,358 B per pair, 7 pairs per port → 1.5578 ms."""
    net = single_switch(8, 370e9, 1.25e-6)
    scheme = ds.ParallelScheme(ep=8, ep1=8)
    # micro_batch·seq = 32768 ≥ 8192 → ceil(32768/8) = 4096 tokens per rank, k/ep = 1
    got = net.ep_all_to_all(
        scheme,
        bytes_per_token=7168 * 2,
        num_experts=256,
        top_k=8,
        micro_batch=1,
        seq=32768,
        imbalance=1.4,
    )
    per_pair = 82_208_358
    assert got.link_seconds == approx(7 * per_pair / 370e9)
    assert got.hop_seconds == approx(2.5e-6)
    assert round(got.seconds * 1e3, 4) == 1.5578
