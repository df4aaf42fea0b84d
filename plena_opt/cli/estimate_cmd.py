"""``plena-opt estimate``: one plan's TTFT, TPS, footprint and energy (one chip or many)."""

from __future__ import annotations

import argparse

from plena_opt.api.catalog import DEFAULT_NOC, Plan
from plena_opt.cli.calibration_flag import add_calibration_flag
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
from plena_opt.cli.load_args import pools as _pools
from plena_opt.cli.load_args import print_under_load, resolve_batch, speculation_of_args
from plena_opt.cli.load_args import wants_load as _wants_load
from plena_opt.errors import PlenaInputError

# ``--burst-ttft`` without a value: the modelled vLLM's default budget on the chip (not a str:
# argparse would convert it with ``type``)
CHIP_DEFAULT = object()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "estimate",
        help=help_of("estimate"),
        description="Estimate TTFT, decode tokens/s, footprint and energy of one parallel plan. "
        "Without --noc and with every plan degree 1 it is the single-chip estimate; a "
        f"multi-device plan without --noc runs on {DEFAULT_NOC}, as in search and simulate. "
        "tps = system decode tokens/s averaged over the output (KV growing from input to "
        "input+output); tps_per_sequence = one sequence's rate; ttft_seconds = prefill of the "
        "batch + the first decode step (no queueing; on a GPU chip the prefill includes the host "
        "time of vLLM's eager prefill forward, the chip's eager_host; --burst-ttft adds each "
        "request's first token under vLLM's chunked-prefill queueing on GPU chips). Under load the "
        "engine runs at most the plan's batch at once, as its launch files cap it: --batch-size "
        "defaults to C under --concurrency C (else 16; --request-rate without it: the engine's "
        "default cap).",
        epilog=UNITS_EPILOG,
    )
    add_workload_args(p)
    p.set_defaults(noc=None, batch_size=None)  # None: C under --concurrency C, else 16
    batch_flag = next(a for a in p._actions if a.dest == "batch_size")
    batch_flag.help = "global batch, sequences, and the engine's running cap under load (default: "
    batch_flag.help += "C under --concurrency C, else 16)"
    add_plan_args(p)
    add_server_arg(p, "estimate on a plena-opt server (remote mode)")
    p.add_argument("--json", action="store_true", help="print the reference JSON document")
    p.add_argument(
        "--prices",
        metavar="FILE",
        default=None,
        help="price file (JSON: per chip usd_per_gpu_hour, site usd_per_kwh and pue, each "
        "sourced and dated) for the cost fields; default: the shipped plena_opt/estimate/"
        "prices.json",
    )
    p.add_argument(
        "--burst-ttft",
        type=int,
        nargs="?",
        const=CHIP_DEFAULT,
        default=None,
        metavar="TOKENS",
        help="GPU chips: also replay a burst of --batch-size requests through vLLM's "
        "chunked-prefill scheduler with TOKENS per step (no value: the modelled vLLM's default "
        "max_num_batched_tokens on the chip, 16384 on >= 160 GiB GPUs, 8192 on >= 70 GiB) "
        "and print each request's first-token time (mean, p50/p90/p99, "
        "last; JSON key burst_ttft, seconds); local only",
    )
    _add_load_args(p)
    _add_speculative_args(p)
    add_calibration_flag(p)
    p.set_defaults(func=run)


def _add_speculative_args(p: argparse.ArgumentParser) -> None:
    """Speculative decoding under load: draft tokens, method, acceptance per position."""
    from plena_opt.bounds import MAX_SPECULATIVE_TOKENS

    g = p.add_argument_group("speculative decoding (with --concurrency/--request-rate)")
    g.add_argument(
        "--speculative",
        type=int,
        default=None,
        metavar="K",
        help=f"also price speculative decoding with K draft tokens per step, "
        f"1..{MAX_SPECULATIVE_TOKENS} (a verify step of K+1 tokens per request plus the "
        "drafts) and say whether it lowers the mean TPOT at this load (JSON key speculative); "
        "default: none",
    )
    g.add_argument(
        "--speculative-method",
        default=None,
        help="mtp (one extra decoder layer per draft), eagle (default; a one-layer draft "
        "head) or ngram (prompt lookup, no draft compute; needs --acceptance)",
    )
    g.add_argument(
        "--acceptance",
        default=None,
        metavar="A1,...,AK",
        help="acceptance rate of each draft position given the ones before were accepted, "
        "each in (0, 1] (default: the method's published measurement, cited in the output)",
    )


