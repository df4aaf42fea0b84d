"""Complete exchange inside a few big rank groups on an innermost-switch NoC, from counts.

Spec: network-model.md §3.2–§3.3, §5, §6; the route split of ``split_routes``. When every port
choice of the L3 routes has a power-of-two number of candidates (at most R), the §3.2 hash
``|(src·A) xor (dst·B) xor hop| mod r`` depends on ``src mod R`` and ``dst mod R`` only (A and B
are odd, r divides R). A route is then fixed by the *classes* (L3 node, L2 node, device mod R) of
its two ends, so the g² pairs of a group collapse to products of per-class member counts:

* a walk from the source node to the first exit port carries Σ over destination classes;
* a core carries (members of the source L3 class) × (members of the destination L3 class);
* the longest route is the maximum over present class pairs, taken group by group.

Used for few, big groups (the costly case); other patterns route their pairs in numpy.
"""

from __future__ import annotations

import numpy as np

from .split_routes import _A, _B, _DENSE_KEYS, SplitRoutes, _Csr

MAX_GROUPS = 64  # per-group maxima below are computed one group at a time
MAX_CLASS_PAIRS = 1 << 17  # (L3 nodes · R)² class pairs tabulated once, in python


def power_of_two_radix(split: SplitRoutes) -> int | None:
    """R (the largest choice count) if every L3 pair's choice counts are powers of two."""
    s3 = split.s3
    radix = 1
    for pair in range(s3 * s3):
        if pair // s3 == pair % s3:
            continue
        plan = split.plan(pair)
        if not plan.regular:
            return None
        for r in plan.radices():
            if r & (r - 1):
                return None
            radix = max(radix, r)
    return radix


class _Tables:
    """Per (source L3 class, destination L3 class): first/last walk ports, core ids, latency."""

    def __init__(self, split: SplitRoutes, radix: int) -> None:
        s3 = split.s3
        r = split.router
        self.radix = radix
        cls = np.arange(s3 * radix)
        a3, alpha = cls // radix, cls % radix
        sa, sb = np.meshgrid(cls, cls, indexing="ij")
        self.cross = (a3[sa] != a3[sb]).ravel()
        pair = (a3[sa] * s3 + a3[sb]).ravel()
        src, dst = alpha[sa].ravel(), alpha[sb].ravel()  # representatives of the classes
        self.exit0 = np.zeros(len(pair), dtype=np.int64)
        self.entry = np.zeros(len(pair), dtype=np.int64)
        self.core = np.full(len(pair), -1, dtype=np.int64)
        self.core_lat = np.zeros(len(pair))
        cores: dict[tuple[int, int], int] = {}
        self.core_csr = _Csr()
        base = (src * _A) ^ (dst * _B)
        for i in np.flatnonzero(self.cross).tolist():
            plan = split.plan(int(pair[i]))
            code, digits = 0, []
            pos_hop = []
            for idx in range(len(plan.hops)):
                pos_hop.append((plan.kc[idx], idx))
                if plan.next_out[idx]:
                    pos_hop.append((len(plan.next_out[idx]), idx + 1))
            for rad, hop in pos_hop:
                d = abs(int(base[i]) ^ hop) % rad
                digits.append(d)
                code = code * rad + d
            k_last = digits[-1]
            self.exit0[i] = plan.exit[0][digits[0]]
            self.entry[i] = plan.entry[-1][k_last]
            key = (int(pair[i]), code)
            cid = cores.get(key)
            if cid is None:
                cid = cores[key] = self.core_csr.add(split.core(*key)[0])
            self.core[i] = cid
            self.core_lat[i] = split.core(*key)[1]
        s2 = split.s2
        # L2 walk latency between any two L2 positions (-1 = centre), summed hop by hop
        h2 = r.levels[1].hop_latency_s
        pos = list(range(-1, s2))
        self.walk_lat = np.zeros((s2 + 1, s2 + 1))
        for a in pos:
            for b in pos:
                lat = 0.0
                for _ in r.levels[1].route(a, b):
                    lat += h2
                self.walk_lat[a + 1, b + 1] = lat


def tables_for(split: SplitRoutes) -> _Tables | None:
    """The class tables of ``split`` (memoised), or None when a choice count is not a power of
    two."""
    hit = getattr(split, "_a2a_tables", False)
    if hit is False:
        radix = power_of_two_radix(split)
        fits = split._walk_space <= _DENSE_KEYS
        if radix is None or not fits or (split.s3 * radix) ** 2 > MAX_CLASS_PAIRS:
            hit = None
        else:
            hit = _Tables(split, radix)
        split._a2a_tables = hit
    return hit


