"""Per-device NICs of multi-node GPU profiles (``NAME@N``): a GPU's traffic leaving its node is
capped at its own NIC (400 Gb/s x 0.9 = 45 GB/s), however few GPUs of the node send; traffic
from all 8 GPUs of a node is priced as before (the node uplink is the 8 NICs together)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import deepstack as ds
import numpy as np
import pytest
from deepstack import Network, ParallelScheme, load_noc_profile, scaled_profile
from deepstack.all_to_all import complete_exchange
from deepstack.errors import ProfileError, ProfileTypeError
from deepstack.gpu_nodes import NIC_BYTES_PER_S, NIC_EFFICIENCY, first_devices
from deepstack.placement import groups
from deepstack.profile import profile_from_dict
from deepstack.stage import StagePattern
from deepstack.switch_loads import all_to_all_loads
from deepstack.topology import Level

from plena_opt.estimate.disaggregated import sub_noc

NIC = NIC_BYTES_PER_S * NIC_EFFICIENCY  # 45 GB/s per GPU
X = 64 << 20  # bytes per GPU


def _cross_node(net: Network, k: int) -> StagePattern:
    """GPUs 0..k-1 of node 0 each send to their counterpart (same rail) on node 1, at once."""
    src = np.arange(k)
    return StagePattern(net.router, src, src + 8, np.ones(k, dtype=np.int64))


@pytest.mark.parametrize("k", [1, 4, 8])
def test_cross_node_p2p_from_k_gpus_is_capped_at_each_gpus_nic(k: int) -> None:
    # before: 271 GB/s per GPU from 1 GPU (the NVLink link), 90 GB/s from 4, 45 GB/s from 8
    net = Network(load_noc_profile("hgx-h200x8@2"))
    c = _cross_node(net, k).cost(X)
    per_gpu = X / c.link_seconds
    assert per_gpu <= NIC * (1 + 1e-12)
    assert per_gpu == pytest.approx(NIC, rel=1e-12)


def test_a_tp4_pipeline_boundary_between_nodes_runs_at_one_nic_per_gpu() -> None:
    prof = load_noc_profile("hgx-h200x8@2")
    bounds = Network(prof).pipeline_p2p(ParallelScheme(tp=4, pp=4), X).boundaries
    # boundary 0: GPUs 0-3 -> 4-7 inside node 0 (NVLink); boundary 1: 4-7 -> 8-11, across nodes
    assert bounds[0].link_seconds == pytest.approx(X / prof.levels[2].link_bandwidth_bps)
    assert bounds[1].link_seconds == pytest.approx(X / NIC, rel=1e-12)  # before: X / 90 GB/s


def test_an_eight_gpu_cross_node_all_reduce_is_unchanged() -> None:
    prof = load_noc_profile("hgx-h200x8@2")
    without = replace(prof, nic_bandwidth_bps=None)  # the previous model: node uplinks only
    for scheme, dim in ((ParallelScheme(tp=8, dp=2), "dp"), (ParallelScheme(tp=16), "tp")):
        new = Network(prof).all_reduce(scheme, dim, X)
        old = Network(without).all_reduce(scheme, dim, X)
        assert new.algorithm == old.algorithm
        assert new.seconds == pytest.approx(old.seconds, rel=1e-12, abs=0.0)
        assert new.link_seconds == pytest.approx(old.link_seconds, rel=1e-12, abs=0.0)
    # every pair of the dp groups crosses nodes from all 8 GPUs: every candidate is the same
    new = Network(prof).all_reduce(ParallelScheme(tp=8, dp=2), "dp", X).candidates
    old = Network(without).all_reduce(ParallelScheme(tp=8, dp=2), "dp", X).candidates
    assert new.keys() == old.keys()
    for name, cost in new.items():
        assert (cost is None) == (old[name] is None)
        if cost is not None:
            assert cost.seconds == pytest.approx(old[name].seconds, rel=1e-12, abs=0.0)


def test_hand_computed_exchange_of_four_gpus_on_two_nodes() -> None:
    """All-to-all of GPUs {0, 1, 8, 9}, p bytes per ordered pair: each GPU sends 2p over its
    NIC (the two peers on the other node): 2p / 45 GB/s. The node uplink carries 4p / 360 GB/s
    and each NVLink link 3p / 271 GB/s, so the NIC binds (before: 4p / 360 GB/s, 2x faster)."""
    prof = load_noc_profile("hgx-h200x8@2")
    h1, h2 = prof.levels[2].hop_latency_s, prof.levels[1].hop_latency_s
    p = 1 << 24
    net = Network(prof)
    c = complete_exchange(net.router, np.array([[0, 1, 8, 9]])).cost(p)
    assert c.link_seconds == pytest.approx(2 * p / 45e9, rel=1e-12)
    assert c.hop_seconds == pytest.approx(2 * h1 + 2 * h2, rel=1e-12)
    assert net.router.describe_link(c.busiest_link) == "NIC out of device 0"
    old = complete_exchange(
        Network(replace(prof, nic_bandwidth_bps=None)).router, np.array([[0, 1, 8, 9]])
    )
    assert old.cost(p).link_seconds == pytest.approx(4 * p / (8 * 45e9), rel=1e-12)


def _profile(s3: int, s2: int, s1: int, seed: int) -> ds.NocProfile:
    rng = np.random.default_rng(seed)

    def sw(n: int) -> Level:
        return Level("switch", 1, n, float(rng.uniform(0, 5e-6)), float(rng.uniform(10e9, 400e9)))

    base = ds.make_hierarchy("sw", sw(s3), sw(s2), sw(s1), ds.EnergyConfig(1.0, 2.5, 4.0))
    return replace(base, nic_bandwidth_bps=float(rng.uniform(5e9, 100e9)))


def _same(a: StagePattern, b: StagePattern, payload: int = 12345) -> None:
    ca, cb = a.cost(payload), b.cost(payload)
    assert ca.hop_seconds == pytest.approx(cb.hop_seconds, rel=1e-12, abs=0.0)
    assert ca.link_seconds == pytest.approx(cb.link_seconds, rel=1e-12, abs=0.0)
    assert ca.energy_pj == pytest.approx(cb.energy_pj, rel=1e-12, abs=0.0)


@pytest.mark.parametrize(
    ("shape", "paper"), list(itertools.product([(1, 4, 4), (2, 2, 4), (2, 3, 2)], [False, True]))
)
def test_closed_forms_with_nics_match_routed_pairs(
    shape: tuple[int, int, int], paper: bool
) -> None:
    prof = _profile(*shape, seed=sum(shape))
    router = Network(prof, paper_compat=paper).router
    n = prof.num_devices
    rng = np.random.default_rng(n)
    for tp in [d for d in range(1, n + 1) if n % d == 0]:
        g = groups(ParallelScheme(tp=tp, dp=n // tp), "dp")
        size = g.shape[1]
        if size < 2:
            continue
        i, j = np.nonzero(~np.eye(size, dtype=bool))
        routed = StagePattern(router, g[:, i], g[:, j], np.ones((len(g), len(i))), routed=True)
        _same(StagePattern.from_level_loads(router, all_to_all_loads(router, g)), routed)
        src = g[:, np.arange(size)]
        dst = g[:, (np.arange(size) + 1) % size]
        w = rng.integers(0, 4, size=src.shape)
        _same(StagePattern(router, src, dst, w), StagePattern(router, src, dst, w, routed=True))


def test_nic_links_add_no_energy() -> None:
    prof = _profile(1, 2, 4, seed=3)
    src, dst = np.array([0, 1, 4]), np.array([4, 5, 2])
    w = np.ones(3, dtype=np.int64)
    with_nic = StagePattern(Network(prof).router, src, dst, w).cost(1000)
    without = StagePattern(Network(replace(prof, nic_bandwidth_bps=None)).router, src, dst, w)
    assert with_nic.energy_pj == without.cost(1000).energy_pj > 0


def test_the_nic_round_trips_and_is_validated() -> None:
    prof = load_noc_profile("hgx-h200x8@2")
    assert prof.nic_bandwidth_bps == pytest.approx(45e9)
    assert prof.describe()["nic_gbytes_per_s"] == pytest.approx(45.0)
    back = profile_from_dict(prof.to_dict())
    assert back.nic_bandwidth_bps == pytest.approx(prof.nic_bandwidth_bps, rel=1e-12)
    assert load_noc_profile("hgx-h200x8").nic_bandwidth_bps is None
    raw = prof.to_dict()
    for bad, err in ((0, ProfileError), (-5, ProfileError), ("45", ProfileTypeError)):
        with pytest.raises(err) as exc:
            profile_from_dict({**raw, "nic_gbytes_per_s": bad})
        assert exc.value.field == "nic_gbytes_per_s"
    mesh = load_noc_profile("torus_mesh_switch_64").to_dict()
    with pytest.raises(ProfileError) as exc:
        profile_from_dict({**mesh, "nic_gbytes_per_s": 45})
    assert exc.value.field == "nic_gbytes_per_s" and "switch levels" in str(exc.value)


def test_sub_networks_and_scaled_profiles_keep_the_nics() -> None:
    four = load_noc_profile("hgx-h100x8@4")
    assert first_devices(four, 16).nic_bandwidth_bps == four.nic_bandwidth_bps
    assert sub_noc(four, 16).nic_bandwidth_bps == four.nic_bandwidth_bps
    assert scaled_profile(four, l2_bandwidth_scale=2.0).nic_bandwidth_bps == pytest.approx(90e9)
    assert scaled_profile(four, l1_bandwidth_scale=2.0).nic_bandwidth_bps == pytest.approx(45e9)
