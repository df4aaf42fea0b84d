"""Pareto front of many points (millions) in chunks: each chunk is first filtered against the
front so far, then merged (same dominance rule as ``pareto.pareto_mask``)."""

from __future__ import annotations

import numpy as np

from plena_opt.search.fronts.pareto import pareto_mask

CHUNK = 2048


def _dominated_by(front: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Rows of ``pts`` dominated by some row of ``front`` (both minimised)."""
    out = np.zeros(len(pts), dtype=bool)
    for i in range(0, len(front), 256):
        f = front[i : i + 256, None, :]
        le = np.all(f <= pts[None, :, :], axis=2)
        lt = np.any(f < pts[None, :, :], axis=2)
        out |= np.any(le & lt, axis=0)
    return out


def front_indices(points: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the non-dominated rows of ``points`` (n×k, minimised; NaN rows
    never on the front; identical rows all kept)."""
    pts = np.asarray(points, dtype=float)
    if pts.shape[0] == 0:
        return np.zeros(0, dtype=int)
    ok = np.flatnonzero(~np.isnan(pts).any(axis=1))
    span = np.ptp(pts[ok], axis=0) if len(ok) else np.ones(pts.shape[1])
    span = np.where(span > 0, span, 1.0)
    score = ((pts[ok] - pts[ok].min(axis=0)) / span).sum(axis=1)
    order = ok[np.argsort(score, kind="stable")]  # strong points first: most are cut early
    front = np.zeros(0, dtype=int)
    for i in range(0, len(order), CHUNK):
        chunk = order[i : i + CHUNK]
        if len(front):
            chunk = chunk[~_dominated_by(pts[front], pts[chunk])]
        if not len(chunk):
            continue
        merged = np.concatenate([front, chunk])
        front = merged[pareto_mask(pts[merged])]
    return np.sort(front)
