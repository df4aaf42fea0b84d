"""Text of a search's error bars and robust front (``api.robust``), after the front table."""

from __future__ import annotations

import argparse
from typing import Any

from plena_opt.errors import PlenaInputError


def _span(lo: float | None, hi: float | None, scale: float, fmt: str) -> str:
    if lo is None or hi is None:
        return "-"
    return f"{lo * scale:{fmt}}-{hi * scale:{fmt}}"


def render_intervals(
    result: Any, derated: bool = False, goodput: dict[str, Any] | None = None
) -> str:
    """One line per front plan: interval of TTFT/TPOT (ms), tokens/s/device and $/Mtok, and
    robust yes/no/- with the reason; the no-interval reason once (``derated``: a ``--robust``
    search, whose figures are at the scaled peaks), then goodput's interval (``goodput``:
    ``api.robust.goodput_interval``). Empty when not annotated."""
    front = [e for e in result.front if e.robust_basis is not None]
    if not front:
        return ""
    notes = sorted({e.interval_note for e in front if e.interval_note})
    if all(e.robust is None and e.interval_group is None for e in front):  # nothing per plan
        unjudged = sorted({e.robust_reason for e in front if e.robust_reason})
        return "\n".join(["", "error bars and robustness:", *(f"  {n}" for n in notes),
                          *(f"  robust: {r}" for r in unjudged)])  # fmt: skip
    level = next((e.interval_level for e in front if e.interval_level), None)
    head = f"{100 * level:g} % interval from measured error" if level else "error bars"
    lines = ["", f"{head}; robust = SLA holds at {front[0].robust_basis}:"]
    if derated:
        lines.append("  --robust: the front's figures are at the chip's peaks × 0.9, its SLA "
                     "judged at the interval's pessimistic end")  # fmt: skip
    lines += [f"  {n}" for n in notes]
    lines.append(
        f"  {'plan':<28} {'TTFT ms':>15} {'TPOT ms':>15} {'TPS/dev':>15} {'$/Mtok':>13}  "
        "robust  (measured group)"
    )
    for e in front:
        mark = "-" if e.robust is None else "yes" if e.robust else "no"
        why = f" ({e.robust_reason})" if e.robust_reason else ""
        lines.append(
            f"  {e.label:<28} {_span(e.ttft_seconds_low, e.ttft_seconds_high, 1e3, '.1f'):>15} "
            f"{_span(e.tpot_seconds_low, e.tpot_seconds_high, 1e3, '.2f'):>15} "
            f"{_span(e.tps_per_device_low, e.tps_per_device_high, 1, '.1f'):>15} "
            f"{_span(e.usd_per_million_output_tokens_low, e.usd_per_million_output_tokens_high, 1, '.3g'):>13}"  # noqa: E501
            f"  {mark}{why}{f'  ({e.interval_group})' if e.interval_group else ''}"
        )
    if goodput and goodput.get("interval_group"):
        lo, hi = goodput["goodput_tps_per_device_low"], goodput["goodput_tps_per_device_high"]
        lines.append(
            f"  goodput {'none' if lo is None else f'{lo:.1f}'} (pessimistic end) to "
            f"{'none' if hi is None else f'{hi:.1f}'} tokens/s/device (optimistic end)"
        )
    return "\n".join(lines)


def api_robust() -> Any:
    """``plena_opt.api.robust`` (error bars and the robust front), imported when used."""
    from plena_opt.api import robust

    return robust


def check_robust(args: argparse.Namespace) -> None:
    """``--robust`` runs a local search of one evaluator (bad combinations exit 2)."""
    if not getattr(args, "robust", False):
        return
    for flag, name in (("server", "--server"), ("workers", "--workers"),
                       ("design_space", "--design-space")):  # fmt: skip
        if getattr(args, flag, None) is not None:
            raise PlenaInputError(
                "robust", f"--robust needs a local search of one evaluator; drop {name}"
            )


def robust_inputs(args: argparse.Namespace, request: Any, problem: Any) -> tuple[Any, Any]:
    """(request, problem) to search: as given, or with ``--robust`` the worst case
    (``api.robust.robust_search``: SLA tightened by the interval, peaks × 0.9)."""
    if not getattr(args, "robust", False):
        return request, problem
    req, scaled, _ = api_robust().robust_search(request, problem)
    return req, scaled


def annotate_remote(args: argparse.Namespace, result: Any) -> None:
    """A server's front gets the error bars and robust marks here, priced on the problem the
    flags name (``api.robust.annotate_front``), as local mode prints them; a problem this
    machine cannot load leaves the front unmarked."""
    if not result.front:
        return
    from plena_opt.cli.search_args import request_from_args

    try:
        request = request_from_args(args)
        problem = request.problem.load()
    except (PlenaInputError, OSError):
        return
    api_robust().annotate_front(result, request, problem)
