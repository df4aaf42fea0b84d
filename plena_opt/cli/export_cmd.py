"""``plena-opt export``: the launch bundle of a plan, a deployment or a stored trial.

A bundle is, per engine (vLLM, SGLang, TensorRT-LLM), the server commands (one per node when a
server spans nodes), the router of a disaggregated deployment and the benchmark that measures
the workload the plan was priced for. An engine that cannot run the plan as priced is refused
with the reasons; no command is written for it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from plena_opt.api.catalog import MAX_WORKLOAD
from plena_opt.bounds import check_count
from plena_opt.cli.commands import help_of
from plena_opt.errors import PlenaInputError

FORMATS = ("vllm", "sglang", "trtllm", "json")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("export", help=help_of("export"), description=__doc__)
    p.add_argument(
        "plan",
        nargs="?",
        default=None,
        help="plan key (tp8-ep1-dp1-pp4-cp1-replace-none-b16) or deployment key "
        "(2P:KEY+3D:KEY), as search prints them; or --study/--trial",
    )
    p.add_argument(
        "--decode-plan",
        default=None,
        help="disaggregated: the decode pool's key "
        "(PLAN is then the prefill pool's; one worker each; default: none)",
    )
    p.add_argument(
        "--study", default=None, help="export trial --trial of this stored study (default: none)"
    )
    p.add_argument(
        "--trial", type=int, default=None, help="trial number (with --study; default: none)"
    )
    p.add_argument(
        "--storage",
        default=None,
        help="study store (with --study; default ./plena-opt.log or $PLENA_OPT_STORAGE)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="json",
        help="json: every engine's bundle as JSON; an engine: its shell scripts",
    )
    p.add_argument(
        "--model", default=None, help="catalog model (its Hugging Face id is loaded; default: none)"
    )
    p.add_argument(
        "--model-path", default=None, help="model directory the engines load (default: none)"
    )
    p.add_argument(
        "--engine-model", default=None, help="model id the engines load (overrides; default: none)"
    )
    p.add_argument(
        "--precision",
        default=None,
        help="weight/activation format (default: the key's -fp8… suffix)",
    )
    p.add_argument("--kv-precision", default=None, help="KV-cache format (default: checkpoint's)")
    _workload_flags(p)
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    p.add_argument(
        "--out-dir",
        default=None,
        help="write the bundle's files into this folder (default: print them)",
    )
    from plena_opt.api.moe_kernel import MOE_KERNELS

    p.add_argument(
        "--moe-kernel",
        default=None,
        choices=MOE_KERNELS,
        help="the kernel an MXFP4 checkpoint's experts were priced on (estimate/search "
        "--moe-kernel): each engine's settings that select it are written, one it does not "
        "run on --gpu is refused (default: the stored study's, else each engine's default)",
    )
    p.add_argument(
        "--gpu",
        default=None,
        help="the GPU the bundle runs on (a chip name such as h100-sxm), recorded in --out-dir's "
        "deployment.json for validate --bundle (default: the stored study's chip, else none)",
    )
    p.set_defaults(func=handle)


def _workload_flags(p: argparse.ArgumentParser) -> None:
    """The workload and memory setting the bundle is written for."""
    p.add_argument(
        "--input-seq",
        type=int,
        default=None,
        help="prompt tokens (default: the stored study's with --study, else 2048)",
    )
    p.add_argument(
        "--output-seq",
        type=int,
        default=None,
        help="output tokens (default: the stored study's with --study, else 1024)",
    )
    p.add_argument(
        "--memory-fraction",
        type=float,
        default=0.9,
        help="share of each GPU's memory the engine takes, 0 < F <= 1: vLLM "
        "--gpu-memory-utilization, SGLang --mem-fraction-static, TensorRT-LLM "
        "free_gpu_memory_fraction (a share of the memory left after the weights); "
        "estimate/search --memory-fraction price the KV pool at the same value",
    )


def _key_and_problem(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The key to export and the stored problem it came from (empty without --study)."""
    if args.study is None:
        if args.trial is not None:
            raise PlenaInputError("trial", "--trial needs --study")
        if args.plan is None:
            raise PlenaInputError("plan", "give a plan key, or --study NAME --trial N")
        if args.decode_plan is not None:
            return f"1P:{args.plan}+1D:{args.decode_plan}", {}
        return args.plan, {}
    if args.trial is None or args.plan is not None:
        raise PlenaInputError("trial", "--study takes --trial N and no plan key")
    from plena_opt.api import stored_trial
    from plena_opt.api.studies import DEFAULT_STORAGE
    from plena_opt.cli.conventions import ENV_STORAGE

    storage = args.storage or os.environ.get(ENV_STORAGE) or DEFAULT_STORAGE
    t = stored_trial(storage, args.study, args.trial)
    return t.key, t.problem


