"""Flags shared by `estimate`, `search` and `simulate`: model, cluster, memory, chip, workload and
the parallel plan.

``add_workload_args(parser)`` / ``add_plan_args(parser)`` add them (every flag has a default, so a
bare command runs a demonstration); ``problem_from_args(args)`` builds the serialisable
``ProblemSpec``, ``plan_from_args(args)`` the ``Plan``. Heavy modules are imported only when a
command runs, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from plena_opt.api.catalog import DEFAULT_MEMORY, DEFAULT_MODEL, DEFAULT_NOC, PLAN_DIMS
from plena_opt.cli.conventions import ENV_SERVER, env_default, server_target
from plena_opt.errors import PlenaInputError
from plena_opt.vocabulary import COMM_OVERLAPS, MOE_ROUTING_MODES, MOE_TP_MODES, OVERLAP_POLICIES

if TYPE_CHECKING:
    from pydantic import ValidationError

    from plena_opt.api.catalog import Plan, ProblemSpec

__all__ = [
    "add_plan_args",
    "add_server_arg",
    "UNITS_EPILOG",
    "add_workload_args",
    "dp_fill_hint",
    "plan_from_args",
    "problem_from_args",
    "pydantic_to_input_error",
]


NOC_HELP = (
    f"NoC profile name or JSON path (default: {DEFAULT_NOC}, in every command; the plan must "
    "use all its devices. Only estimate of a one-device plan without --noc prices a single chip, "
    "with no network)"
)


UNITS_EPILOG = (
    "Units: --json is SI (ttft_seconds, energy_per_token_joules, *_bytes_per_device; tps in "
    "tokens/s), tables show ms; capacities and footprints in GiB, bandwidths in GB/s. Tails are "
    "the metric's own percentile, marked slow: TTFT p99 (ttft_p99_seconds) and TPS p1 (tps_p01, "
    "the TPS at the p99 decode period)."
)


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """Add the model / cluster / memory / chip / workload flags to ``parser``."""
    g = parser.add_argument_group("model, cluster, memory and workload")
    g.add_argument("--model", default=None, help=f"catalog model name (default {DEFAULT_MODEL})")
    g.add_argument(
        "--model-path",
        default=None,
        help="a Hugging Face model directory holding config.json, or the config.json itself, "
        "instead of --model (default: none)",
    )
    g.add_argument("--noc", default=DEFAULT_NOC, help=NOC_HELP)
    g.add_argument("--memory", default=None, help=f"memory profile (default {DEFAULT_MEMORY})")
    g.add_argument(
        "--fixed-bandwidth-gbs",
        type=float,
        default=None,
        help="fixed-bandwidth memory of X GB/s (1e9 bytes/s) instead of --memory (default: none)",
    )
    g.add_argument(
        "--fixed-capacity-gib",
        type=float,
        default=None,
        help="capacity of the fixed-bandwidth memory, GiB (default: unbounded)",
    )
    g.add_argument(
        "--total-layers",
        type=int,
        default=None,
        help="stacked DRAM: the same design with N layers (default: the profile's)",
    )
    g.add_argument(
        "--connected-layers",
        type=int,
        default=None,
        help="stacked DRAM: connected layers (default: all of --total-layers)",
    )
    g.add_argument("--chip", default=None, help="chip profile name or JSON path (default built-in)")
    g.add_argument("--batch-size", type=int, default=16, help="global batch, sequences")
    g.add_argument("--input-seq", type=int, default=2048, help="prompt length, tokens")
    g.add_argument("--output-seq", type=int, default=1024, help="generated tokens per sequence")
    g.add_argument("--include-lm-head", action="store_true", help="price the LM head too")
    g.add_argument(
        "--overlap",
        default="stage-roofline",
        choices=OVERLAP_POLICIES,
        help="compute/DRAM overlap policy per stage",
    )
    g.add_argument(
        "--routing",
        default="balanced",
        help=f"MoE routing: {'|'.join(MOE_ROUTING_MODES)} or a trace path",
    )
    g.add_argument("--frequency-hz", type=float, default=1e9, help="compute clock, Hz")
    g.add_argument("--eplb-redundant", type=int, default=None, metavar="N",
                   help="EPLB: N redundant expert replicas over the EP ranks (default: none, "
                   "EPLB off)")  # fmt: skip
    g.add_argument(
        "--precision",
        default=None,
        help="weight/activation format: bf16|fp8|fp4|mxfp8|mxfp4|int4 (default: PLENA MXFP8 "
        "1.125 B, GPU the checkpoint's quantization_config format, else bf16; a format that "
        "is not the checkpoint's is priced as a re-quantised checkpoint and said so); sets "
        "the bytes and the FLOP rate of that format (4-bit on a GPU without FP4 tensor cores: "
        "weight-only W4A16 at the bf16 rate)",
    )
    g.add_argument(
        "--kv-precision", default=None, help="KV-cache format (default: --precision; GPU bf16)"
    )
    g.add_argument(
        "--devices",
        type=int,
        default=None,
        help="use the first N devices of the --noc profile (default: all of them)",
    )
    add_moe_kernel_arg(g)


def add_moe_kernel_arg(g: argparse._ArgumentGroup) -> None:
    """``--moe-kernel``: the kernel an MXFP4 checkpoint's experts run on (``api.moe_kernel``)."""
    from plena_opt.api.moe_kernel import MOE_KERNELS

    g.add_argument(
        "--moe-kernel",
        default=None,
        choices=MOE_KERNELS,
        help="GPU: the kernel an MXFP4 checkpoint's experts (gpt-oss) run on under --engine: "
        "default (the engine's own: vLLM triton on Hopper, bf16 activations on Blackwell; "
        "SGLang triton / mxfp8; TensorRT-LLM triton / mxfp8), triton, marlin (vLLM/SGLang "
        "on Hopper), mxfp8 (MXFP8 activations on Blackwell) or bf16; one the engine does not "
        "run on the chip is refused (default: default)",
    )


