"""Every check of a stair-compressed decode grid side by side (``CheckBlocks``), so that they
are judged with one set of array operations (``checks.failed_pieces``, ``grid_checks``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from plena_opt.estimate.decode.stairs import Check, Piece, _compress


@dataclass(frozen=True, eq=False)
class CheckBlocks:
    """Every check of a grid side by side, so that they are judged with one set of array
    operations: the block-diagonal pseudo-inverse and basis, each basis function's envelope
    rows, and where each check's points and basis functions start."""

    cols: np.ndarray  # grid point indices of every check's points, check after check
    col_starts: np.ndarray  # where each check's points start in ``cols``
    k_starts: np.ndarray  # where each check's basis functions start
    pinv: np.ndarray  # [K, P] block-diagonal
    matrix: np.ndarray  # [P, K] block-diagonal
    lo: np.ndarray  # [K] value at u0
    slope: np.ndarray  # [K] slope per kv
    is_ceil: np.ndarray  # [K] 1 for a stair excess
    mids: np.ndarray  # per check: the grid index of its middle point
    u0: np.ndarray
    u1: np.ndarray

    @classmethod
    def of(cls, checks: tuple[Check, ...]) -> CheckBlocks:
        sizes = [c.span.stop - c.span.start for c in checks]
        ks = [len(c.stairs) for c in checks]
        P, K = sum(sizes), sum(ks)
        pinv, matrix = np.zeros((K, P)), np.zeros((P, K))
        lo, slope, is_ceil = np.zeros(K), np.zeros(K), np.zeros(K)
        p = k = 0
        for c, n, m in zip(checks, sizes, ks, strict=True):
            pinv[k : k + m, p : p + n] = c.pinv
            matrix[p : p + n, k : k + m] = c.matrix
            lo[k : k + m], slope[k : k + m], is_ceil[k : k + m] = c.envelope_rows
            p, k = p + n, k + m
        return cls(
            np.concatenate([np.arange(c.span.start, c.span.stop) for c in checks]),
            np.cumsum([0, *sizes[:-1]]),
            np.cumsum([0, *ks[:-1]]),
            pinv,
            matrix,
            lo,
            slope,
            is_ceil,
            np.array([c.span.start + n // 2 for c, n in zip(checks, sizes, strict=True)]),
            np.array([c.u0 for c in checks]),
            np.array([c.u1 for c in checks]),
        )

    @cached_property
    def row_test(self) -> tuple[np.ndarray, tuple[tuple[int, int, int, int, float], ...]]:
        """``grid_checks.rows_hold``' operator [K + P, P] (point values → every check's
        basis coefficients, then the fit residual at each point) and, per check, where its
        coefficients and points start and end, and its slope term's factor ``(u1−1−u0)/(u1−u0)``."""
        op = np.vstack([self.pinv, self.matrix @ self.pinv - np.eye(len(self.cols))])
        k, p = len(self.lo), len(self.cols)
        ks, ps = self.k_starts.tolist(), self.col_starts.tolist()
        u0, u1 = self.u0.tolist(), self.u1.tolist()
        parts = tuple(
            (k0, k1, k + p0, k + p1, (b - 1 - a) / (b - a))
            for k0, k1, p0, p1, a, b in zip(ks, [*ks[1:], k], ps, [*ps[1:], p], u0, u1, strict=True)
        )
        return op, parts

    @cached_property
    def rounding(self) -> float:
        """A bound, relative to a quantity's largest |value|, on how far two float evaluations
        of its coefficients, residuals or envelopes (``_zones`` and ``grid_checks``) can
        differ: 4·(K + 1)·P·ε times the operator's largest absolute row sum, at least 1e-13."""
        op = self.row_test[0]
        gain = float(np.abs(op).sum(axis=1).max())
        return max(1e-13, 4.0 * (len(self.lo) + 1) * len(self.cols) * 2.0**-52 * gain)


@lru_cache(maxsize=1024)
def one_check_blocks(piece: Piece, cp: int, start: int) -> CheckBlocks:
    """The ``CheckBlocks`` of a grid whose only check is compressed ``piece`` with its points
    from grid index ``start`` (a function of these alone: ``stairs._compress``)."""
    comp = _compress(piece, cp)
    assert comp is not None  # the grid holds a check of it
    kv, _, mat, pinv = comp
    span = slice(start, start + len(kv))
    return CheckBlocks.of((Check(0, span, mat, pinv, piece.stairs, piece.u0, piece.u1),))
