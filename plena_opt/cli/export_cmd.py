"""``plena-opt export``: the vLLM / SGLang launch arguments (or JSON) of a plan."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from plena_opt.bounds import check_count
from plena_opt.cli.commands import help_of
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import MAX_WORKLOAD
from plena_opt.export.launch import FORMATS, export_plan, parse_point_key


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("export", help=help_of("export"), description=__doc__)
    p.add_argument("plan", help="plan key, e.g. tp8-ep1-dp1-pp4-cp1-replace-none-b16")
    p.add_argument(
        "--decode-plan",
        default=None,
        help="disaggregated: the decode pool's key; PLAN is then the prefill pool's "
        "(default: one aggregated pool)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="json",
        help="json: every engine's launch as JSON; an engine name: its shell command line",
    )
    p.add_argument(
        "--precision",
        default=None,
        help="weight/activation format (default: the key's -fp8… suffix, else the checkpoint's)",
    )
    p.add_argument(
        "--kv-precision", default=None, help="KV-cache format (default: the checkpoint's)"
    )
    p.add_argument("--engine-model", default="MODEL", help="model id the engine loads")
    p.add_argument("--input-seq", type=int, default=2048, help="prompt length, tokens")
    p.add_argument("--output-seq", type=int, default=1024, help="generated tokens")
    p.add_argument("--memory-fraction", type=float, default=0.9, help="memory budget, (0, 1]")
    p.add_argument(
        "--out-dir",
        default=None,
        help="write one file per pool into this folder (default: print to stdout)",
    )
    p.set_defaults(func=handle)


def configs(args: argparse.Namespace) -> list[Any]:
    """One launch per engine and pool (prefill, decode) the arguments name."""
    if not 0 < args.memory_fraction <= 1:
        raise PlenaInputError("memory_fraction", "--memory-fraction must be in (0, 1]")
    # the bounds of a workload the estimator prices (plena_opt.estimate.plan.MAX_WORKLOAD)
    check_count(args.input_seq, "input_seq", "--input-seq", 1, MAX_WORKLOAD["input_seq_len"])
    check_count(args.output_seq, "output_seq", "--output-seq", 1, MAX_WORKLOAD["output_seq_len"])
    pools = [(args.plan, None)] if args.decode_plan is None else [
        (args.plan, "prefill"), (args.decode_plan, "decode")
    ]  # fmt: skip
    engines = ("vllm", "sglang") if args.format == "json" else (args.format,)
    from plena_opt.chip.precision import check_format

    for name in ("precision", "kv_precision"):
        if getattr(args, name, None) is not None:
            check_format(getattr(args, name), name)
    out = []
    for key, role in pools:
        plan, batch, key_prec = parse_point_key(key)
        for engine in engines:
            out.append(
                export_plan(
                    engine,
                    plan,
                    batch,
                    model=args.engine_model,
                    max_len=args.input_seq + args.output_seq,
                    memory_fraction=args.memory_fraction,
                    role=role,
                    precision=getattr(args, "precision", None) or key_prec,
                    kv_precision=getattr(args, "kv_precision", None),
                )
            )
    return out


def handle(args: argparse.Namespace) -> int:
    launches = configs(args)
    if args.format == "json":
        text = json.dumps([c.to_dict() for c in launches], indent=2)
        files = {"launch.json": text + "\n"}
    else:
        text = "\n".join(c.script() for c in launches)
        files = {f"{c.engine}-{c.role or 'serve'}.sh": c.script() for c in launches}
    if args.out_dir is None:
        print(text)
        return 0
    folder = Path(args.out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, body in files.items():
            (folder / name).write_text(body)
    except OSError as exc:
        raise PlenaInputError("out_dir", f"--out-dir {args.out_dir}: {exc.strerror}") from None
    print("\n".join(str(folder / n) for n in files))
    return 0
