"""``plena-opt capacity``: replicas and dollars per day over a load curve (issue 30 item 2)."""

from __future__ import annotations

import argparse

from plena_opt.cli.calibration_flag import add_calibration_flag
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
    p.add_argument(
        "--max-ttft-ms", type=float, help="TTFT bound at the percentile (ms; default: none)"
    )
    p.add_argument(
        "--max-tpot-ms", type=float, help="TPOT bound at the percentile (ms; default: none)"
    )
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
    p.add_argument(
        "--mixed",
        action="store_true",
        help="also price the cheapest mix of the candidates in each interval (exact integer "
        "program) and pick it when it is cheaper (default: single deployments only)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write GPUs per interval by GPU type and cost per day to this PNG (default: no plot)",
    )
    add_calibration_flag(p)
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
            mixed=args.mixed,
        )
    )
    if args.json:
        print(jsonio.dumps(plan.to_dict(), indent=2))
    else:
        from plena_opt.cli.capacity_report import render_text

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
