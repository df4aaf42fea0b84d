"""Pareto non-dominance on minimisation vectors (numpy, O(n²) comparisons vectorised per point)."""

from __future__ import annotations

import numpy as np


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``points`` (n×k, every column minimised).

    Row ``a`` dominates ``b`` when ``a ≤ b`` everywhere and ``a < b`` somewhere; identical rows do
    not dominate each other, so duplicates are all kept. Rows containing NaN are never on the front.
    """
    pts = np.asarray(points, dtype=float)
    n = pts.shape[0]
    mask = ~np.isnan(pts).any(axis=1) if n else np.zeros(0, dtype=bool)
    order = np.argsort(pts[:, 0], kind="stable") if n else np.zeros(0, dtype=int)
    for i in order:
        if not mask[i]:
            continue
        cand = pts[mask]
        dominated = np.all(cand <= pts[i], axis=1) & np.any(cand < pts[i], axis=1)
        if dominated.any():
            mask[i] = False
    return mask