def _add_load_args(p: argparse.ArgumentParser) -> None:
    """Serving under load (GPU chips): the workload and the engine that schedules it."""
    from plena_opt.bounds import MAX_CONCURRENCY, MAX_REQUEST_RATE

    g = p.add_argument_group("serving under load (GPU chips; also with --server)")
    g.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="C",
        help=f"also price the plan under a closed loop of C clients, 1..{MAX_CONCURRENCY} (each "
        "sends its next request when its last one finishes, as vllm bench serve "
        "--max-concurrency), with --input-seq/--output-seq fixed lengths: TTFT, TPOT, ITL, E2E "
        "(mean, p50/p90/p99 of a replay; mean of the steady state), tokens/s per GPU and per "
        "user (JSON key serving_under_load, SI); default: none, the static batch only",
    )
    g.add_argument(
        "--request-rate",
        type=float,
        default=None,
        metavar="RATE",
        help=f"instead of --concurrency: Poisson arrivals at RATE requests/s, at most "
        f"{MAX_REQUEST_RATE:,.0f} (default: none)",
    )
    g.add_argument(
        "--range-ratio",
        type=float,
        default=None,
        metavar="R",
        help="draw each request's lengths uniformly within ±R of --input-seq/--output-seq, "
        "0 <= R < 1 (default: 0, fixed lengths: clients then stay in the lock-step groups of "
        "the start burst)",
    )
    g.add_argument(
        "--engine",
        default=None,
        help="serving engine whose default scheduler runs the load: vllm (default), sglang or "
        "trtllm; refused on PLENA chips (no engine targets them)",
    )
    for flag, what in (("prefill-workers", "prefill workers"), ("prefill-tp", "TP of a prefill "
                       "worker"), ("decode-workers", "decode workers"),
                       ("decode-tp", "TP of a decode worker")):  # fmt: skip
        g.add_argument(
            f"--{flag}",
            type=int,
            default=None,
            metavar="N",
            help=f"disaggregated serving: {what} (give all four; the pools take the first "
            "devices of --noc, prefill first); with --concurrency/--request-rate prices the "
            "prefill queue, KV transfer and decode batch (default: none, one aggregated plan)",
        )
    g.add_argument(
        "--memory-fraction",
        type=float,
        default=None,
        metavar="F",
        help="the KV pool's share of GPU memory the engine is priced with, 0 < F <= 1 (vLLM "
        "--gpu-memory-utilization, SGLang --mem-fraction-static, TensorRT-LLM "
        "free_gpu_memory_fraction; the value plena-opt export --memory-fraction writes; "
        "default: 0.9, what the export writes by default)",
    )
    g.add_argument(
        "--engine-version",
        default=None,
        help="the engine version (default and only one modelled: vllm 0.34.0, sglang 0.5.23, "
        "trtllm 00209af1)",
    )


def run(args: argparse.Namespace) -> int:
    from plena_opt.api.running_cap import check_memory_fraction

    check_memory_fraction(args.memory_fraction)
    if args.memory_fraction is not None and args.concurrency is None and args.request_rate is None:
        raise PlenaInputError(
            "memory_fraction",
            "--memory-fraction prices the KV pool under load: give --concurrency or --request-rate",
        )
    args.load_batch = resolve_batch(args)
    plan = plan_from_args(args)
    speculation_of_args(args)  # bad flags fail before any pricing
    if args.noc is None and plan.world_size != 1:  # the default NoC of every command
        args.noc = DEFAULT_NOC
    with plan_fill_hints(args):
        if args.server:
            from plena_opt.cli.remote import remote_estimate

            if args.burst_ttft is not None:
                raise PlenaInputError(
                    "burst_ttft", "--burst-ttft is computed locally; run it without --server"
                )
            if _wants_load(args) and args.noc is None:
                raise PlenaInputError(
                    "concurrency", "serving under load needs a GPU --chip on a --noc"
                )
            if args.prices is not None:
                raise PlenaInputError(
                    "prices", "--prices is computed locally; run it without --server"
                )
            return remote_estimate(args)
        if _pools(args) is not None:
            if args.speculative is not None:
                raise PlenaInputError(
                    "speculative", "--speculative prices one aggregated plan, not pools"
                )
            return _print_disaggregated(args)
        return _run_local(args, plan)


