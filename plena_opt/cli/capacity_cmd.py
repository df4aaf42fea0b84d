"""``plena-opt capacity``: replicas and dollars per day over a load curve (issue 30 item 2)."""

from __future__ import annotations

import argparse
from typing import Any

from plena_opt.cli.commands import help_of

DEFAULT_GPUS = "h100-sxm,h200-sxm,b200"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``capacity`` subcommand."""
    p = subparsers.add_parser(
        "capacity",
        help=help_of("capacity"),
        description="For each candidate deployment (GPU type x TP on one node), the replicas "
        "per interval of a load curve that meet the SLA at its percentile, GPU-hours and $ per "
        "day, SLO attainment and the saving against a fixed fleet sized for the peak; picks the "
        "cheapest deployment meeting the SLA all day.",
    )
    p.add_argument("--model", required=True, help="built-in model name (see 'plena-opt models')")
    p.add_argument(
        "--load",
        required=True,
        help="load curve CSV: start_hour,requests_per_second,"
        "input_tokens,output_tokens[,input_tokens_p90,output_tokens_p90]",
    )
    p.add_argument("--gpus", default=DEFAULT_GPUS, help=f"GPU types (default: {DEFAULT_GPUS})")
    p.add_argument("--max-ttft-ms", type=float, help="TTFT bound at the percentile (ms)")
    p.add_argument("--max-tpot-ms", type=float, help="TPOT bound at the percentile (ms)")
    p.add_argument(
        "--percentile",
        choices=("p50", "p90", "p99"),
        default="p90",
        help="percentile the SLA holds at (default: p90)",
    )
    p.add_argument(
        "--min-replicas", type=int, default=1, help="replicas kept at any load (default: 1)"
    )
    p.add_argument(
        "--scale-up-delay-min",
        type=float,
        default=10.0,
        help="minutes from ordering a replica to its serving (default: 10)",
    )
    p.add_argument("--prices", help="price file (default: the shipped prices.json)")
    p.add_argument(
        "--engine",
        choices=("vllm", "sglang", "trtllm"),
        default="vllm",
        help="serving engine whose default scheduler is modelled (default: vllm)",
    )
    p.add_argument("--precision", default="bf16", help="weights/compute format (default: bf16)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write replicas per interval per GPU type and cost per day to this PNG",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from plena_opt import jsonio
    from plena_opt.api.capacity import CapacityRequest, plan_capacity
    from plena_opt.errors import PlenaInputError

    gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip())
    plan = plan_capacity(
        CapacityRequest(
            model=args.model,
            load=args.load,
            gpus=gpus,
            max_ttft_ms=args.max_ttft_ms,
            max_tpot_ms=args.max_tpot_ms,
            percentile=args.percentile,
            min_replicas=args.min_replicas,
            scale_up_delay_min=args.scale_up_delay_min,
            prices=args.prices,
            engine=args.engine,
            precision=args.precision,
        )
    )
    if args.json:
        print(jsonio.dumps(plan.to_dict(), indent=2))
    else:
        print(render_text(plan))
    if args.plot and plan.chosen is not None:
        from plena_opt.cli.capacity_plot import write_plot

        write_plot(plan, args.plot)
    if plan.chosen is None:
        raise PlenaInputError(
            "sla",
            "no candidate deployment meets the SLA in every interval "
            "(each candidate's reason is listed above)",
        )
    return 0


def _money(v: float | None) -> str:
    return "-" if v is None else f"${v:,.0f}"


def render_text(plan: Any) -> str:
    """The candidates table and the chosen deployment's answer."""
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
    for c in plan.candidates:
        if not c.priced:
            lines.append(
                f"{c.name:<16} {'':>13} {'':>9} {'':>9} {'':>8} {'':>11} {'':>16}  "
                f"{'skipped: ' + c.skipped if c.skipped else 'infeasible: ' + str(c.infeasible)}"
            )
            continue
        mus = c.max_rate_per_replica
        reps = f"{min(c.replicas)}-{max(c.replicas)}"
        react = f"{_money(c.reactive_usd_per_day)} {100 * c.reactive_slo_attainment:.1f}%"
        mark = "<- cheapest" if c is plan.chosen else ""
        lines.append(
            f"{c.name:<16} {min(mus):>13.2f} {reps:>9} {c.gpu_hours_per_day:>9.0f} "
            f"{_money(c.usd_per_day):>8} {_money(c.fixed_fleet_usd_per_day):>11} "
            f"{react:>16}  {mark}"
        )
    c = plan.chosen
    lines.append("")
    if c is None:
        lines.append("no candidate meets the SLA in every interval")
        return "\n".join(lines)
    saving = 1 - c.usd_per_day / c.fixed_fleet_usd_per_day
    lines += [
        f"cheapest: {c.name}, {min(c.replicas)}-{max(c.replicas)} replicas "
        f"({min(c.replicas) * c.tp}-{max(c.replicas) * c.tp} GPUs), "
        f"{c.gpu_hours_per_day:.0f} GPU-h/day, {_money(c.usd_per_day)}/day, SLO "
        f"attainment {100 * c.slo_attainment:.0f}%; a fixed fleet of "
        f"{c.fixed_fleet_replicas} replicas costs {_money(c.fixed_fleet_usd_per_day)}/day "
        f"(scaling saves {100 * saving:.0f}%)",
        "replicas per interval: " + " ".join(str(r) for r in c.replicas),
        "(req/s/replica: the least over the intervals; reactive: $/day and SLO attainment "
        "when replicas are ordered only as the load rises)",
    ]
    return "\n".join(lines)