def all_to_all_links(
    split: SplitRoutes, groups: np.ndarray, tables: _Tables
) -> tuple[float, np.ndarray, np.ndarray]:
    """(longest route latency s, link ids, weights) of a complete exchange (weight 1 per
    ordered pair) inside every row of ``groups``."""
    r = split.router
    up, _, down, _ = r.end_arrays()
    flat = groups.ravel()
    ends_ids = np.concatenate([up[flat].ravel(), down[flat].ravel()])
    ends_w = np.full(len(ends_ids), float(groups.shape[1] - 1))
    hop, ids, w = _middles(split, groups, tables)
    keep = ends_ids >= 0
    return hop, np.concatenate([ends_ids[keep], ids]), np.concatenate([ends_w[keep], w])


def _middles(
    split: SplitRoutes, groups: np.ndarray, tables: _Tables
) -> tuple[float, np.ndarray, np.ndarray]:
    radix = tables.radix
    r = split.router
    s3, s2, s1 = r.sizes
    h_up = float(r.end_arrays()[1].max())
    h_down = float(r.end_arrays()[3].max())
    nc = s3 * radix
    walk_w = np.zeros(split._walk_space)
    walk3 = walk_w.reshape(s3, s2 + 1, s2 + 1)  # (tile, from + 1, to + 1), a view
    core_w = np.zeros(len(tables.core_csr.start))
    hop = 0.0
    node = groups // s1
    keys = ((node // s2) * s2 + node % s2) * radix + groups % radix
    counts: dict[bytes, list] = {}  # groups with equal class counts contribute equally
    for row in keys:
        cnt = np.bincount(row, minlength=s3 * s2 * radix).astype(float)
        hit = counts.setdefault(cnt.tobytes(), [cnt, 0])
        hit[1] += 1
    off = ~np.eye(s2, dtype=bool)
    for cnt, mult in counts.values():
        cnt = cnt.reshape(s3, s2, radix)
        per_node = cnt.sum(axis=2)  # [s3, s2]
        per_l3 = cnt.sum(axis=1).reshape(nc)  # [s3·R] members per L3 class
        if (per_node > 1).any():  # two members on one node: device → centre → device
            hop = max(hop, h_up + h_down)
        # same L3 node, different L2 nodes: one walk s2 → d2 inside the tile
        ww = per_node[:, :, None] * per_node[:, None, :] * off
        walk3[:, 1:, 1:] += mult * ww
        seen = (ww > 0).any(axis=0)
        if seen.any():
            hop = max(hop, h_up + float(tables.walk_lat[1:, 1:][seen].max()) + h_down)
        # different L3 nodes: first walk, core, last walk
        both = np.outer(per_l3, per_l3).ravel() * tables.cross
        live = np.flatnonzero(both)
        if not len(live):
            continue
        core_w += mult * np.bincount(tables.core[live], both[live], minlength=len(core_w))
        sa, sb = live // nc, live % nc
        # first walks: (s3, s2, exit port) weighted by members of the destination L3 class
        e_w = np.bincount(sa * (s2 + 1) + tables.exit0[live] + 1, per_l3[sb], nc * (s2 + 1))
        first = np.einsum("tsa,tap->tsp", cnt, e_w.reshape(s3, radix, s2 + 1))
        walk3[:, 1:, :] += mult * first  # [s3, s2 (from), port + 1]
        # last walks: (d3, entry port, d2) weighted by members of the source L3 class
        f_w = np.bincount(sb * (s2 + 1) + tables.entry[live] + 1, per_l3[sa], nc * (s2 + 1))
        last = np.einsum("tbp,tdb->tpd", f_w.reshape(s3, radix, s2 + 1), cnt)
        walk3[:, :, 1:] += mult * last  # [s3, port + 1, d2 (to)]
        # longest route: per class pair, the farthest present source and destination nodes
        present = cnt > 0  # [s3, s2, R]
        src3, srca, dst3, dstb = sa // radix, sa % radix, sb // radix, sb % radix
        p_src = present[src3, :, srca]  # [L, s2]
        fw = np.where(p_src, tables.walk_lat[1:, tables.exit0[live] + 1].T, -np.inf).max(axis=1)
        p_dst = present[dst3, :, dstb]
        lw = np.where(p_dst, tables.walk_lat[tables.entry[live] + 1, 1:], -np.inf).max(axis=1)
        hop = max(hop, float((h_up + fw + tables.core_lat[live] + lw).max()) + h_down)
    keys = np.flatnonzero(walk_w)
    ids_w, w_w = split.expand_walks(keys, walk_w[keys])
    ids_c = np.flatnonzero(core_w)
    ids_k, w_k = tables.core_csr.expand(ids_c, core_w[ids_c])
    return hop, np.concatenate([ids_w, ids_k]), np.concatenate([w_w, w_k])