def _run_local(args: argparse.Namespace, plan: Plan) -> int:
    from plena_opt import api

    if args.noc is None:
        # The single-chip estimate ignores the network; load the rest of the flags as usual.
        spec = problem_from_args(argparse.Namespace(**{**vars(args), "noc": DEFAULT_NOC}))
        problem = api.load_problem(spec)
        result = api.estimate_single_chip(problem)  # refuses a chip kind priced on a node
    else:
        problem = api.load_problem(problem_from_args(args))
        from plena_opt.api.catalog import load_prices

        result = api.estimate_plan(problem, plan, load_prices(args.prices))
        if _wants_load(args):
            return _print_under_load(args, problem, plan, result)
        if args.burst_ttft is not None:
            return _print_with_burst(args, problem, plan, result)
    if _wants_load(args):
        raise PlenaInputError("concurrency", "serving under load needs a GPU --chip on a --noc")
    if args.speculative is not None:
        raise PlenaInputError(
            "speculative",
            "--speculative is priced under load: give --concurrency or "
            "--request-rate and a GPU --chip on a --noc",
        )
    if args.burst_ttft is not None:
        raise PlenaInputError("burst_ttft", "--burst-ttft needs a GPU chip on a --noc")
    print(result.to_text(as_json=args.json))
    return 0


def _print_with_burst(args: argparse.Namespace, problem, plan: Plan, result) -> int:  # noqa: ANN001
    """The estimate plus the burst TTFT replay (``burst_ttft`` key / two text lines)."""
    from plena_opt.api.gpu_ttft import burst_ttft

    budget = None if args.burst_ttft is CHIP_DEFAULT else args.burst_ttft  # no value: the chip's
    q = burst_ttft(problem, plan, budget)
    if args.json:
        result.document["burst_ttft"] = q.to_dict()
        print(result.to_text(as_json=True))
        return 0
    print(result.to_text())
    print(
        f"Burst TTFT      {len(q.ttft_seconds)} requests at once, {q.budget_tokens} tokens/step "
        f"({q.steps} steps): mean {q.mean_seconds * 1e3:.1f} ms, p50 "
        f"{q.percentile_seconds(50) * 1e3:.1f} ms, p90 {q.percentile_seconds(90) * 1e3:.1f} ms, "
        f"p99 {q.percentile_seconds(99) * 1e3:.1f} ms, last {q.max_seconds * 1e3:.1f} ms"
    )
    return 0


def _print_under_load(args: argparse.Namespace, problem, plan: Plan, result) -> int:  # noqa: ANN001
    """The estimate plus the plan under load (``serving_under_load`` key / a text block)."""
    from plena_opt.api import serve_under_load

    if args.burst_ttft is not None:
        raise PlenaInputError("burst_ttft", "--burst-ttft and --concurrency: give one")
    load = serve_under_load(
        problem, plan, args.engine or "vllm", args.concurrency, args.request_rate,
        args.engine_version, args.range_ratio or 0.0, args.load_batch, args.memory_fraction,
    )  # fmt: skip
    verdict = None
    spec = speculation_of_args(args)
    if spec is not None:
        from plena_opt.api.speculative import speculate

        verdict = speculate(problem, plan, load, spec, args.engine or "vllm")
    return print_under_load(args, result, load, verdict)


def _print_disaggregated(args: argparse.Namespace) -> int:
    """Pools under load: the ``serving_under_load`` document / text block alone (the pools are
    not one plan, so no static-batch estimate is printed)."""
    from plena_opt import api
    from plena_opt.api.under_load_disagg import serve_disaggregated
    from plena_opt.jsonio import dumps

    if args.noc is None:
        raise PlenaInputError("noc", "disaggregated pools need a GPU --chip on a --noc")
    if args.burst_ttft is not None:
        raise PlenaInputError("burst_ttft", "--burst-ttft and disaggregated pools: give one")
    problem = api.load_problem(problem_from_args(args))
    load = serve_disaggregated(
        problem, _pools(args), args.engine or "vllm", args.concurrency, args.request_rate,
        args.engine_version, args.range_ratio or 0.0, args.memory_fraction,
    )  # fmt: skip
    if args.json:
        print(dumps({"mode": "disaggregated", "serving_under_load": load.to_dict()}, indent=2))
    else:
        print(load.to_text().lstrip("\n"))
    return 0
