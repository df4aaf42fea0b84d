"""Middle segments of innermost-switch routes, split so that per-pair work is numpy only.

Spec: network-model.md §3.2 (port choice hash), §3.3 (hierarchical route). In a hierarchy whose
L1 is a switch (and that is not all-switch), the part of a route between the source's and the
destination's L1 centres is:

* same L3 node: one L2 *walk* from the source node to the destination node;
* otherwise: an L2 walk from the source node to the first exit port, a *core* (every L3
  crossing and the L2 walks between crossings) and an L2 walk from the last entry port to the
  destination node.

The port choices are the only per-pair inputs. They are evaluated with numpy for every pair at
once; each core is routed once per (L3 node pair, choices) and each walk once per (L3 tile,
from, to), both with the scalar router, so the links, capacities and latencies are exactly the
router's. Link loads are accumulated per walk and per core with ``bincount``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .topology import CENTRE, EXIT_ENTRY
from .unique import sorted_unique

if TYPE_CHECKING:
    from .routing import Router

_A, _B = 1315423911, 2654435761  # port_hash multipliers (§3.2)
_DENSE_KEYS = 1 << 22  # largest core-key space indexed densely; above it np.unique is used


class _PairPlan:
    """Port tables of the L3 route between two L3 nodes (python lists, one entry per hop)."""

    __slots__ = ("hops", "kc", "exit", "entry", "next_out", "regular")

    def __init__(self, router: Router, s3: int, d3: int) -> None:
        outer, inner = router.levels[0], router.levels[1]
        self.hops = outer.route(s3, d3)
        self.kc, self.exit, self.entry, self.next_out = [], [], [], []
        self.regular = True
        for idx, (u, v) in enumerate(self.hops):
            out_side, in_side = EXIT_ENTRY[outer.hop_direction(u, v)]
            in_ports, out_ports = inner.ports(in_side), inner.ports(out_side)
            kc = min(len(outer.ports(out_side)), len(in_ports), len(out_ports) or len(in_ports))
            if kc <= 0:
                self.regular = False
            self.kc.append(kc)
            self.exit.append(out_ports if out_ports else in_ports)
            self.entry.append(in_ports)
            nxt: tuple[int, ...] = ()
            if idx < len(self.hops) - 1:
                nu, nv = self.hops[idx + 1]
                nxt = inner.ports(EXIT_ENTRY[outer.hop_direction(nu, nv)][0])
            self.next_out.append(nxt)

    def radices(self) -> list[int]:
        """Number of candidates of each choice, in order k0, j0, k1, j1, …, k_last."""
        out: list[int] = []
        for idx in range(len(self.hops)):
            out.append(self.kc[idx])
            if self.next_out[idx]:
                out.append(len(self.next_out[idx]))
        return out


class SplitRoutes:
    """Walk and core segments of one router, memoised; see the module docstring."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.s3, self.s2 = router.sizes[0], router.sizes[1]
        self._plans: dict[int, _PairPlan] = {}
        self._walk_ids: dict[int, tuple[list[int], float]] = {}
        self._core_ids: dict[tuple[int, int], tuple[list[int], float]] = {}
        self._lat_table: np.ndarray | None = None
        self._walks = _Csr()  # walk key -> link ids (sparse keys mapped through _walk_slot)
        self._walk_slot: dict[int, int] = {}
        self._slot_arr: np.ndarray | None = None

    # ------------------------------------------------------------------ scalar pieces
    def plan(self, pair: int) -> _PairPlan:
        hit = self._plans.get(pair)
        if hit is None:
            hit = self._plans[pair] = _PairPlan(self.router, *divmod(pair, self.s3))
        return hit

    def walk_key(self, tile: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        w = self.s2 + 1
        return (tile * w + (a + 1)) * w + (b + 1)

    def walk(self, key: int) -> tuple[list[int], float]:
        """(link ids, latency) of the L2 walk ``key`` inside one L3 tile (L1 at its centre)."""
        hit = self._walk_ids.get(key)
        if hit is None:
            w = self.s2 + 1
            rest, b = divmod(key, w)
            tile, a = divmod(rest, w)
            a, b = a - 1, b - 1
            path = [a] + [y for _, y in self.router.levels[1].route(a, b)]
            states = [(tile, x, CENTRE) for x in path]
            ids, lat = self.router._steps(states)
            hit = self._walk_ids[key] = (ids, lat)
        return hit

    def core(self, pair: int, code: int) -> tuple[list[int], float]:
        """(link ids, latency) from the first exit port to the last entry port."""
        hit = self._core_ids.get((pair, code))
        if hit is not None:
            return hit
        plan = self.plan(pair)
        digits = _digits(code, plan.radices())
        s3 = pair // self.s3
        level2 = self.router.levels[1]
        k0 = digits[0]
        cur = [s3, plan.exit[0][k0], CENTRE]
        states = [tuple(cur)]

        def walk(target: int) -> None:
            for _, y in level2.route(cur[1], target):
                cur[1] = y
                states.append(tuple(cur))

        pos = 0
        for idx, (_, v) in enumerate(plan.hops):
            k = digits[pos]
            pos += 1
            if idx > 0:
                walk(plan.exit[idx][k])
            cur[0], cur[1] = v, plan.entry[idx][k]
            states.append(tuple(cur))
            if plan.next_out[idx]:
                walk(plan.next_out[idx][digits[pos]])
                pos += 1
        ids, lat = self.router._steps(states)
        hit = self._core_ids[(pair, code)] = (ids, lat)
        return hit

    # ------------------------------------------------------------------ vectorised
    def loads(
        self, src: np.ndarray, dst: np.ndarray, weight: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For flows between different L1 switches: (latency of the middle part, s, per flow;
        link ids; weights) — the ids and weights aggregated over walks and cores."""
        r = self.router
        s1 = r.sizes[2]
        s12 = self.s2 * s1
        s3c, d3c = src // s12, dst // s12
        s2c, d2c = (src // s1) % self.s2, (dst // s1) % self.s2
        lat = np.zeros(len(src))
        walk_parts: list[tuple[np.ndarray, np.ndarray]] = []  # (walk key, weight)
        ids_out: list[np.ndarray] = []
        w_out: list[np.ndarray] = []
        same = np.flatnonzero(s3c == d3c)
        if len(same):
            key = self.walk_key(s3c[same], s2c[same], d2c[same])
            walk_parts.append((key, weight[same]))
            lat[same] = self._walk_latency(key)
        cross = np.flatnonzero(s3c != d3c)
        if len(cross):
            c_lat, c_walks, c_ids, c_w = self._cross(
                src[cross],
                dst[cross],
                s3c[cross],
                d3c[cross],
                s2c[cross],
                d2c[cross],
                weight[cross],
            )
            lat[cross] = c_lat
            walk_parts += c_walks
            ids_out += c_ids
            w_out += c_w
        if walk_parts:
            keys = np.concatenate([k for k, _ in walk_parts])
            ws = np.concatenate([w for _, w in walk_parts])
            uniq, wsum = self._sum_by_key(keys, ws)
            i, w = self.expand_walks(uniq, wsum)
            ids_out.append(i)
            w_out.append(w)
        ids = np.concatenate(ids_out) if ids_out else np.zeros(0, dtype=np.int64)
        ws = np.concatenate(w_out) if w_out else np.zeros(0)
        return lat + r.levels[2].hop_latency_s, ids, ws

    @property
    def _walk_space(self) -> int:
        return self.s3 * (self.s2 + 1) ** 2

    def _sum_by_key(self, keys: np.ndarray, ws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(distinct walk keys, summed weight of each)."""
        if self._walk_space <= _DENSE_KEYS:
            total = np.bincount(keys, weights=ws, minlength=self._walk_space)
            present = np.flatnonzero(total)
            return present, total[present]
        uniq, inv = np.unique(keys, return_inverse=True)
        return uniq, np.bincount(inv, weights=ws, minlength=len(uniq))

    def _walk_latency(self, key: np.ndarray) -> np.ndarray:
        """Latency (s) of each walk key."""
        if self._walk_space <= _DENSE_KEYS:
            if self._lat_table is None:
                self._lat_table = np.full(self._walk_space, np.nan)
            table = self._lat_table
            vals = table[key]
            missing = np.isnan(vals)
            if missing.any():
                for k in sorted_unique(key[missing]).tolist():
                    table[k] = self.walk(k)[1]
                vals = table[key]
            return vals
        uniq, inv = np.unique(key, return_inverse=True)
        return np.array([self.walk(int(k))[1] for k in uniq.tolist()])[inv]

    def _cross(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        s3c: np.ndarray,
        d3c: np.ndarray,
        s2c: np.ndarray,
        d2c: np.ndarray,
        weight: np.ndarray,
    ) -> tuple[np.ndarray, list, list[np.ndarray], list[np.ndarray]]:
        """Flows across L3 nodes: (latency, walk (key, weight) parts, core link ids, weights)."""
        pair = s3c * self.s3 + d3c
        upairs, pinv = np.unique(pair, return_inverse=True)
        plans = [self.plan(int(p)) for p in upairs.tolist()]
        regular = np.array([p.regular for p in plans])
        if not regular.all():
            raise NotImplementedError("irregular L3 route")  # caller falls back
        if max(math.prod(p.radices()) for p in plans) > 1 << 40:
            raise NotImplementedError("too many port-choice combinations")
        hmax = max(len(p.hops) for p in plans)
        rmax = max(len(p.radices()) for p in plans)
        radix = np.ones((len(plans), rmax), dtype=np.int64)
        hop_of = np.zeros((len(plans), rmax), dtype=np.int64)  # hash 'hop' of each choice
        kpos = np.zeros((len(plans), hmax), dtype=np.int64)  # digit position of each k
        nh = np.array([len(p.hops) for p in plans])
        ports = max(max(len(e) for e in p.exit + p.entry) for p in plans)
        exit0 = np.zeros((len(plans), ports), dtype=np.int64)
        entry_last = np.zeros((len(plans), ports), dtype=np.int64)
        for i, p in enumerate(plans):
            pos = 0
            for idx in range(len(p.hops)):
                radix[i, pos], hop_of[i, pos], kpos[i, idx] = p.kc[idx], idx, pos
                pos += 1
                if p.next_out[idx]:
                    radix[i, pos], hop_of[i, pos] = len(p.next_out[idx]), idx + 1
                    pos += 1
            exit0[i, : len(p.exit[0])] = p.exit[0]
            entry_last[i, : len(p.entry[-1])] = p.entry[-1]
        base = (src * _A) ^ (dst * _B)
        code = np.zeros(len(src), dtype=np.int64)
        r_f = radix[pinv]
        h_f = hop_of[pinv]
        digits = np.empty((len(src), rmax), dtype=np.int64)
        for c in range(rmax):
            digits[:, c] = np.abs(base ^ h_f[:, c]) % r_f[:, c]
            code = code * r_f[:, c] + digits[:, c]
        k0 = digits[:, 0]
        k_last = digits[np.arange(len(src)), kpos[pinv, nh[pinv] - 1]]
        first = self.walk_key(s3c, s2c, exit0[pinv, k0])
        last = self.walk_key(d3c, entry_last[pinv, k_last], d2c)
        # cores: one per (pair, code)
        span = max(math.prod(p.radices()) for p in plans)
        ckey = pinv * span + code
        if len(upairs) * span <= _DENSE_KEYS:
            wsum_all = np.bincount(ckey, weights=weight, minlength=len(upairs) * span)
            present = np.flatnonzero(wsum_all)
            wsum = wsum_all[present]
            idx_of = np.zeros(len(upairs) * span, dtype=np.int64)
            idx_of[present] = np.arange(len(present))
            cinv = idx_of[ckey]
        else:
            present, cinv = np.unique(ckey, return_inverse=True)
            wsum = np.bincount(cinv, weights=weight, minlength=len(present))
        cores = [self.core(int(upairs[k // span]), int(k % span)) for k in present.tolist()]
        core_lat = np.array([c[1] for c in cores])
        lat = self._walk_latency(first) + core_lat[cinv] + self._walk_latency(last)
        ids, ws = self._expand([c[0] for c in cores], wsum)
        return lat, [(first, weight), (last, weight)], [ids], [ws]

    @staticmethod
    def _expand(lists: list[list[int]], wsum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        csr = _Csr()
        slots = np.array([csr.add(x) for x in lists], dtype=np.int64)
        return csr.expand(slots, wsum)

    def expand_walks(self, keys: np.ndarray, wsum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(link ids, weights) of the walks ``keys`` carrying ``wsum`` each."""
        if self._walk_space <= _DENSE_KEYS:
            if self._slot_arr is None:
                self._slot_arr = np.full(self._walk_space, -1, dtype=np.int64)
            table = self._slot_arr
            out = table[keys]
            for k in sorted_unique(keys[out < 0]).tolist():
                table[k] = self._walks.add(self.walk(k)[0])
            return self._walks.expand(table[keys], wsum)
        slot = self._walk_slot
        out = np.empty(len(keys), dtype=np.int64)
        for i, k in enumerate(keys.tolist()):
            j = slot.get(k)
            if j is None:
                j = slot[k] = self._walks.add(self.walk(k)[0])
            out[i] = j
        return self._walks.expand(out, wsum)


class _Csr:
    """Append-only lists of link ids with a numpy view, expanded by weight in one step."""

    def __init__(self) -> None:
        self.flat: list[int] = []
        self.start: list[int] = []
        self.length: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, ids: list[int]) -> int:
        self.start.append(len(self.flat))
        self.length.append(len(ids))
        self.flat.extend(ids)
        self._arrays = None
        return len(self.start) - 1

    def expand(self, slots: np.ndarray, wsum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Link ids of the lists ``slots`` (concatenated) and each list's weight repeated."""
        if self._arrays is None:
            self._arrays = (
                np.asarray(self.flat, dtype=np.int64),
                np.asarray(self.start, dtype=np.int64),
                np.asarray(self.length, dtype=np.int64),
            )
        flat, start, length = self._arrays
        seg = length[slots]
        total = int(seg.sum())
        offsets = np.repeat(start[slots] - np.cumsum(seg) + seg, seg) + np.arange(total)
        return flat[offsets], np.repeat(wsum, seg)


def _digits(code: int, radices: list[int]) -> list[int]:
    out = []
    for r in reversed(radices):
        code, d = divmod(code, r)
        out.append(d)
    return out[::-1]
