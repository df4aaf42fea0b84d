"""``plena-opt simulate``: Monte Carlo re-check of one serving plan, or a training schedule.

Plan mode (default) takes the same flags as ``plena-opt estimate`` and simulates the evaluated
plan's serving windows (times in seconds). Schedule mode (``--schedule``) simulates a training
schedule with ``--durations`` per op type (times in milliseconds, per pipeline stage: with
``--vpp v`` each of a rank's v chunk ops takes F/v, as in the closed forms of
pipeline-simulator §1.3).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from plena_opt import api, jsonio
from plena_opt.api.simulation_io import (
    SCHEDULES,
    NoiseSpec,
    check_schedule_shape,
    check_seed,
    render_schedule,
    schedule_op_types,
)
from plena_opt.bounds import MAX_SAMPLES, MAX_SCHEDULE_OPS, MAX_WINDOW_STEPS, check_count
from plena_opt.cli.commands import help_of
from plena_opt.cli.common import (
    UNITS_EPILOG,
    add_plan_args,
    add_server_arg,
    add_workload_args,
    plan_fill_hints,
    plan_from_args,
    problem_from_args,
)
from plena_opt.cli.simulate_args import noise_from_flag, parse_durations, write_traces
from plena_opt.errors import PlenaInputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help=help_of("simulate"),
        description=__doc__.splitlines()[0],
        epilog=UNITS_EPILOG,
    )
    add_workload_args(p)
    add_plan_args(p)
    g = p.add_argument_group("training schedule mode")
    g.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=None,
        help="simulate this training schedule instead of the serving plan (default: serving)",
    )
    g.add_argument(
        "--vpp",
        type=int,
        default=1,
        help="virtual chunks per rank (--durations stay per stage: each chunk op takes F/v)",
    )
    g.add_argument("--microbatches", type=int, default=8, help="micro-batches per step")
    g.add_argument(
        "--durations",
        default=None,
        help="base ms per op type and pipeline stage (all of a rank's layers), e.g. F=1,B=2 "
        "(ZB: F,I,W; bigmac-vpp also VF,VB,GF,GB); with --vpp v each LLM chunk op (F, B, I, W) "
        "takes F/v, B/v, …; vision-encoder and generator ops (VF, VB, GF, GB) are not chunked "
        "(default: none; required with --schedule)",
    )
    m = p.add_argument_group("Monte Carlo")
    m.add_argument("--samples", type=int, default=1000, help="Monte Carlo samples (0: none)")
    m.add_argument(
        "--noise",
        default="sigma=0.05",
        help="noise spec: key=value list (sigma, rank, straggler_p, straggler_low, "
        "straggler_high, moe_experts, moe_top_k, moe_ep, moe_tokens, moe_alpha, moe_fraction) "
        "or JSON",
    )
    m.add_argument(
        "--seed", type=int, default=0, help="random seed (0 <= seed < 2**32; default: 0)"
    )
    m.add_argument(
        "--max-window-steps",
        type=int,
        default=64,
        help="decode steps in the serving window (>= 1)",
    )
    p.add_argument(
        "--simulate-comm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="simulate pipeline communication as explicit ops on each rank's comm lane "
        "(training: XF/XB sends, durations XF=…,XB=…; serving: the XP/XD hops), or leave it "
        "out (pipeline-simulator §0 rule 4). Default: off for --schedule, on for a serving "
        "plan (the estimate charges every hop)",
    )
    p.add_argument(
        "--trace",
        default=None,
        help="write the deterministic Chrome trace here (+ .p50/.p99 beside it with --samples; "
        "default: no trace)",
    )
    p.add_argument(
        "--engine",
        default=None,
        help="serving engine whose kernels price the plan's steps (its MoE kernel, TensorRT-LLM's "
        "fused input quantisation), as estimate --engine without a load: vllm (default), sglang "
        "or trtllm; GPU chips only",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_server_arg(p, "simulate on a plena-opt server (remote mode)")
    p.set_defaults(func=run)


def _check_args(args: argparse.Namespace) -> None:
    """Flag rules shared by local and remote mode (the server applies the same ones)."""
    check_count(args.samples, "samples", "--samples", 0, MAX_SAMPLES)
    check_seed(args.seed, "seed", "--seed")
    check_count(
        args.max_window_steps, "max_window_steps", "--max-window-steps", 1, MAX_WINDOW_STEPS
    )
    if args.schedule:  # sized before anything is built (the server's bound)
        check_schedule_shape(args.pp, args.microbatches, args.vpp)
    else:
        for flag in ("vpp", "microbatches"):
            check_count(getattr(args, flag), flag, f"--{flag}", 1, MAX_SCHEDULE_OPS)
    if args.durations is not None and args.schedule:
        parse_durations(args.durations, args.schedule, bool(args.simulate_comm))
    if args.server and args.simulate_comm is not None:
        raise PlenaInputError(
            "simulate_comm",
            "--simulate-comm/--no-simulate-comm run locally only (the gRPC Simulate request has "
            "no such field yet); drop the flag or --server",
        )


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    with plan_fill_hints(args):
        if args.server:
            from plena_opt.cli.remote import remote_simulate

            return remote_simulate(args)
        noise = noise_from_flag(args.noise)
        if args.schedule:
            return _run_schedule(args, noise)
        return _run_plan(args, noise)


def _run_schedule(args: argparse.Namespace, noise: NoiseSpec) -> int:
    comm = bool(args.simulate_comm)
    if args.durations is None:
        raise PlenaInputError(
            "durations",
            f"--durations is required with --schedule (types: "
            f"{','.join(schedule_op_types(args.schedule, comm))})",
        )
    stage_ms = parse_durations(args.durations, args.schedule, comm)
    plan = api.build_schedule(
        args.schedule, args.pp, args.microbatches, args.vpp, simulate_comm=comm
    )
    sim = api.simulate_schedule(
        plan, stage_ms, noise=noise, samples=args.samples, seed=args.seed, simulate_comm=comm
    )
    return _print(args, sim, lambda doc, traces: render_schedule(doc, traces))


def _run_plan(args: argparse.Namespace, noise: NoiseSpec) -> int:
    problem = api.load_problem(problem_from_args(args))
    sim = api.simulate_plan(
        problem,
        plan_from_args(args),
        noise=noise,
        samples=args.samples,
        seed=args.seed,
        max_window_steps=args.max_window_steps,
        simulate_comm=args.simulate_comm is not False,
    )
    return _print(args, sim, sim.to_text)


def _print(
    args: argparse.Namespace,
    sim: api.ServingSimulation | api.ScheduleSimulation,
    render: Callable[[dict, list[str]], str],
) -> int:
    """Write ``--trace`` files, then print the document (``--json``) or its table."""
    traces = write_traces(args.trace, sim.trace_documents()) if args.trace else []
    doc = sim.document()
    if args.json:
        doc["trace_paths"] = traces
        print(jsonio.dumps(doc, indent=2))
    else:
        print(render(doc, traces))
    return 0
