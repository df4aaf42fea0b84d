"""Error bars on the planner page (issue 30 item 4): a point's interval and robustness mark, and
the recommendation's, as ``plena-opt search`` prints them (``api.robust``).

``annotate_planner`` marks a finished search's front (``api.robust.annotate_front``: the measured
group of exactly (engine, GPU, concurrency band) of each plan, else no interval and the reason).
``point_intervals`` gives a front plan's interval in the page's units: ``ttft_ms_low/high``,
``tpot_ms_low/high`` (ms), ``tps_per_gpu_low/high`` (tokens/s per GPU), ``usd_per_mtok_low/high``
(USD per million output tokens), the group, level and note, and ``robust`` with its reason and
basis. ``recommendation_doc`` is the recommendation's ``to_dict()`` with its front plan's
``*_low``/``*_high`` in ``figures`` (``api.robust.recommendation_interval``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.search.result import FrontEntry, SearchResult

# page field -> (front entry field, scale to the page's unit)
_SCALED = {
    "ttft_ms": ("ttft_seconds", 1e3),
    "tpot_ms": ("tpot_seconds", 1e3),
    "tps_per_gpu": ("tps_per_device", 1.0),
    "usd_per_mtok": ("usd_per_million_output_tokens", 1.0),
}


def annotate_planner(result: SearchResult, request: Any, problem: Any) -> None:
    """Intervals and robustness marks on ``result``'s front (a problem the derating cannot
    scale leaves each plan's ``robust`` None with the reason, as the CLI does)."""
    from plena_opt.api.robust import annotate_front

    if not result.front:
        return
    try:
        annotate_front(result, request, problem)
    except PlenaInputError as exc:  # never lose the answer over its error bars
        for e in result.front:
            e.interval_note = e.interval_note or f"no interval: {exc.rule}"


def point_intervals(e: FrontEntry) -> dict[str, Any]:
    """``e``'s interval in the page's units (None where it has none; ``interval_note`` why)."""
    out: dict[str, Any] = {}
    for name, (src, scale) in _SCALED.items():
        for end in ("low", "high"):
            v = getattr(e, f"{src}_{end}", None)
            out[f"{name}_{end}"] = None if v is None else v * scale
    out.update(
        interval_group=e.interval_group,
        interval_level=e.interval_level,
        interval_note=e.interval_note,
        robust=e.robust,
        robust_reason=e.robust_reason,
        robust_basis=e.robust_basis,
    )
    return out


def recommendation_doc(rec: Any, result: SearchResult) -> dict[str, Any] | None:
    """``rec.to_dict()`` with its front plan's interval in ``figures`` (None: no recommendation)."""
    from plena_opt.api.robust import recommendation_interval

    if rec is None:
        return None
    return recommendation_interval(rec.to_dict(), result)


def goodput_doc(result: SearchResult, request: Any) -> dict[str, Any] | None:
    """Goodput's interval (``api.robust.goodput_interval``: best tokens/s per GPU meeting the SLA
    at the pessimistic and the optimistic end) when some front plan has an interval, else None."""
    from plena_opt.api.robust import goodput_interval

    if not any(e.interval_group is not None for e in result.front):
        return None
    return goodput_interval(result, request)
