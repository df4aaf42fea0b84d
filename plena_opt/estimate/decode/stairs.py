"""The stairs a decode step's cost is built from, the compressed pieces of a decode and their
exact sums (the shared ground of ``estimate.decode``; see ``steps`` for the whole method).

Decode step ``j`` (0 ≤ j < n) attends to ``kv_j = ceil((S_in + j) / cp)`` tokens. A step's cost
depends on kv only through a few *stairs* ``ceil((a·kv + c) / b)`` (or affine ``a·kv + c``);
``_compress`` prices a range of KV lengths at ``2·k`` points whose weights give the exact sum of
every affine combination of its ``k`` stairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from itertools import count
from typing import Any, NamedTuple

import numpy as np
from deepstack.unique import sorted_unique

FIT_TOL = 1e-9  # refuse a range whose point values do not fit its stairs (relative)
SIGN_TOL = 1e-12  # a sign is fixed when the envelopes clear zero by this (relative to scale)
_TOKENS = count(1)  # ``GridMemo.token`` ids
# Where a compressed range's points lie (fractions of it): both ends, then irregular spacing so
# that no stair is affine in kv at the points by accident (that would make the fit ambiguous).
SPREAD = np.array(
    [0.0, 1.0, 0.5, 0.2134, 0.7741, 0.3619, 0.6052, 0.1087, 0.8893, 0.4471, 0.9378, 0.0531]
)


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} floor((a·i + b) / m) for integers, m > 0 (the floor-sum recursion)."""
    ans = 0
    while n > 0:
        q, a = divmod(a, m)
        ans += q * (n * (n - 1) // 2)
        q, b = divmod(b, m)
        ans += q * n
        y = a * n + b
        if y < m:
            break
        n, b, m, a = y // m, y % m, a, m
    return ans


@dataclass(frozen=True)
class Stair:
    """``ceil((a·kv + c) / b)`` for ``b > 0``, the affine ``a·kv + c`` for ``b == 0``."""

    a: int
    c: int
    b: int = 0

    def at(self, kv: int) -> int:
        return self.a * kv + self.c if self.b == 0 else -((-(self.a * kv + self.c)) // self.b)

    def total(self, u0: int, u1: int) -> int:
        """Σ over kv in [u0, u1)."""
        n = u1 - u0
        if self.b == 0:
            return self.a * (u0 + u1 - 1) * n // 2 + self.c * n
        return floor_sum(n, self.b, self.a, self.a * u0 + self.c + self.b - 1)


ONE, KV = Stair(0, 1), Stair(1, 0)


@dataclass(frozen=True)
class StairSpec:
    """What the decode's stairs are made of: MLEN, the KV read's ``β / Q`` (None without a
    transfer quantum), the chunk C of chunked layers, the sliding window W; ``every_step``: a
    cost model whose steps are not built from these stairs (GPU kernels) is priced at every
    KV length, with exact integer weights."""

    mlen: int
    read_over_quantum: Fraction | None
    chunk: int | None
    window: int | None
    every_step: bool = False  # price every KV length (costs not made of these stairs: GPUs)

    def stairs(self, chunk_start: int | None) -> tuple[Stair, ...]:
        """The stairs of a range (``chunk_start``: first kv of its chunk, if chunked)."""
        out = [ONE, KV, Stair(1, 0, self.mlen)]
        f = self.read_over_quantum
        if f is not None:
            out.append(Stair(f.numerator, 0, f.denominator))
        if chunk_start is not None:
            off = 1 - chunk_start  # attended = kv − start + 1
            out.append(Stair(1, off, self.mlen))
            if f is not None:
                out.append(Stair(f.numerator, f.numerator * off, f.denominator))
        return tuple(out)


@dataclass(frozen=True)
class Piece:
    """KV lengths ``[u0, u1)``, each standing for ``cp`` steps; compressed with ``stairs``."""

    u0: int
    u1: int
    stairs: tuple[Stair, ...] = ()

    @property
    def compressed(self) -> bool:
        return bool(self.stairs)


@dataclass(frozen=True, eq=False)
class Check:
    """Where a compressed piece's points lie in the grid, and their ``basis`` matrix [points, k]."""

    piece: int
    span: slice
    matrix: np.ndarray
    pinv: np.ndarray  # [k, points]: point values → basis coefficients (full column rank)
    stairs: tuple[Stair, ...]
    u0: int
    u1: int

    @cached_property
    def envelope_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per basis function: value at u0, slope per kv, and 1 for a stair excess (in [0, 1))."""
        k = len(self.stairs)
        lo = np.zeros(k)
        lo[0] = 1.0
        slope = np.zeros(k)
        slope[1] = 1.0 / (self.u1 - self.u0)
        excess = np.ones(k)
        excess[:2] = 0.0
        return lo, slope, excess


class LayerFacts(NamedTuple):
    """What a plan's fast checks need of one priced layer on a grid (``plan_checks``,
    ``grid_checks``): whether its roofline sign holds on every piece, the lowest and highest
    envelope of its seconds, and its largest fit residual (s)."""

    roof: bool
    lo: float
    hi: float
    resid: float


class GridMemo:
    """What both grid kinds (``DecodeGrid``, ``runs.RunGrid``) keep per grid object."""

    @cached_property
    def token(self) -> int:
        """A small id of this grid object (a cheap cache key; one sequence for both kinds, and
        equal grids of one context are one object, as ``EstimateContext`` memoises them)."""
        return next(_TOKENS)

    @cached_property
    def layer_facts(self) -> dict[int, tuple[Any, LayerFacts]]:
        """Memo of ``plan_checks`` / ``grid_checks``: id of a priced layer -> (the layer, kept
        alive so that ids stay unique; its ``LayerFacts`` at these points)."""
        return {}


def _kv_of(s: int, cp: int, j: int) -> int:
    return -(-(s + j) // cp)


def _weights_of(s: int, cp: int, n: int, v: int, j_lo: int) -> int:
    """Steps j in [j_lo, n) with ceil((s + j) / cp) == v."""
    lo = max((v - 1) * cp + 1 - s, j_lo)
    hi = min(v * cp - s, n - 1)
    return max(0, hi - lo + 1)


def basis(p: Piece, u: int) -> list[float]:
    """A compressed piece's basis at kv ``u``: 1, ``(u − u0) / (u1 − u0)``, and each ceil stair's
    excess over its affine lower envelope (in [0, 1)). Well conditioned at any kv, and every
    function affine in the stairs is affine in it."""
    out = [1.0, (u - p.u0) / (p.u1 - p.u0)]
    for st in p.stairs[2:]:
        out.append(((-(st.a * u + st.c)) % st.b) / st.b)
    return out


def basis_sums(p: Piece) -> list[float]:
    """Exact Σ over kv in [u0, u1) of each basis function (rounded to float once)."""
    n = p.u1 - p.u0
    out = [float(n), (n - 1) / 2]
    for st in p.stairs[2:]:
        lower = Fraction(st.a * KV.total(p.u0, p.u1) + st.c * n, st.b)
        out.append(float(st.total(p.u0, p.u1) - lower))
    return out


@lru_cache(maxsize=4096)
def _compress(p: Piece, cp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Points, weights, basis matrix and its pseudo-inverse of a compressed piece (None:
    enumerate it instead). Cached: refined grids share their unchanged pieces."""
    k = len(p.stairs)
    pts = list(np.round(p.u0 + (p.u1 - 1 - p.u0) * SPREAD[: 2 * k]).astype(np.int64))
    for st in p.stairs:  # both sides of a step of each unit-slope stair (tiles of nearby offsets)
        if st.a == 1 and st.b > 1:
            for x in (p.u0 + 1, (p.u0 + p.u1) // 2):
                j = x + (1 - st.c - x) % st.b
                pts += [j - 1, j] if j < p.u1 else []
    pts = sorted_unique(np.array(pts, dtype=np.int64))
    mat = np.array([basis(p, int(u)) for u in pts])
    u, sv, vt = np.linalg.svd(mat, full_matrices=False)
    if sv[-1] <= 1e-9 * sv[0]:
        return None  # a stair is constant (or repeats another) on the range
    pinv = (vt.T / sv) @ u.T  # [k, points]
    target = cp * np.array(basis_sums(p))
    w = pinv.T @ target  # the least-norm weights with matᵀ·w = target, refined once
    w += pinv.T @ (target - mat.T @ w)
    if np.any(np.abs(mat.T @ w - target) > 1e-12 * (np.abs(mat.T) @ np.abs(w))):
        return None
    for arr in (w, mat, pinv):
        arr.flags.writeable = False
    return pts.astype(float), w, mat, pinv
