"""One level of the hierarchy: topology kinds, ports, neighbours and intra-level routes.

Spec: network-model.md §1.1 (kinds, shapes), §3.1 (intra-level routes), §3.2 (ports and hop
directions). Nodes inside a level are numbered ``id = r·cols + c``; ``-1`` is a switch centre.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

CENTRE = -1

KINDS = (
    "switch",
    "all_to_all",
    "ring",
    "chain",
    "mesh2d",
    "torus2d",
    "mchain_nring",
    "mring_nchain",
)
GRID_KINDS = frozenset({"mesh2d", "torus2d", "mchain_nring", "mring_nchain"})
# Kinds whose row dimension / column dimension wraps around (§3.1).
_ROW_RING = frozenset({"torus2d", "mring_nchain"})
_COL_RING = frozenset({"torus2d", "ring", "mchain_nring"})
SIDES = (
    "left_in",
    "left_out",
    "right_in",
    "right_out",
    "up_in",
    "up_out",
    "down_in",
    "down_out",
)
# direction of an outer hop -> (exit side, entry side), §3.2
EXIT_ENTRY = {
    "down": ("down_out", "up_in"),
    "up": ("up_out", "down_in"),
    "right": ("right_out", "left_in"),
    "left": ("left_out", "right_in"),
}


@dataclass(frozen=True)
class Level:
    """One hierarchy level: ``kind``, ``shape`` (rows, cols), hop latency in seconds, directed link
    bandwidth in bytes/s and optional switch-centre in/out bandwidth in bytes/s."""

    kind: str
    rows: int
    cols: int
    hop_latency_s: float
    link_bandwidth_bps: float
    centre_in_bps: float | None = None
    centre_out_bps: float | None = None

    @property
    def size(self) -> int:
        """Number of nodes (ports for a switch) of this level."""
        return self.rows * self.cols

    @property
    def centre_loop_bps(self) -> float:
        """Capacity of the switch-centre self-loop (in + out), 0 when not given (§1.1)."""
        return float((self.centre_in_bps or 0.0) + (self.centre_out_bps or 0.0))

    def rc(self, node: int) -> tuple[int, int]:
        """(row, col) of a node; the centre maps like Python's divmod (``(-1, cols-1)``)."""
        return divmod(node, self.cols)

    @cached_property
    def _ports(self) -> dict[str, tuple[int, ...]]:
        return _port_table(self)

    def ports(self, side: str) -> tuple[int, ...]:
        """Port nodes of ``side`` (e.g. ``"left_in"``), §3.2."""
        return self._ports[side]

    def hop_direction(self, u: int, v: int) -> str:
        """Direction (up/down/left/right) of the hop ``u → v`` as the router labels it (§3.2)."""
        ur, uc = self.rc(u)
        vr, vc = self.rc(v)
        if ur != vr:
            if self.kind in _ROW_RING:
                return "down" if vr == (ur - 1) % self.rows else "up"
            return "up" if vr > ur else "down"
        if self.kind in _COL_RING:
            return "left" if vc == (uc - 1) % self.cols else "right"
        return "right" if vc > uc else "left"

    def route(self, s: int, d: int) -> list[tuple[int, int]]:
        """Intra-level hops from node ``s`` to node ``d`` (§3.1); memoised, do not mutate."""
        key = (s, d)
        hit = self._route_memo.get(key)
        if hit is None:
            hit = self._route_memo[key] = self._route(s, d)
        return hit

    @cached_property
    def _route_memo(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        return {}

    def _route(self, s: int, d: int) -> list[tuple[int, int]]:
        if s == d:
            return []
        if self.kind in ("switch", "all_to_all"):
            if s == CENTRE:
                return [(CENTRE, d)]
            if d == CENTRE:
                return [(s, CENTRE)]
            return [(s, CENTRE), (CENTRE, d)] if self.kind == "switch" else [(s, d)]
        sr, sc = self.rc(s)
        dr, dc = self.rc(d)
        hops: list[tuple[int, int]] = []
        if self.kind in GRID_KINDS:
            for r0, r1 in _walk(sr, dr, self.rows, self.kind in _ROW_RING):
                hops.append((r0 * self.cols + sc, r1 * self.cols + sc))
        for c0, c1 in _walk(sc, dc, self.cols, self.kind in _COL_RING):
            hops.append((dr * self.cols + c0, dr * self.cols + c1))
        return hops

    @cached_property
    def neighbours(self) -> frozenset[tuple[int, int]]:
        """Directed physical links ``(u, v)`` between nodes of this level (empty for a switch)."""
        if self.kind == "switch":
            return frozenset()
        n = self.size
        if self.kind == "all_to_all":
            return frozenset((u, v) for u in range(n) for v in range(n) if u != v)
        out: set[tuple[int, int]] = set()
        row_ring = self.kind in _ROW_RING
        col_ring = self.kind in _COL_RING
        m, c = self.rows, self.cols
        for r in range(m):
            for k in range(c):
                u = r * c + k
                for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    rr, kk = r + dr, k + dc
                    if dr and (row_ring or self.kind not in GRID_KINDS):
                        rr %= m
                    if dc and col_ring:
                        kk %= c
                    if 0 <= rr < m and 0 <= kk < c and (rr, kk) != (r, k):
                        out.add((u, rr * c + kk))
        return frozenset(out)


def _walk(a: int, b: int, n: int, wraps: bool) -> list[tuple[int, int]]:
    """Steps along one dimension from a to b: shorter way on a ring (tie → +1), else monotone."""
    if a == b:
        return []
    if wraps:
        fwd, back = (b - a) % n, (a - b) % n
        if fwd <= back:
            return [((a + k) % n, (a + k + 1) % n) for k in range(fwd)]
        return [((a - k) % n, (a - k - 1) % n) for k in range(back)]
    step = 1 if b > a else -1
    return [(x, x + step) for x in range(a, b, step)]


def _halves(dim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(entry half, exit half) of one grid dimension: [dim/2, dim) and [0, dim/2), or {0}."""
    if dim == 1:
        return (0,), (0,)
    return tuple(range(dim // 2, dim)), tuple(range(dim // 2))


def _port_table(level: Level) -> dict[str, tuple[int, ...]]:
    m, n = level.rows, level.cols
    if level.kind == "switch":
        return {side: (CENTRE,) for side in SIDES}
    if level.kind == "all_to_all":
        groups = [tuple(i for i in range(m * n) if i % 4 == g) for g in range(4)]
        names = ("left", "right", "up", "down")
        return {f"{names[g]}_{io}": groups[g] for g in range(4) for io in ("in", "out")}
    if level.kind in ("ring", "chain"):
        lo, hi = tuple(range(n // 2)), tuple(range(n // 2, n))
        return {
            "left_in": (0,),
            "left_out": (0,),
            "right_in": (n - 1,),
            "right_out": (n - 1,),
            "up_out": lo,
            "up_in": hi,
            "down_out": hi,
            "down_in": lo,
        }
    rows_in, rows_out = _halves(m)
    cols_in, cols_out = _halves(n)
    return {
        "left_in": tuple(r * n for r in rows_in),
        "left_out": tuple(r * n for r in rows_out),
        "right_in": tuple(r * n + n - 1 for r in rows_out),
        "right_out": tuple(r * n + n - 1 for r in rows_in),
        "up_in": tuple((m - 1) * n + c for c in cols_in),
        "up_out": tuple((m - 1) * n + c for c in cols_out),
        "down_in": tuple(cols_out),
        "down_out": tuple(cols_in),
    }
