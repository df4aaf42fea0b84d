"""``plena-opt estimate``: one plan's TTFT, TPS, footprint and energy (one chip or many)."""

from __future__ import annotations

import argparse

from plena_opt.cli.common import add_workload_args, build_evaluator_inputs
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, estimate_single_chip
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.evaluator import Evaluator, metrics_of
from plena_opt.estimate.report import estimate_output, single_chip_output
from plena_opt.estimate.problem import DEFAULT_NOC


def add_plan_args(parser: argparse.ArgumentParser) -> None:
    """``--tp --ep --dp --pp --cp --moe-tp-mode --comm-overlap`` (shared with ``simulate``)."""
    g = parser.add_argument_group("parallel plan")
    for dim in ("tp", "ep", "dp", "pp", "cp"):
        g.add_argument(f"--{dim}", type=int, default=1, help=f"{dim.upper()} degree")
    g.add_argument(
        "--moe-tp-mode",
        default="replace",
        choices=MOE_TP_MODES,
        help="MoE layers fold TP ranks into EP ranks (replace) or keep them",
    )
    g.add_argument(
        "--comm-overlap",
        default="none",
        choices=COMM_OVERLAPS,
        help="overlap each layer's collectives with its compute",
    )


def plan_from_args(args: argparse.Namespace) -> Plan:
    return Plan(
        tp=args.tp,
        ep=args.ep,
        dp=args.dp,
        pp=args.pp,
        cp=args.cp,
        moe_tp_mode=args.moe_tp_mode,
        comm_overlap=args.comm_overlap,
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "estimate",
        help="estimate one plan (single chip without --noc, distributed with it)",
        description="Estimate TTFT, decode tokens/s, footprint and energy of one parallel plan. "
        "Without --noc and with every plan degree 1 it is the single-chip estimate.",
    )
    add_workload_args(p)
    p.set_defaults(noc=None)
    add_plan_args(p)
    p.add_argument("--server", default=None, help="HOST:PORT of a plena-opt server (remote mode)")
    p.add_argument("--json", action="store_true", help="print the reference JSON document")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.server:
        from plena_client.cli_remote import remote_estimate

        return remote_estimate(args)
    plan = plan_from_args(args)
    if args.noc is None:
        if plan.world_size != 1:
            raise PlenaInputError("noc", "a multi-device plan needs --noc PROFILE")
        # The single-chip estimate ignores the network; load the rest of the flags as usual.
        inputs = build_evaluator_inputs(argparse.Namespace(**{**vars(args), "noc": DEFAULT_NOC}))
        est = estimate_single_chip(inputs.model, inputs.memory, inputs.workload, inputs.chip)
        print(single_chip_output(est.to_dict(), as_json=args.json))
        return 0
    inputs = build_evaluator_inputs(args)
    ev = Evaluator(inputs.model, inputs.noc, inputs.memory, inputs.workload, inputs.chip)
    cost = PlanCost(ev.ctx, plan)
    print(estimate_output(cost.to_estimate().to_dict(), metrics_of(cost), as_json=args.json))
    return 0
