"""Link loads of all-switch hierarchies, aggregated per level instead of routed per pair.

Spec: network-model.md §3.3 (route of an all-switch hierarchy), §4.2–§4.3 (one up and one down
link per switch port; default per-instance identity or ``paper_compat``), §5 (stage time), §6
(energy). In an all-switch hierarchy every port choice has one candidate, so a flow
``src → dst`` whose outermost differing level is ℓ loads exactly: the L1 up link of ``src`` and
the L1 down link of ``dst``; for ℓ ≤ L2 also the L2 up link of ``src``'s node and the L2 down
link of ``dst``'s node; for ℓ = L3 also the L3 up/down links of both pods. Its hop latency is
``2·h1 (+ 2·h2 (+ 2·h3))``. So a stage's link loads are sums of flow weights per port, computed
with ``bincount`` over the flows — or, for a complete exchange (all-to-all) inside rank groups,
from how many group members share a node and a pod, without listing the g² pairs.

A profile with per-device NICs (``NocProfile.nic_bandwidth_bps``) adds one NIC-out link per
source device and one NIC-in link per destination device, loaded by every flow that leaves its
L1 switch (ℓ ≤ L2), at the NIC bandwidth and no extra hop latency or energy (the bytes' energy is
already on the L1 and L2 links they cross): a device's traffic leaving its node is capped at its
own NIC's rate however few devices of the node send.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .topology import CENTRE
from .unique import sorted_unique

if TYPE_CHECKING:
    from .routing import Router

L3, L2, L1 = 0, 1, 2
# ``ndarray.sum`` / ``max`` / ``min`` of a 1-D array: the same reductions without the wrappers
_sum, _max, _min = np.add.reduce, np.maximum.reduce, np.minimum.reduce


@dataclass(frozen=True)
class LevelLoads:
    """Per-level link loads of one stage (flow weight per unit payload) and its hop latency.

    ``up[level]`` / ``down[level]``: load per link key of that level (index = the key); keys
    are device / node / pod numbers (default identity) or the port number inside the instance
    (``paper_compat``). ``flows``: (src, dst) entries with weight (distinct pairs for every
    pattern the collectives build); ``hop``: longest chain latency (s). ``nic``: (NIC-out,
    NIC-in) load per L1 key when the profile has per-device NICs, else None. ``tiles``: the
    arrays hold the keys of the first 1/``tiles`` of the devices, whose loads the rest repeat
    (a layout periodic in the device ids, ``flow_loads(..., devices=)``); ``flows`` counts all.
    """

    up: tuple[np.ndarray, np.ndarray, np.ndarray]
    down: tuple[np.ndarray, np.ndarray, np.ndarray]
    hop: float
    flows: int
    nic: tuple[np.ndarray, np.ndarray] | None = None
    tiles: int = 1

    def reversed(self) -> LevelLoads:
        """The loads of the same flows reversed (dst → src, in the same order): every up link
        carries what the down link did and back (``flow_loads`` sums the same weights in the same
        order over the swapped keys); hop latency and flow count are symmetric."""
        nic = None if self.nic is None else (self.nic[1], self.nic[0])
        return LevelLoads(self.down, self.up, self.hop, self.flows, nic, self.tiles)


def _chain_latency(levels, outermost: int) -> float:
    """Hop latency of a chain whose outermost differing level is ``outermost``, summed in route
    order (device → L1 centre → … → L1 centre → device) like the routed path."""
    h3, h2, h1 = (lv.hop_latency_s for lv in levels)
    lat = h1
    if outermost <= L2:
        lat += h2
        if outermost == L3:
            lat += h3
            lat += h3
        lat += h2
    return lat + h1


def _stage_hop(router: Router, flows: int, cross_node: int, cross_pod: int) -> float:
    """Longest chain latency of a stage of ``flows`` flows, ``cross_node`` of them leaving their
    node and ``cross_pod`` their pod (each level present adds its hops)."""
    present = []
    if cross_node < flows:
        present.append(L1)
    if cross_pod < cross_node:
        present.append(L2)
    if cross_pod:
        present.append(L3)
    return max((_chain_latency(router.levels, lv) for lv in present), default=0.0)


def _keys(router: Router, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Link key of each device's L3, L2 and L1 port link (per instance or per port number)."""
    s3, s2, s1 = router.sizes
    node = dev // s1
    pod = node // s2
    if router.paper_compat:
        return pod, node % s2, dev % s1
    return pod, node, dev


