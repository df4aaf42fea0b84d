"""Pareto non-dominance on minimisation vectors (numpy; each point checked against the front)."""

from __future__ import annotations

import numpy as np


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``points`` (n×k, every column minimised).

    Row ``a`` dominates ``b`` when ``a ≤ b`` everywhere and ``a < b`` somewhere; identical rows do
    not dominate each other, so duplicates are all kept. Rows containing NaN are never on the front.

    Rows are visited in lexicographic order, so a dominator always comes before the rows it
    dominates; a row is compared with the front found so far only (anything dominating it is
    itself dominated by a front row, or is one), which costs O(n · front) instead of O(n²).
    """
    pts = np.asarray(points, dtype=float)
    n = pts.shape[0]
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    pts = pts.reshape(n, -1)
    valid = ~np.isnan(pts).any(axis=1)
    order = np.lexsort(pts.T[::-1])
    front = np.empty_like(pts)
    size = 0
    for i in order:
        if not valid[i]:
            continue
        p = pts[i]
        f = front[:size]
        if size and np.any(np.all(f <= p, axis=1) & np.any(f < p, axis=1)):
            continue
        front[size] = p
        size += 1
        mask[i] = True
    return mask
