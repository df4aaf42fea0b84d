"""GPU node and cluster profiles: multi-node builders and "the first N devices" of a profile.

``multi_node(base, nodes)`` joins ``nodes`` copies of a one-node profile (an L1 switch of GPUs,
e.g. ``hgx-h200x8``) with an L2 switch of 400 Gb/s-per-GPU InfiniBand/RoCE links: every GPU has
its own NIC (``NocProfile.nic_bandwidth_bps``; rails: GPU i drives NIC i), so a GPU's traffic
leaving its node is capped at one NIC's rate however few GPUs of the node send.
``first_devices(profile, n)`` keeps the first ``n`` devices (``--devices 4`` of an 8-GPU node).
Names: ``load_noc_profile("hgx-h200x8@4")`` is ``multi_node(hgx-h200x8, 4)``.
"""

from __future__ import annotations

from dataclasses import replace

from .errors import ProfileError
from .profile import NocProfile
from .topology import Level

NIC_BYTES_PER_S = 400e9 / 8  # one 400 Gb/s NIC per GPU (ConnectX-7 NDR / 400G RoCE)
# Share of the NIC line rate a collective achieves between nodes. Assumption (no multi-node
# nccl-tests table ships with the project): 0.9, in line with published 2-node H100/H200 NDR
# nccl-tests runs reaching 400-450 GB/s bus bandwidth with 8 NICs per node
# (https://saturncloud.io/blog/crusoe-nccl-cluster-validation).
NIC_EFFICIENCY = 0.9
IB_HOP_LATENCY_S = 5e-6  # DeepStack h200x32 preset value for its InfiniBand level
MAX_NODES = 1024


def _node_switch(profile: NocProfile) -> Level:
    l3, l2, l1 = profile.levels
    if l1.kind != "switch" or l2.size != 1 or l3.size != 1:
        raise ProfileError(
            "noc", f"{profile.name} is not a one-node switch profile (one L1 switch of devices)"
        )
    return l1


def multi_node(base: NocProfile, nodes: int) -> NocProfile:
    """``nodes`` copies of the one-node ``base`` joined by a switch of NIC links."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise ProfileError("nodes", f"nodes must be an integer from 1 to {MAX_NODES}")
    l1 = _node_switch(base)
    # One L2 port per node: its uplink carries every flow of the node (network-model §4.3), so
    # its bandwidth is the node's NICs together (one per GPU); each GPU's own NIC caps its share.
    # A node profile that names its own NIC (``nic_gbytes_per_s``: an NVL72 rack's ConnectX-8)
    # keeps it; else one 400 Gb/s NIC per GPU.
    nic = base.nic_bandwidth_bps or NIC_BYTES_PER_S * NIC_EFFICIENCY
    link = nic * l1.size
    l2 = Level("switch", 1, nodes, IB_HOP_LATENCY_S, link, link * nodes, link * nodes)
    l3 = Level("switch", 1, 1, 0.0, link)
    prov = {
        **base.provenance,
        "nodes": f"{nodes} x {base.name} on one InfiniBand/RoCE NIC per GPU; node uplink = "
        f"{l1.size} NICs x {NIC_EFFICIENCY} x line rate (assumed), each GPU's flows leaving "
        f"the node capped at its own NIC ({nic / 1e9:g} GB/s), hop {IB_HOP_LATENCY_S * 1e6:g} us",
    }
    name = base.name if nodes == 1 else f"{base.name}@{nodes}"
    # the node's own L1 switch is unchanged, so its measured in-node all-reduce still holds
    return NocProfile(
        name,
        (l3, l2, l1),
        base.energy,
        prov,
        base.port_spread,
        base.measured_allreduce,
        base.measured_collectives,
        nic,
    )


def first_devices(profile: NocProfile, n: int) -> NocProfile:
    """The first ``n`` devices of a switch profile: ``n`` ports of one node, or whole nodes."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ProfileError("devices", "devices must be a positive integer")
    if n == profile.num_devices:
        return profile
    if n > profile.num_devices:
        raise ProfileError(
            "devices", f"devices={n} exceeds the {profile.num_devices} of {profile.name}"
        )
    if not profile.all_switch or profile.levels[0].size != 1:
        raise ProfileError("devices", "--devices needs a profile of switch levels (a GPU node)")
    l3, l2, l1 = profile.levels
    per = l1.size
    if n <= per:
        levels = (l3, replace(l2, rows=1, cols=1), _ports(l1, n))
    elif n % per == 0:
        levels = (l3, _ports(l2, n // per), l1)
    else:
        raise ProfileError(
            "devices", f"devices={n} must be at most {per} or a multiple of {per} (one node)"
        )
    prov = {**profile.provenance, "devices": f"first {n} of {profile.num_devices}"}
    return derived_profile(profile, f"{profile.name}[{n}]", levels, prov)


def derived_profile(
    base: NocProfile,
    name: str,
    levels: tuple[Level, Level, Level],
    provenance: dict,
    nic_scale: float = 1.0,
) -> NocProfile:
    """A profile built from ``base`` with new ``levels`` (a sub-network, scaled links): energy,
    port spread and per-device NICs (times ``nic_scale``) kept, and ``base``'s measured tables
    kept for the groups that still fit the new L1 switch when that switch is ``base``'s (same
    kind, hop latency and link bandwidth; it may have fewer ports). A changed L1 drops them:
    they were measured on ``base``'s fabric."""
    old, new = base.levels[2], levels[2]
    same = (new.kind, new.hop_latency_s, new.link_bandwidth_bps) == (
        old.kind,
        old.hop_latency_s,
        old.link_bandwidth_bps,
    )
    measured, ops = base.measured_allreduce, base.measured_collectives
    prov = dict(provenance)
    if same and new.size <= old.size:
        measured = None if measured is None else measured.up_to(new.size)
        ops = None if ops is None else ops.up_to(new.size)
    elif measured is not None or ops is not None:
        measured = ops = None
        prov["measured_tables"] = f"dropped: the L1 switch differs from {base.name}'s"
    nic = None if base.nic_bandwidth_bps is None else base.nic_bandwidth_bps * nic_scale
    return NocProfile(name, levels, base.energy, prov, base.port_spread, measured, ops, nic)


def _ports(level: Level, n: int) -> Level:
    """The first ``n`` ports of a switch level (centre bandwidth scaled with the ports)."""

    def scaled(bps: float | None) -> float | None:
        return None if bps is None else bps * n / level.size

    return replace(
        level,
        rows=1,
        cols=n,
        centre_in_bps=scaled(level.centre_in_bps),
        centre_out_bps=scaled(level.centre_out_bps),
    )