def _key_sizes(router: Router, devices: int | None = None) -> tuple[int, int, int]:
    s3, s2, s1 = router.sizes
    if router.paper_compat:
        return s3, s2, s1
    if devices is not None:  # the keys of devices [0, devices), whole pods
        return devices // (s2 * s1), devices // s1, devices
    return s3, s3 * s2, s3 * s2 * s1


def period_devices(router: Router, block: int) -> int | None:
    """Devices of one period of a layout that repeats every ``block`` devices (each run of
    ``block`` devices holding whole groups), aligned to whole pods so that every level's loads
    repeat with it; None when it is the whole NoC or the link identity is ``paper_compat``."""
    n = router.num_devices
    period = math.lcm(block, router.sizes[1] * router.sizes[2])
    if router.paper_compat or period >= n or n % period:
        return None
    return period


def flow_loads(
    router: Router,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    devices: int | None = None,
) -> LevelLoads:
    """Loads of flows ``src → dst`` (src ≠ dst, weight > 0) on an all-switch NoC; a repeated
    pair simply adds its weights. ``devices`` (from ``period_devices``): the flows are those of
    devices [0, devices) of a layout whose flows repeat, shifted, every ``devices`` devices; the
    loads then hold that period's keys and count every period's flows (exact: the other periods'
    loads are the same numbers at shifted keys)."""
    s3, s2, s1 = router.sizes
    node_s, node_d = src // s1, dst // s1
    pod_s, pod_d = node_s // s2, node_d // s2
    cross_pod = pod_s != pod_d
    cross_node = node_s != node_d
    w = weight.astype(np.float64)
    w2 = np.where(cross_node, w, 0.0)
    w3 = np.where(cross_pod, w, 0.0)
    if router.paper_compat:
        ks = (pod_s, node_s - pod_s * s2, src - node_s * s1)
        kd = (pod_d, node_d - pod_d * s2, dst - node_d * s1)
    else:
        ks, kd = (pod_s, node_s, src), (pod_d, node_d, dst)
    sizes = _key_sizes(router, devices)
    tiles = 1 if devices is None else router.num_devices // devices
    per_level = (w3, w2, w)
    up = tuple(np.bincount(ks[i], per_level[i], sizes[i]) for i in range(3))
    down = tuple(np.bincount(kd[i], per_level[i], sizes[i]) for i in range(3))
    flows = len(w) * tiles
    crossing = (int(np.count_nonzero(cross_node)) * tiles, int(np.count_nonzero(cross_pod)) * tiles)
    hop = _stage_hop(router, flows, *crossing)
    nic = None
    if router.nic_bps is not None:
        nic = (np.bincount(ks[2], w2, sizes[2]), np.bincount(kd[2], w2, sizes[2]))
    return LevelLoads(up, down, hop, flows, nic, tiles)  # type: ignore[arg-type]


