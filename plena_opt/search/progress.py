"""``Progress``: what a running search reports (``run_search(progress=...)``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The least time between two progress reports (s), except the forced ones.
PROGRESS_INTERVAL_S = 0.25


@dataclass(frozen=True)
class Progress:
    """A progress report: ``done`` of ``total`` evaluations (None: unknown) in ``stage``.

    ``hypervolume`` is on a normalisation fixed at the first report (it never goes down).
    """

    stage: str
    done: int
    total: int | None
    trials_per_s: float
    front_size: int
    hypervolume: float | None


ProgressFn = Callable[[Progress], None]
