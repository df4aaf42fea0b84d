"""How good a found front is against the exact one: hypervolume ratio, front recall, IGD.

* hypervolume ratio — hypervolume of the found front over the exact front's, both on objectives
  normalised by the exact front's ideal and nadir points (reference point 1.1 per axis);
* front recall — the share of the exact front's plans (by plan and batch size) that were found;
* IGD (inverted generational distance) — the mean, over the exact front's points, of the
  Euclidean distance to the nearest found point, in the same normalised objective space
  (0 when every exact point was found; smaller is better).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plena_opt.search.fronts.hypervolume import Normaliser


@dataclass(frozen=True)
class FrontQuality:
    """``hv_ratio``, ``front_recall`` (0–1) and ``igd`` (normalised units) of a found front."""

    hv_ratio: float | None
    front_recall: float
    igd: float | None


def front_quality(
    found: np.ndarray, found_keys: list[str], exact: np.ndarray, exact_keys: list[str]
) -> FrontQuality:
    """Quality of the ``found`` front (n×k minimisation points) against ``exact`` (m×k)."""
    exact = np.asarray(exact, dtype=float).reshape(len(exact_keys), -1)
    norm = Normaliser.from_points(exact)
    recall = len(set(found_keys) & set(exact_keys)) / len(exact_keys) if exact_keys else 1.0
    if not found_keys:
        return FrontQuality(0.0 if exact_keys else None, recall, None)
    f = norm(np.asarray(found, dtype=float).reshape(len(found_keys), -1))
    e = norm(exact)
    exact_hv = norm.hypervolume(exact)
    ratio = norm.hypervolume(np.asarray(found)) / exact_hv if exact_hv > 0 else None
    dist = np.sqrt(((e[:, None, :] - f[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
    return FrontQuality(ratio, recall, float(dist.mean()))


class LiveHypervolume:
    """Hypervolume during a search on a normalisation fixed at the first report, so it only grows.

    The ideal/nadir box is taken from the feasible points scored when first asked (later points
    outside it still count: a point better than the ideal adds volume, one beyond the reference
    point adds none); adding points to a set never lowers its hypervolume in fixed coordinates.
    """

    def __init__(self) -> None:
        self.norm: Normaliser | None = None

    def __call__(self, points: np.ndarray) -> float | None:
        pts = np.asarray(points, dtype=float)
        if pts.size == 0:
            return None
        if self.norm is None:
            self.norm = Normaliser.from_points(pts)
        return self.norm.hypervolume(pts)
