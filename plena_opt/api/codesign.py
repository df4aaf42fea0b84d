"""Use case: hardware × plan co-design over a design space
(``plena_opt.search.codesign.codesign``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plena_opt.search.codesign.codesign import CodesignResult
    from plena_opt.search.request import SearchRequest


def search_codesign(
    request: SearchRequest,
    design_space: str,
    *,
    sampler: str = "auto",
    trials: int | None = None,
    max_cost: float | None = None,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CodesignResult:
    """Search the hardware points of ``design_space`` (a file or shipped name) with the exact
    plan front on each; ``auto``: every point when they are at most ``trials``, else TPE."""
    from plena_opt.search.codesign.codesign import run_codesign
    from plena_opt.search.codesign.design_space import load_design_space

    space = load_design_space(design_space)
    if sampler == "auto":
        sampler = "exhaustive" if trials is None or space.size() <= trials else "tpe"
    if sampler not in ("exhaustive", "tpe"):
        from plena_opt.errors import PlenaInputError

        raise PlenaInputError(
            "sampler",
            f"--design-space searches hardware with exhaustive, tpe or auto, not {sampler}",
        )
    return run_codesign(request, space, sampler, trials, max_cost, seed, progress)