def spec_of(args: argparse.Namespace, problem: dict[str, Any]) -> Any:
    """The bundle's shared settings: flags first, then the stored problem, then defaults."""
    from plena_opt.api import engine_model, export_moe
    from plena_opt.api.catalog import check_format
    from plena_opt.api.launch import ExportSpec

    for name in ("precision", "kv_precision"):
        if getattr(args, name) is not None:
            check_format(getattr(args, name), name)
    # the bounds of a workload the estimator prices (plena_opt.estimate.plan.MAX_WORKLOAD)
    for name, key in (("input_seq", "input_seq_len"), ("output_seq", "output_seq_len")):
        if getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            check_count(getattr(args, name), name, flag, 1, MAX_WORKLOAD[key])
    check_count(args.gpus_per_node, "gpus_per_node", "--gpus-per-node", 1, 1024)
    if args.engine_model:
        model = args.engine_model
    elif args.model or args.model_path:
        model = engine_model(args.model, args.model_path)
    else:
        model = engine_model(problem.get("model"), problem.get("model_path"))
    return ExportSpec(
        model=model,
        input_len=args.input_seq or problem.get("input_seq") or 2048,
        output_len=args.output_seq or problem.get("output_seq") or 1024,
        memory_fraction=args.memory_fraction,
        gpus_per_node=args.gpus_per_node,
        precision=args.precision or problem.get("precision"),
        kv_precision=args.kv_precision or problem.get("kv_precision"),
        eplb_redundant=problem.get("eplb_redundant") or 0,
        **export_moe(
            args.gpu or problem.get("chip"),
            args.model or (None if args.model_path else problem.get("model")),
            args.model_path or (None if args.model else problem.get("model_path")),
            args.moe_kernel or problem.get("moe_kernel"),
        ),  # fmt: skip
    )


def configs(args: argparse.Namespace) -> list[Any]:
    """Every command of the bundle, per engine the format names."""
    return _configs(args)[0]


def _configs(args: argparse.Namespace) -> tuple[list[Any], str, Any, dict[str, Any]]:
    """(commands, key, spec, stored problem) of the bundle."""
    from plena_opt.api.launch import ENGINE_NAMES, bundle

    key, problem = _key_and_problem(args)
    engines = ENGINE_NAMES if args.format == "json" else (args.format,)
    spec = spec_of(args, problem)
    return bundle(key, spec, engines), key, spec, problem


def handle(args: argparse.Namespace) -> int:
    launches, key, spec, problem = _configs(args)
    if args.format != "json" and all(c.refused for c in launches):
        reasons = "; ".join(r for c in launches for r in c.refused)
        raise PlenaInputError("plan", f"{args.format} cannot run this plan as priced: {reasons}")
    if args.out_dir is not None:
        from plena_opt.api.launch import write_bundle

        try:
            paths = write_bundle(Path(args.out_dir), launches)
            paths.append(_write_deployment(args, key, spec, problem, launches))
        except OSError as exc:
            raise PlenaInputError("out_dir", f"--out-dir {args.out_dir}: {exc.strerror}") from None
        print("\n".join(paths))
    elif args.format == "json":
        print(json.dumps([c.to_dict() for c in launches], indent=2))
    else:
        print("\n".join(c.script() for c in launches))
    return 0


def _write_deployment(args: argparse.Namespace, key: str, spec: Any, problem: dict[str, Any],
                      launches: list[Any]) -> str:  # fmt: skip
    """The bundle's deployment.json (what validate --bundle reads)."""
    from plena_opt.api.launch import write_deployment

    if args.gpu is not None:
        from plena_opt.api.catalog import load_chip

        load_chip(args.gpu)  # an unknown chip: PlenaNotFoundError naming it
    gpu = args.gpu or problem.get("chip")
    if gpu is not None and not isinstance(gpu, str):
        gpu = None  # an inline chip document: no name to record
    model = args.model or problem.get("model")
    return write_deployment(
        Path(args.out_dir), key, spec, launches, model if isinstance(model, str) else None, gpu
    )