def add_plan_args(parser: argparse.ArgumentParser) -> None:
    """``--tp --ep --dp --pp --cp --moe-tp-mode --moe-tp --comm-overlap`` (``estimate``,
    ``simulate``)."""
    g = parser.add_argument_group("parallel plan")
    for dim in PLAN_DIMS:
        g.add_argument(f"--{dim}", type=int, default=1, help=f"{dim.upper()} degree")
    g.add_argument(
        "--moe-tp-mode",
        default="replace",
        choices=MOE_TP_MODES,
        help="MoE layers fold TP ranks into EP ranks (replace) or keep them",
    )
    g.add_argument(
        "--moe-tp",
        type=int,
        default=0,
        help="the routed experts' TP degree over the tp*ep devices of an expert group "
        "(moe_ep = tp*ep/moe_tp; default: 0, the --moe-tp-mode shorthand)",
    )
    g.add_argument(
        "--comm-overlap",
        default="none",
        choices=COMM_OVERLAPS,
        help="overlap each layer's collectives with its compute",
    )


def add_server_arg(
    parser: argparse.ArgumentParser, help: str, metavar: str | None = "HOST[:PORT]"
) -> None:
    """``--server HOST[:PORT]``: run the command on a plena-opt server (remote mode); the default
    comes from ``PLENA_OPT_SERVER``, the port from ``server_target`` (50051)."""
    parser.add_argument(
        "--server",
        type=server_target,
        default=None,
        metavar=metavar,
        help=f"{help}; port 50051 when omitted (default: ${ENV_SERVER}, else run locally)",
    )
    parser.set_defaults(server=_env_server())
    g = parser.add_argument_group("shared-server credentials (with --server)")
    g.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="send the bearer token in FILE (default: $PLENA_OPT_TOKEN when set, else none)",
    )
    g.add_argument(
        "--server-ca",
        default=None,
        metavar="FILE",
        help="connect with TLS, trusting the server certificate's CA in FILE (PEM; default: "
        "plaintext, or the system's CAs with --client-cert)",
    )
    g.add_argument(
        "--client-cert",
        default=None,
        metavar="FILE",
        help="client certificate chain for mutual TLS (PEM; with --client-key; implies TLS; "
        "default: none)",
    )
    g.add_argument(
        "--client-key",
        default=None,
        metavar="FILE",
        help="private key of --client-cert (PEM; default: none)",
    )


def _env_server() -> str | None:
    value = env_default(ENV_SERVER)
    return server_target(value) if value else None


_WORLD_MISMATCH = re.compile(r"the plan uses (\d+) devices but NoC profile '[^']*' has (\d+)")


