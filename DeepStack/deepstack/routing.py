"""Hierarchical routes and the extended link graph (per-link identity, capacity, energy).

Spec: network-model.md §1.1 (device coordinates), §3.2–§3.3 (ports, hierarchical route, hop
latency), §4 (link graph; §4.3 fixed per-switch-instance identity, optional ``paper_compat``), §6
(energy per link level).

A route is a list of *states* ``(k3, k2, k1)`` (per-level node ids, ``-1`` = switch centre). Each
transition between consecutive states loads one directed link (plus, for an innermost switch in a
mixed hierarchy, the L1 centre self-loop) and costs the hop latency of the outermost level that
changed. The states of one route come from :func:`deepstack.route_states.route_states`
(re-exported here with ``port_hash`` and ``State``).
"""

from __future__ import annotations

import numpy as np

from .profile import NocProfile
from .route_states import State, port_hash, route_states
from .topology import CENTRE
from .unique import sorted_unique

__all__ = ["Router", "State", "port_hash"]

_NON_SWITCH_L2_LINKS = frozenset(
    {"mesh2d", "torus2d", "ring", "chain", "mchain_nring", "mring_nchain"}
)


class Router:
    """Routes device pairs of one profile and interns the links they load.

    ``paper_compat`` reproduces the paper-era all-switch link identity (equally numbered ports of
    different switch instances share one link, §4.3); the default is one link per instance.
    """

    def __init__(self, profile: NocProfile, paper_compat: bool = False) -> None:
        self.profile = profile
        self.levels = profile.levels
        self.sizes = tuple(lv.size for lv in self.levels)
        self.num_devices = profile.num_devices
        self.all_switch = profile.all_switch
        self.nic_bps = profile.nic_bandwidth_bps  # per-device NIC links (all-switch only)
        self.paper_compat = paper_compat
        self._inner_switch = self.levels[2].kind == "switch"
        self._epb = (
            tuple(profile.energy.for_level(i) for i in range(3))
            if profile.energy is not None
            else (0.0, 0.0, 0.0)
        )
        self._index: dict[tuple, int] = {}
        self.link_keys: list[tuple] = []
        self._cap: list[float] = []
        self._epb_link: list[float] = []
        self.link_level: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._is_link = np.zeros(0, dtype=bool)
        self._chains: dict[tuple[int, int], tuple[np.ndarray, float]] = {}
        self._transitions: dict[tuple[State, State], tuple[float, tuple[int, ...]]] = {}
        self._middle_index: dict[tuple[int, int, int, int], list[int]] = {}
        self.middles: list[tuple[tuple, list[int], float]] = []  # (choices, link ids, latency)
        self._mid_flat: list[int] = []
        self._mid_start: list[int] = []
        self._mid_arrays: tuple[np.ndarray, ...] | None = None
        n = self.num_devices
        self._pair_mid = np.full(n * n, -1, dtype=np.int32) if n <= 4096 else None
        self._end_arrays: tuple[np.ndarray, ...] | None = None
        self._ends: dict[int, tuple[tuple[int, ...], float, tuple[int, ...], float]] = {}
        self._split = None
        self._nic_ids: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def split(self):
        """Walk/core split of innermost-switch routes (``split_routes``); None if all-switch or
        L1 is not a switch."""
        if self._split is None and self._inner_switch and not self.all_switch:
            from .split_routes import SplitRoutes

            self._split = SplitRoutes(self)
        return self._split

    # ----------------------------------------------------------------------------- placement
    def coords(self, nid: int) -> State:
        """Per-level node ids ``(k3, k2, k1)`` of device ``nid`` (innermost fastest, §1.1)."""
        s3, s2, s1 = self.sizes
        return ((nid // (s1 * s2)) % s3, (nid // s1) % s2, nid % s1)

    # ----------------------------------------------------------------------------- routes
    def states(
        self, src: int, dst: int, record: list[tuple[int, int, int, int]] | None = None
    ) -> list[State]:
        """The chain of states visited from device ``src`` to device ``dst`` (§3.3).

        ``record`` (optional) collects every port choice ``(level, hop, count, choice)`` with more
        than one candidate port: the route depends on ``(src, dst)`` only through them.
        """
        return route_states(self.levels, self.coords(src), self.coords(dst), src, dst, record)

    # ----------------------------------------------------------------------------- links
    def _link(self, key: tuple, cap: float, level: int, epb: float) -> int:
        idx = self._index.get(key)
        if idx is None:
            idx = len(self.link_keys)
            self._index[key] = idx
            self.link_keys.append(key)
            self._cap.append(cap)
            self._epb_link.append(epb)
            self.link_level.append(level)
            self._arrays = None
        return idx

    def _modelled(self, level: int, prev: State, cur: State) -> bool:
        """Whether a mixed-hierarchy transition lands on a modelled link (§4.1 coverage)."""
        lv = self.levels[level]
        pair = (prev[level], cur[level])
        if level == 2:
            return lv.kind == "switch" or pair in lv.neighbours
        if level == 1 and lv.kind not in _NON_SWITCH_L2_LINKS:
            return False
        return pair in lv.neighbours

    def transition_links(self, prev: State, cur: State) -> tuple[int, list[int]]:
        """(level that changed, link ids loaded) for one state transition (§4)."""
        level = next(i for i in range(3) if prev[i] != cur[i])
        lv = self.levels[level]
        if self.all_switch:
            if self.paper_compat:
                a = tuple(prev[i] if i == level else CENTRE for i in range(3))
                b = tuple(cur[i] if i == level else CENTRE for i in range(3))
            else:
                a = prev[: level + 1] + (CENTRE,) * (2 - level)
                b = cur[: level + 1] + (CENTRE,) * (2 - level)
            return level, [
                self._link(("link", a, b), lv.link_bandwidth_bps, level, self._epb[level])
            ]
        ok = self._modelled(level, prev, cur)
        ids = [
            self._link(
                ("link", prev, cur),
                lv.link_bandwidth_bps if ok else 0.0,
                level,
                self._epb[level] if ok else 0.0,
            )
        ]
        if level == 2 and self._inner_switch and CENTRE in (prev[2], cur[2]):
            ids.append(self._link(("centre", cur[:2]), lv.centre_loop_bps, 2, self._epb[2]))
        return level, ids

    def _steps(self, states: list[State], latency: float = 0.0) -> tuple[list[int], float]:
        """(link ids, latency) of consecutive states; latency is summed in route order from
        ``latency`` (so sums round exactly like the reference's per-chain accumulation)."""
        ids: list[int] = []
        memo = self._transitions
        for step in zip(states, states[1:], strict=False):
            hit = memo.get(step)
            if hit is None:
                level, links = self.transition_links(*step)
                hit = memo[step] = (self.levels[level].hop_latency_s, tuple(links))
            latency += hit[0]
            ids.extend(hit[1])
        return ids, latency

    def middle(self, src: int, dst: int) -> int:
        """Index into :attr:`middles` of the route part between the source and destination L1
        switch centres (innermost switch, different L1 instances); its latency includes the
        source's device → centre hop.

        That part depends on the devices only through the port choices, so it is memoised per
        (source node, destination node, choices) and shared by all device pairs.
        """
        s, d = self.coords(src), self.coords(dst)
        entries = self._middle_index.setdefault((s[0], s[1], d[0], d[1]), [])
        for idx in entries:
            if all(port_hash(src, dst, lv, hop, n) == k for lv, hop, n, k in self.middles[idx][0]):
                return idx
        record: list[tuple[int, int, int, int]] = []
        states = self.states(src, dst, record)
        # latency includes the source's device → centre hop (an L1 transition), summed in order
        ids, latency = self._steps(states[1:-1], self.levels[2].hop_latency_s)
        self.middles.append((tuple(record), ids, latency))
        self._mid_start.append(len(self._mid_flat))
        self._mid_flat.extend(ids)
        entries.append(len(self.middles) - 1)
        return len(self.middles) - 1

    def middles_for(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`middle` for device pairs on different L1 instances (memoised).

        Unresolved pairs are matched against the known segments of their node pair by evaluating
        the recorded port choices with numpy; only pairs needing a new segment are routed.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if self._pair_mid is None:
            return np.array(
                [self.middle(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True)],
                dtype=np.int64,
            )
        key = src * self.num_devices + dst
        out = self._pair_mid[key].astype(np.int64)
        todo = np.flatnonzero(out < 0)
        per_l1 = self.sizes[2]
        while len(todo):
            s_t, d_t = src[todo], dst[todo]
            s_c = [self.coords(int(x)) for x in sorted_unique(s_t // per_l1) * per_l1]
            node_of = {c[0] * self.sizes[1] + c[1]: c for c in s_c}
            d_c = [self.coords(int(x)) for x in sorted_unique(d_t // per_l1) * per_l1]
            node_of.update({c[0] * self.sizes[1] + c[1]: c for c in d_c})
            ns, nd = s_t // per_l1, d_t // per_l1
            pair_key = ns * (self.num_devices // per_l1) + nd
            uniq, inv = np.unique(pair_key, return_inverse=True)
            lists = []
            for k in uniq.tolist():
                a, b = divmod(k, self.num_devices // per_l1)
                ca, cb = node_of[a], node_of[b]
                lists.append(self._middle_index.get((ca[0], ca[1], cb[0], cb[1]), []))
            width = max((len(x) for x in lists), default=0)
            matched = np.full(len(todo), -1, dtype=np.int64)
            for j in range(width):
                cand = np.array([x[j] if j < len(x) else -1 for x in lists], dtype=np.int64)[inv]
                free = np.flatnonzero((matched < 0) & (cand >= 0))
                if not len(free):
                    continue
                ok = self._choices_match(s_t[free], d_t[free], cand[free])
                matched[free[ok]] = cand[free[ok]]
            # the first still-unmatched pair of each node pair gets a freshly routed segment
            left = np.flatnonzero(matched < 0)
            if len(left):
                _, first = np.unique(inv[left], return_index=True)
                for i in left[first].tolist():
                    matched[i] = self.middle(int(s_t[i]), int(d_t[i]))
            done = matched >= 0
            out[todo[done]] = matched[done]
            self._pair_mid[key[todo[done]]] = matched[done]
            todo = todo[~done]
        return out

    def _choices_match(self, src: np.ndarray, dst: np.ndarray, entry: np.ndarray) -> np.ndarray:
        """Whether each pair's port choices equal those recorded for its candidate segment."""
        recs = [self.middles[e][0] for e in entry.tolist()]
        q = max((len(r) for r in recs), default=0)
        ok = np.ones(len(entry), dtype=bool)
        if q == 0:
            return ok
        table = np.zeros((len(entry), q, 4), dtype=np.int64)
        table[:, :, 2] = 1  # padding: one candidate, choice 0 always matches
        for i, r in enumerate(recs):
            if r:
                table[i, : len(r)] = r
        x = (src[:, None] * 1315423911) ^ (dst[:, None] * 2654435761)
        x = x ^ (table[:, :, 0] * 97) ^ table[:, :, 1]
        return np.all(np.abs(x) % table[:, :, 2] == table[:, :, 3], axis=1)

    def middle_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """CSR view of the middles: (flat link ids, start, length, latency s)."""
        if self._mid_arrays is None or len(self._mid_arrays[1]) != len(self.middles):
            start = np.asarray(self._mid_start, dtype=np.int64)
            length = np.asarray([len(m[1]) for m in self.middles], dtype=np.int64)
            lat = np.asarray([m[2] for m in self.middles], dtype=np.float64)
            self._mid_arrays = (np.asarray(self._mid_flat, dtype=np.int64), start, length, lat)
        return self._mid_arrays

    def end_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per device: (up link ids [N, 2], up latency, down link ids [N, 2], down latency); ids
        padded with -1 (an innermost switch loads one link, plus the centre self-loop if mixed)."""
        if self._end_arrays is None:
            n = self.num_devices
            up = np.full((n, 2), -1, dtype=np.int64)
            down = np.full((n, 2), -1, dtype=np.int64)
            up_lat = np.zeros(n)
            down_lat = np.zeros(n)
            for u in range(n):
                a, la, b, lb = self.ends(u)
                up[u, : len(a)] = a
                down[u, : len(b)] = b
                up_lat[u], down_lat[u] = la, lb
            self._end_arrays = (up, up_lat, down, down_lat)
        return self._end_arrays

    def ends(self, device: int) -> tuple[tuple[int, ...], float, tuple[int, ...], float]:
        """(up link ids, up latency, down link ids, down latency) of a device and its L1 switch
        centre (innermost switch only)."""
        hit = self._ends.get(device)
        if hit is None:
            s = self.coords(device)
            c = (s[0], s[1], CENTRE)
            up, lat_up = self._steps([s, c])
            down, lat_down = self._steps([c, s])
            hit = self._ends[device] = (tuple(up), lat_up, tuple(down), lat_down)
        return hit

    def chain(self, src: int, dst: int) -> tuple[np.ndarray, float]:
        """(link ids loaded, in order with repeats; summed hop latency in s) of ``src → dst``."""
        key = (src, dst)
        hit = self._chains.get(key)
        if hit is not None:
            return hit
        s, d = self.coords(src), self.coords(dst)
        if self._inner_switch and s[:2] != d[:2]:
            first, _, _, _ = self.ends(src)
            _, _, last, lat2 = self.ends(dst)
            _, mid, lat1 = self.middles[self.middle(src, dst)]  # lat1 includes the first hop
            ids, latency = list(first) + mid + list(last), lat1 + lat2
            if self.nic_bps is not None:
                out, into = self.nic_arrays()
                ids += [int(out[src]), int(into[dst])]
        else:
            ids, latency = self._steps(self.states(src, dst))
        result = (np.asarray(ids, dtype=np.int32), latency)
        self._chains[key] = result
        return result

    def nic_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Per device: (NIC-out link id, NIC-in link id); only for a profile with per-device NICs
        (every flow leaving its L1 switch loads both, ``deepstack.switch_loads``)."""
        if self._nic_ids is None:
            from .switch_loads import nic_key

            keys = np.arange(self.num_devices) % self.sizes[2] if self.paper_compat else None
            ids = []
            for direction in ("up", "down"):
                ids.append(
                    np.array(
                        [
                            self._link(
                                nic_key(direction, int(u if keys is None else keys[u])),
                                self.nic_bps,
                                1,
                                0.0,
                            )
                            for u in range(self.num_devices)
                        ],
                        dtype=np.int64,
                    )
                )
            self._nic_ids = (ids[0], ids[1])
        return self._nic_ids

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(capacity bytes/s, energy pJ/bit) per interned link id."""
        if self._arrays is None or len(self._arrays[0]) != len(self._cap):
            self._arrays = (
                np.asarray(self._cap, dtype=np.float64),
                np.asarray(self._epb_link, dtype=np.float64),
            )
        return self._arrays

    def unmodelled(self, ids: np.ndarray) -> np.ndarray:
        """Mask of link ids that carry traffic but have no modelled capacity (network-model §4.1:
        e.g. an L2 switch in a mixed hierarchy); switch-centre self-loops are not counted."""
        cap = self.arrays()[0][ids]
        if len(self._is_link) != len(self.link_keys):
            self._is_link = np.array([k[0] == "link" for k in self.link_keys], dtype=bool)
        return (cap <= 0.0) & self._is_link[ids]

    def describe_link(self, idx: int) -> str:
        """Human-readable name of link ``idx`` (level, endpoints as per-level node ids)."""
        key = self.link_keys[idx]
        name = ("L3", "L2", "L1")[self.link_level[idx]]
        if key[0] == "centre":
            return f"{name} switch-centre self-loop at {key[1]}"
        if key[0] == "nic":
            side = "out of" if key[1] == "up" else "into"
            return f"NIC {side} device {key[2]}"
        return f"{name} link {key[1]} -> {key[2]}"

    @property
    def inner_switch(self) -> bool:
        """True when L1 is a switch (routes split into device ends + a shared middle)."""
        return self._inner_switch

    @property
    def cached_routes(self) -> int:
        """Routed (src, dst) pairs plus shared middle segments held in the route caches."""
        return len(self._chains) + len(self.middles)
