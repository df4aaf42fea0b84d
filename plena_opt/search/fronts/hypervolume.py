"""Exact hypervolume of a minimisation front, on normalised objectives.

Optuna's hypervolume routines live in the private ``optuna._hypervolume`` package, so this module
holds a small exact implementation (recursive slicing over the last objective; 2-D by a sweep).
Objectives are normalised to [0, 1] between an ideal and a nadir point, and the reference point is
``REFERENCE = 1.1`` in every normalised coordinate (10 % beyond the nadir), so a front's extremes
still contribute volume.
"""

from __future__ import annotations

import numpy as np

from plena_opt.search.fronts.pareto import pareto_mask

REFERENCE = 1.1


def hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    """Volume dominated by ``points`` (n×k, minimised) and bounded by ``reference`` (k,)."""
    pts = np.asarray(points, dtype=float).reshape(-1, len(reference))
    ref = np.asarray(reference, dtype=float)
    pts = pts[np.all(pts < ref, axis=1)]
    if pts.shape[0] == 0:
        return 0.0
    pts = np.unique(pts[pareto_mask(pts)], axis=0)
    return _hv(pts, ref)


def _hv(pts: np.ndarray, ref: np.ndarray) -> float:
    k = pts.shape[1]
    if k == 1:
        return float(ref[0] - pts[:, 0].min())
    if k == 2:
        p = pts[np.argsort(pts[:, 0])]
        best_y = np.minimum.accumulate(p[:, 1])
        widths = np.diff(np.append(p[:, 0], ref[0]))
        return float(np.sum(widths * (ref[1] - best_y)))
    p = pts[np.argsort(pts[:, -1])]
    zs = np.append(p[:, -1], ref[-1])
    total = 0.0
    for i in range(p.shape[0]):
        depth = zs[i + 1] - zs[i]
        if depth <= 0:
            continue
        sub = p[: i + 1, :-1]
        sub = sub[pareto_mask(sub)]
        total += depth * _hv(sub, ref[:-1])
    return total


class Normaliser:
    """Maps minimisation vectors to [0, 1] using ``ideal`` (best) and ``nadir`` (worst) points."""

    def __init__(self, ideal: np.ndarray, nadir: np.ndarray) -> None:
        self.ideal = np.asarray(ideal, dtype=float)
        self.nadir = np.asarray(nadir, dtype=float)
        span = self.nadir - self.ideal
        self.span = np.where(span > 0, span, 1.0)

    @classmethod
    def from_points(cls, points: np.ndarray) -> Normaliser:
        pts = np.asarray(points, dtype=float)
        return cls(pts.min(axis=0), pts.max(axis=0))

    def __call__(self, points: np.ndarray) -> np.ndarray:
        return (np.asarray(points, dtype=float) - self.ideal) / self.span

    def hypervolume(self, points: np.ndarray) -> float:
        """Hypervolume of ``points`` after normalisation, reference ``REFERENCE`` per axis."""
        pts = np.asarray(points, dtype=float)
        if pts.size == 0:
            return 0.0
        return hypervolume(self(pts), np.full(pts.shape[1], REFERENCE))
