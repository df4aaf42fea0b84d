"""Text of a search's error bars and robust front (``api.robust``), after the front table."""

from __future__ import annotations

from typing import Any


def _span(lo: float | None, hi: float | None, scale: float, fmt: str) -> str:
    if lo is None or hi is None:
        return "-"
    return f"{lo * scale:{fmt}}-{hi * scale:{fmt}}"


def render_intervals(result: Any, derated: bool = False) -> str:
    """One line per front plan: interval of TTFT/TPOT (ms), tokens/s/device and $/Mtok, and
    robust yes/no/- with the reason; the no-interval reason once (``derated``: a ``--robust``
    search, whose figures are at the scaled peaks). Empty when not annotated."""
    front = [e for e in result.front if e.robust_basis is not None]
    if not front:
        return ""
    level = next((e.interval_level for e in front if e.interval_level), None)
    head = f"{100 * level:g} % interval from measured error" if level else "error bars"
    lines = ["", f"{head}; robust = SLA holds at {front[0].robust_basis}:"]
    if derated:
        lines.append("  --robust: the front's figures are at the chip's peaks × 0.9, its SLA "
                     "judged at the interval's pessimistic end")  # fmt: skip
    notes = {e.interval_note for e in front if e.interval_note}
    lines += [f"  {n}" for n in sorted(notes)]
    lines.append(
        f"  {'plan':<28} {'TTFT ms':>15} {'TPOT ms':>15} {'TPS/dev':>15} {'$/Mtok':>13}  robust"
    )
    for e in front:
        mark = "-" if e.robust is None else "yes" if e.robust else "no"
        why = f" ({e.robust_reason})" if e.robust_reason else ""
        lines.append(
            f"  {e.label:<28} {_span(e.ttft_seconds_low, e.ttft_seconds_high, 1e3, '.1f'):>15} "
            f"{_span(e.tpot_seconds_low, e.tpot_seconds_high, 1e3, '.2f'):>15} "
            f"{_span(e.tps_per_device_low, e.tps_per_device_high, 1, '.1f'):>15} "
            f"{_span(e.usd_per_million_output_tokens_low, e.usd_per_million_output_tokens_high, 1, '.3g'):>13}"  # noqa: E501
            f"  {mark}{why}"
        )
    return "\n".join(lines)
