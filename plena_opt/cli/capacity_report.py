"""The text of ``plena-opt capacity``: the candidates, the answer and its intervals."""

from __future__ import annotations

from typing import Any

MAX_INTERVAL_LINES = 48  # intervals listed one per line (a longer curve gets the summary only)


def _money(v: float | None) -> str:
    return "-" if v is None else f"${v:,.0f}"


def _row(c: Any, chosen: Any) -> str:
    if not c.priced:
        why = f"skipped: {c.skipped}" if c.skipped else f"infeasible: {c.infeasible}"
        return f"{c.name:<16} {'':>13} {'':>9} {'':>9} {'':>8} {'':>11} {'':>16}  {why}"
    mus = getattr(c, "max_rate_per_replica", None)
    reps = c.total_replicas()
    react = f"{_money(c.reactive_usd_per_day)} {100 * c.reactive_slo_attainment:.1f}%"
    mark = "<- cheapest" if c is chosen else ""
    lo, hi = getattr(c, "usd_per_day_low", None), getattr(c, "usd_per_day_high", None)
    if lo is not None and hi is not None:
        mark = f"[{_money(lo)}-{_money(hi)}/day at the error bars] {mark}".rstrip()
    return (
        f"{c.name:<16} {f'{min(mus):.2f}' if mus else '-':>13} {f'{min(reps)}-{max(reps)}':>9} "
        f"{c.gpu_hours_per_day:>9.0f} {_money(c.usd_per_day):>8} "
        f"{_money(c.fixed_fleet_usd_per_day):>11} {react:>16}  {mark}"
    )


def _gpus(g: dict[str, int]) -> str:
    return " + ".join(f"{n} {t}" for t, n in g.items() if n) or "0"


def _replicas(r: int | dict[str, int]) -> str:
    if isinstance(r, int):
        return str(r)
    return " + ".join(f"{n}x {name}" for name, n in r.items()) or "0"


def render_text(plan: Any) -> str:
    """The candidates table, the cheapest deployment and its replicas per interval."""
    req = plan.request
    sla = " and ".join(
        x
        for x in (
            f"TTFT <= {req.max_ttft_ms:g} ms" if req.max_ttft_ms else "",
            f"TPOT <= {req.max_tpot_ms:g} ms" if req.max_tpot_ms else "",
        )
        if x
    )
    lines = [
        f"{req.model}: {len(plan.intervals)} intervals over {plan.period_hours:g} h, "
        f"SLA {req.percentile} {sla}, min {req.min_replicas} replica(s), scale-up delay "
        f"{req.scale_up_delay_min:g} min",
        "",
        f"{'candidate':<16} {'req/s/replica':>13} {'replicas':>9} {'GPU-h/day':>9} "
        f"{'$/day':>8} {'fixed $/day':>11} {'reactive':>16}  note",
    ]
    lines += [_row(c, plan.chosen) for c in plan.candidates]
    if plan.mix is not None:
        lines.append(_row(plan.mix, plan.chosen))
    lines += [
        "(req/s/replica: the least over the intervals; fixed: a fleet for the peak all day; "
        "reactive: $/day and SLO attainment when replicas are ordered only as the load rises)",
        "",
    ]
    c = plan.chosen
    if c is None:
        lines.append("no candidate meets the SLA in every interval")
        return "\n".join(lines)
    saving = 1 - c.usd_per_day / c.fixed_fleet_usd_per_day
    gpus = [sum(c.gpus_at(i).values()) for i in range(len(plan.intervals))]
    lines.append(
        f"cheapest: {c.name}, {min(gpus)}-{max(gpus)} GPUs, {c.gpu_hours_per_day:.0f} GPU-h/day, "
        f"{_money(c.usd_per_day)}/day, SLO attainment {100 * c.slo_attainment:.0f}%; a fixed "
        f"fleet for the peak costs {_money(c.fixed_fleet_usd_per_day)}/day (scaling saves "
        f"{100 * saving:.0f}%)"
    )
    lines.append(_interval_line(c))
    if plan.mix is not None and plan.mix is not c and plan.mix.priced:
        lines.append(f"mixed: {_interval_line(plan.mix)}")
    if len(plan.intervals) <= MAX_INTERVAL_LINES:
        ends = c.replicas_low is not None and c.replicas_high is not None
        head = "  [replicas at the error bars: low .. high]" if ends else ""
        lines.append(f"{'hour':>6} {'req/s':>8}  replicas -> GPUs{head}")
        for i, iv in enumerate(plan.intervals):
            bars = (
                f"  [{_replicas(c.replicas_low[i])} .. {_replicas(c.replicas_high[i])}]"
                if ends
                else ""
            )
            lines.append(
                f"{iv['start_hour']:>6g} {iv['requests_per_second']:>8.2f}  "
                f"{_replicas(c.replicas_at(i))} -> {_gpus(c.gpus_at(i))}{bars}"
            )
    return "\n".join(lines)


def _interval_line(c: Any) -> str:
    """The chosen deployment's $/day and replicas across the measured error's interval."""
    high = c.usd_per_day_high
    group = c.interval_group
    if group is None or high is None:
        note = c.interval_note or "no interval"
        lo = c.usd_per_day_low
        extra = f"; $/day at the low end {_money(lo)}" if lo is not None else ""
        return f"error bars: {note}{extra}"
    reps = [r if isinstance(r, int) else sum(r.values()) for r in c.replicas_high]
    left = getattr(c, "interval_left_out", None)
    out = f"; without {', '.join(left)} (no measured group)" if left else ""
    return (
        f"error bars (90 % interval of measured error, group {group}): "
        f"{_money(c.usd_per_day_low)}-{_money(high)}/day; at the worst end "
        f"{min(reps)}-{max(reps)} replicas, {c.gpu_hours_per_day_high:.0f} GPU-h/day{out}"
    )