def dp_fill_hint(message: str, dp: int) -> str:
    """``; --dp K would fill it`` when the plan uses fewer devices than the NoC and a larger
    ``--dp`` (the other degrees unchanged) would use them all; else ``""``."""
    m = _WORLD_MISMATCH.search(message)
    if not m or dp < 1:
        return ""
    used, total = int(m.group(1)), int(m.group(2))
    others = used // dp
    if used >= total or others < 1 or total % others:
        return ""
    return f"; --dp {total // others} would fill it"


@contextlib.contextmanager
def plan_fill_hints(args: argparse.Namespace) -> Iterator[None]:
    """Add :func:`dp_fill_hint` to a "plan uses N devices" error (local and remote mode)."""
    try:
        yield
    except PlenaInputError as exc:
        hint = dp_fill_hint(str(exc), getattr(args, "dp", 1) or 1)
        if not hint:
            raise
        raise type(exc)(exc.field, f"{exc}{hint}") from exc


def plan_from_args(args: argparse.Namespace) -> Plan:
    from plena_opt.api.catalog import Plan

    return Plan.from_dict(vars(args))


def check_sources(args: argparse.Namespace) -> None:
    """Rules between the model and memory flags (shared by local and remote mode)."""
    for name in ("model", "model_path", "noc", "memory", "chip", "routing"):
        if getattr(args, name, None) == "":
            flag = "--" + name.replace("_", "-")
            raise PlenaInputError(name, f"{flag} must not be empty")
    if args.fixed_capacity_gib is not None and args.fixed_bandwidth_gbs is None:
        raise PlenaInputError(
            "fixed_capacity_gib", "--fixed-capacity-gib requires --fixed-bandwidth-gbs"
        )
    if args.model and args.model_path:
        raise PlenaInputError("model", "give --model or --model-path, not both")
    if args.memory and args.fixed_bandwidth_gbs is not None:
        raise PlenaInputError("memory", "give --memory or --fixed-bandwidth-gbs, not both")
    for name in ("precision", "kv_precision"):
        if getattr(args, name, None) is not None:
            from plena_opt.api.catalog import check_format

            check_format(getattr(args, name), name)


def chip_carries_memory(name: str | None) -> bool:
    """Whether ``--chip`` names a chip that carries its own memory (its kind's pricer says so:
    a GPU profile's HBM), so ``--memory`` is not defaulted."""
    from plena_opt.api.catalog import chip_carries_memory as carries

    return carries(name)


def pydantic_to_input_error(exc: ValidationError) -> PlenaInputError:
    """The first pydantic error as ``PlenaInputError(field, rule)`` (fields named as flags)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if not loc:  # a rule across several flags: its message names them
        return PlenaInputError("request", msg)
    flag = "--" + loc.replace("_", "-")
    return PlenaInputError(loc, f"{flag}: {msg}")


def problem_from_args(args: argparse.Namespace) -> ProblemSpec:
    """The ``ProblemSpec`` the flags describe; bad values raise ``PlenaInputError`` (exit 2)."""
    from pydantic import ValidationError

    from plena_opt.api.catalog import ProblemSpec

    check_sources(args)
    memory = args.memory or DEFAULT_MEMORY
    if not args.memory and chip_carries_memory(args.chip):
        memory = None  # a GPU chip carries its HBM
    try:
        return ProblemSpec(
            model=None if args.model_path else (args.model or DEFAULT_MODEL),
            model_path=args.model_path,
            noc=args.noc,
            memory=None if args.fixed_bandwidth_gbs is not None else memory,
            fixed_bandwidth_gbs=args.fixed_bandwidth_gbs,
            fixed_capacity_gib=args.fixed_capacity_gib,
            total_layers=args.total_layers,
            connected_layers=args.connected_layers,
            chip=args.chip,
            batch_size=args.batch_size,
            input_seq=args.input_seq,
            output_seq=args.output_seq,
            include_lm_head=args.include_lm_head,
            overlap=args.overlap,
            routing=args.routing,
            frequency_hz=args.frequency_hz,
            precision=getattr(args, "precision", None),
            kv_precision=getattr(args, "kv_precision", None),
            devices=getattr(args, "devices", None),
            eplb_redundant=getattr(args, "eplb_redundant", None),
            engine=getattr(args, "engine", None),
            moe_kernel=getattr(args, "moe_kernel", None),
        )
    except ValidationError as exc:
        raise pydantic_to_input_error(exc) from exc
