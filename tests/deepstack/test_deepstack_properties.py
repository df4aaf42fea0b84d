"""Property tests (hypothesis): costs are non-negative, monotone in bytes, zero for a group of one;
TP collectives ignore replicas on other nodes; a node's uplink carries all its cross-node flows."""

from __future__ import annotations

import math

import deepstack as ds
import numpy as np
import pytest
from deepstack.stage import StagePattern
from hypothesis import given, settings
from hypothesis import strategies as st

PROFILES = {
    "illustrative_gpu_cluster_32": ds.Network("illustrative_gpu_cluster_32"),
    "illustrative_ring_switch_32": ds.Network("illustrative_ring_switch_32"),
    "illustrative_torus_mesh_switch_64": ds.Network("illustrative_torus_mesh_switch_64"),
}
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def _factorisations(n: int) -> list[tuple[int, int, int]]:
    """(tp, dp, pp) with tp·dp·pp = n."""
    out = []
    for tp in range(1, n + 1):
        if n % tp:
            continue
        for dp in range(1, n // tp + 1):
            if (n // tp) % dp == 0:
                out.append((tp, dp, n // tp // dp))
    return out


@st.composite
def collective_inputs(draw):
    name = draw(st.sampled_from(sorted(PROFILES)))
    net = PROFILES[name]
    tp, dp, pp = draw(st.sampled_from(_factorisations(net.profile.num_devices)))
    dim = draw(st.sampled_from(("tp", "dp", "pp")))
    op = draw(st.sampled_from(OPS))
    a = draw(st.integers(min_value=0, max_value=2**30))
    b = draw(st.integers(min_value=0, max_value=2**30))
    return net, ds.ParallelScheme(tp=tp, dp=dp, pp=pp), dim, op, min(a, b), max(a, b)


@settings(max_examples=60, deadline=None)
@given(collective_inputs())
def test_costs_non_negative_and_monotone(args) -> None:
    net, scheme, dim, op, small, large = args
    lo = getattr(net, op)(scheme, dim, small)
    hi = getattr(net, op)(scheme, dim, large)
    for c in (lo, hi):
        assert c.hop_seconds >= 0 and c.link_seconds >= 0 and c.noc_energy_pj >= 0
        assert math.isclose(c.seconds, c.hop_seconds + c.link_seconds, rel_tol=1e-12)
    assert lo.seconds <= hi.seconds * (1 + 1e-12)
    if scheme.size(dim) == 1 or small == 0:
        assert lo.seconds == 0.0 and lo.algorithm is None


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(OPS),
    st.integers(min_value=1, max_value=2**28),
    st.sampled_from([1, 2, 4]),
)
def test_tp_collective_ignores_replicas_on_other_nodes(op: str, nbytes: int, replicas: int) -> None:
    """Per-switch-instance links (§4.3): a TP=8 collective costs the same on 1 or many nodes."""
    alone = getattr(ds.Network(ds.switch_noc(8, 1)), op)(ds.ParallelScheme(tp=8), "tp", nbytes)
    many = ds.Network(ds.switch_noc(8 * replicas, replicas))
    rep = getattr(many, op)(ds.ParallelScheme(tp=8, dp=replicas), "tp", nbytes)
    assert rep.seconds == pytest.approx(alone.seconds, rel=1e-12)
    assert rep.noc_energy_pj == pytest.approx(alone.noc_energy_pj * replicas, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=8), st.integers(min_value=1, max_value=2**26))
def test_node_uplink_carries_all_cross_node_flows(senders: int, nbytes: int) -> None:
    """``senders`` GPUs of node 0 each send ``nbytes`` to node 1 of switch_noc(16, 2): the single
    L2 uplink of node 0 (50 GB/s) serialises all of them."""
    net = ds.Network(ds.switch_noc(16, 2))
    src = np.arange(senders)
    pattern = StagePattern(net.router, src, src + 8, np.ones(senders, dtype=np.int64))
    got = pattern.cost(nbytes)
    assert got.link_seconds == pytest.approx(senders * nbytes / 50e9, rel=1e-12)
    assert "L2 link" in net.router.describe_link(got.busiest_link)
    # the same through the public API: pp=2 pairs every GPU i of node 0 with i + 8
    p2p = net.pipeline_p2p(ds.ParallelScheme(tp=8, pp=2), nbytes)
    assert p2p.link_seconds == pytest.approx(8 * nbytes / 50e9, rel=1e-12)