def _row_classes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each distinct row's first occurrence, class of every row) of a 2-D int array:
    rows hashed to one integer, the classes checked against the rows (exact: a hash collision
    falls back to ``np.unique(axis=0)``, which sorts the rows and is many times slower)."""
    if (rows == rows[0]).all():
        return np.zeros(1, dtype=np.int64), np.zeros(len(rows), dtype=np.int64)
    mix = np.random.default_rng(0x5EED).integers(1, 2**62, size=rows.shape[1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        code = (rows.astype(np.uint64) * mix).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(rows, rows[first][inverse]):
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first, inverse


def group_flow_loads(
    router: Router,
    members: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray],
    weights: np.ndarray,
    slot: np.ndarray,
) -> LevelLoads:
    """``flow_loads`` of the same position pairs in every group: flow ``k`` of group ``g`` goes
    ``members[g, i_k] → members[g, j_k]`` (``pairs = (i, j)``; distinct devices per row) with
    integer weight ``weights[slot[g], k]``. Computed from per-position sums instead of one entry
    per flow: a flow loads its source's and destination's port links, so a level's load per key
    is the sum of the position sums whose flows leave that level; groups with the same weights
    whose members share nodes and pods alike have the same sums, so each such shape is summed
    once (a regular placement has one or two shapes)."""
    s3, s2, s1 = router.sizes
    pi, pj = (np.asarray(x, dtype=np.int64) for x in pairs)
    keep = pi != pj
    pi, pj, weights = pi[keep], pj[keep], np.asarray(weights, dtype=np.int64)[:, keep]
    n_groups, size = members.shape
    node = members // s1
    pod = node // s2
    shape = np.concatenate([slot[:, None], node - node[:, :1], pod - pod[:, :1]], axis=1)
    first, inverse = _row_classes(shape)
    per_shape = np.bincount(inverse, minlength=len(first))  # groups of each shape
    w = weights[slot[first]]  # [shapes, pairs]
    rn, rp = node[first], pod[first]
    cross_node = rn[:, pi] != rn[:, pj]
    cross_pod = rp[:, pi] != rp[:, pj]
    per_level = (np.where(cross_pod, w, 0), np.where(cross_node, w, 0), w)
    if router.paper_compat:
        keys = (pod, node - pod * s2, members - node * s1)
    else:
        keys = (pod, node, members)
    sizes = _key_sizes(router)
    offset = (np.arange(len(first)) * size)[:, None]

    def loads(level: int, position: np.ndarray, key: np.ndarray) -> np.ndarray:
        x = per_level[level]
        sums = np.bincount((offset + position).ravel(), x.ravel(), len(first) * size)
        return np.bincount(key.ravel(), sums.reshape(-1, size)[inverse].ravel(), sizes[level])

    up = tuple(loads(i, pi[None, :], keys[i]) for i in range(3))
    down = tuple(loads(i, pj[None, :], keys[i]) for i in range(3))
    sent = w > 0

    def count(mask: np.ndarray) -> int:
        return int(np.dot(mask.sum(axis=1), per_shape))

    flows = count(sent)
    hop = _stage_hop(router, flows, count(sent & cross_node), count(sent & cross_pod))
    nic = None
    if router.nic_bps is not None:
        nic = (loads(L2, pi[None, :], keys[2]), loads(L2, pj[None, :], keys[2]))
    return LevelLoads(up, down, hop, flows, nic)  # type: ignore[arg-type]


def all_to_all_loads(router: Router, groups: np.ndarray, devices: int | None = None) -> LevelLoads:
    """Loads of a complete exchange (weight 1 per ordered pair) inside every row of ``groups``.

    A member sends to the g − 1 others: g − (members on its node) of them leave the node and
    g − (members in its pod) leave the pod; receiving is symmetric. ``devices``: as in
    ``flow_loads``, ``groups`` are those of devices [0, devices) of a periodic layout.
    """
    n_groups, g = groups.shape
    tiles = 1 if devices is None else router.num_devices // devices
    s1 = router.sizes[2]
    s12 = router.sizes[1] * s1
    flat = groups.ravel()
    gid = np.repeat(np.arange(n_groups, dtype=np.int64), g)

    def members_sharing(block: int) -> np.ndarray:
        key = gid * (router.num_devices // block + 1) + flat // block
        _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        return counts[inverse].astype(np.float64)

    on_node = members_sharing(s1)
    in_pod = members_sharing(s12)
    per_level = (g - in_pod, g - on_node, np.full(len(flat), g - 1.0))
    keys, sizes = _keys(router, flat), _key_sizes(router, devices)
    up = tuple(np.bincount(keys[i], per_level[i], sizes[i]) for i in range(3))
    present = []
    if (on_node > 1).any():
        present.append(L1)
    if (in_pod > on_node).any():
        present.append(L2)
    if (in_pod < g).any():
        present.append(L3)
    hop = max((_chain_latency(router.levels, lv) for lv in present), default=0.0)
    nic = None
    if router.nic_bps is not None:
        out = np.bincount(keys[2], per_level[1], sizes[2])
        nic = (out, out)
    flows = n_groups * tiles * g * (g - 1)
    return LevelLoads(up, up, hop, flows, nic, tiles)  # type: ignore[arg-type]


def link_key(router: Router, level: int, direction: str, key: int) -> tuple:
    """The router's interned key of the port link ``key`` of ``level`` (§4.2–§4.3)."""
    s3, s2, s1 = router.sizes
    c = CENTRE
    if router.paper_compat:
        port = (c, c, c)[:level] + (key,) + (c,) * (2 - level)
        anchor = (c, c, c)
    else:
        coords = (key // (s2 * s1), (key // s1) % s2, key % s1)
        if level == L3:
            coords = (key, c, c)
        elif level == L2:
            coords = (key // s2, key % s2, c)
        port = coords
        anchor = coords[:level] + (c,) * (3 - level)
    a, b = (port, anchor) if direction == "up" else (anchor, port)
    return ("link", a, b)


def top_links(
    router: Router, loads: LevelLoads
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(link ids, load, capacity) of the links within rounding of the busiest load/capacity,
    one per distinct (load, capacity), plus the energy per unit payload (pJ). Loads of one period
    (``tiles`` > 1) give the same links: every load of a later period occurs first in the first;
    the energy counts every period (integer-valued sums, so exactly the whole arrays' sums)."""
    epb = router._epb
    energy = 0.0
    # (level, direction, loads per key, capacity, pJ/bit, NIC?) of every kind of port link
    kinds = []
    for level in range(3):
        cap = router.levels[level].link_bandwidth_bps
        # ``np.add.reduce``: ``ndarray.sum``'s reduction without its Python wrapper (same bits)
        total = _sum(loads.up[level]) + _sum(loads.down[level])
        energy += float(total * loads.tiles) * 8.0 * epb[level]
        for direction, arr in (("up", loads.up[level]), ("down", loads.down[level])):
            kinds.append((level, direction, arr, cap, epb[level], False))
    if loads.nic is not None:  # NIC links: no energy of their own (module docstring)
        nic = router.nic_bps
        kinds += [
            (L2, "up", loads.nic[0], nic, 0.0, True),
            (L2, "down", loads.nic[1], nic, 0.0, True),
        ]
    # each kind's busiest load, found once (None: no links of that kind)
    peaks = [float(_max(k[2])) if len(k[2]) else None for k in kinds]
    best = max((p / k[3] for p, k in zip(peaks, kinds, strict=True) if p is not None), default=0.0)
    if best <= 0.0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), energy
    chosen: dict[tuple[float, float], tuple[bool, int]] = {}
    for (level, direction, arr, cap, pj, is_nic), peak in zip(kinds, peaks, strict=True):
        floor = best * (1 - 1e-9) * cap
        if peak is None or peak < floor * (1 - 1e-12):
            continue
        hit = (arr / cap >= best * (1 - 1e-9)).nonzero()[0]  # 1-D: ``np.flatnonzero``
        if not len(hit):  # within the rounding allowance of ``floor`` but not of ``best``
            continue
        sub = arr[hit]
        if _min(sub) == peak:  # every link hit carries the kind's busiest load (the usual
            found: Iterable[tuple[float, int]] = ((peak, int(hit[0])),)  # case): the first one
        else:  # each distinct load, ascending, at the first link carrying it
            found = [(x, int(hit[(sub == x).nonzero()[0][0]])) for x in sorted_unique(sub).tolist()]
        for load, key in found:
            if (load, cap) in chosen:
                continue
            name = nic_key(direction, key) if is_nic else link_key(router, level, direction, key)
            chosen[(load, cap)] = (is_nic, router._link(name, cap, level, pj))
    # on a tie the first link is named: a shared port link before a NIC
    order = sorted(chosen.items(), key=lambda kv: kv[1])
    ids = np.array([i for _, (_, i) in order], dtype=np.int64)
    mult = np.array([k[0] for k, _ in order])
    cap = np.array([k[1] for k, _ in order])
    return ids, mult, cap, energy


def nic_key(direction: str, key: int) -> tuple:
    """The router's interned key of the NIC-out (``up``) or NIC-in (``down``) link of the device
    whose L1 link key is ``key``."""
    return ("nic", direction, key)
