"""``Progress``: what a running search reports (``run_search(progress=...)``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The least time between two progress reports (s), except the forced ones.
PROGRESS_INTERVAL_S = 0.25
#: Front points a progress report carries (the front as it grows; a larger front is thinned to
#: this many, evenly along its TPS order, the ends kept).
PROGRESS_FRONT_POINTS = 64


@dataclass(frozen=True)
class Progress:
    """A progress report: ``done`` of ``total`` evaluations (None: unknown) in ``stage``.

    ``hypervolume`` is on a normalisation fixed at the first report (it never goes down).
    ``front``: the feasible front so far (``FrontEntry``), at most ``PROGRESS_FRONT_POINTS``.
    """

    stage: str
    done: int
    total: int | None
    trials_per_s: float
    front_size: int
    hypervolume: float | None
    front: tuple[Any, ...] = ()


def thin(items: list[Any], most: int = PROGRESS_FRONT_POINTS) -> list[Any]:
    """At most ``most`` of ``items``, evenly spaced, the first and last kept."""
    if len(items) <= most:
        return list(items)
    if most <= 1:
        return items[:most]
    step = (len(items) - 1) / (most - 1)
    return [items[round(i * step)] for i in range(most)]


ProgressFn = Callable[[Progress], None]
