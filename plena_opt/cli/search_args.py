"""The search flags read back into a ``SearchRequest`` and checked before searching, shared by
local and remote mode (``search_cmd``, ``cli.remote``, ``robust_report``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pydantic import ValidationError

from plena_opt.api.search_io import PLOT_FORMATS, SearchRequest
from plena_opt.api.studies import DEFAULT_STORAGE
from plena_opt.cli.common import problem_from_args, pydantic_to_input_error
from plena_opt.errors import PlenaInputError


def batch_list(text: str | None) -> list[int] | None:
    """``--batch-sizes 8,16,64`` as integers (None when the flag is absent or ``auto``)."""
    if text is None or text.strip() == "auto":
        return None
    from plena_opt.api.limits import MAX_BATCH_SIZES

    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise PlenaInputError(
            "batch_sizes", f"--batch-sizes must be a comma list of integers, got {text[:64]!r}"
        ) from exc
    if len(sizes) > MAX_BATCH_SIZES:  # the bound of the gRPC and web front ends too
        raise PlenaInputError(
            "batch_sizes", f"--batch-sizes lists {len(sizes)} sizes; at most {MAX_BATCH_SIZES}"
        )
    return sizes


def precision_list(text: str | None) -> list[str] | None:
    """``--precisions bf16,fp8`` as names (None when the flag is absent)."""
    if text is None:
        return None
    return [x.strip() for x in text.split(",") if x.strip()]


def request_from_args(args: argparse.Namespace) -> SearchRequest:
    """The ``SearchRequest`` the flags describe (bad values: ``PlenaInputError``)."""
    try:
        return SearchRequest(
            problem=problem_from_args(args),
            batch_sizes=batch_list(args.batch_sizes),
            objectives=[k.strip() for k in args.objectives.split(",") if k.strip()],
            max_ttft_ms=args.max_ttft_ms,
            min_tps_per_seq=args.min_tps_per_seq,
            sampler=args.sampler,
            trials=args.trials,
            timeout=args.timeout,
            seed=args.seed,
            study=args.study,
            storage=args.storage or DEFAULT_STORAGE,  # the CLI picks the default file
            compare_exact=args.compare_exact,
            max_tpot_ms=args.max_tpot_ms,
            percentile=args.percentile,
            memory_fraction=args.memory_fraction,
            auto_batch=(args.batch_sizes or "").strip() == "auto",
            serving=args.serving,
            serving_sampler=getattr(args, "serving_sampler", "auto"),
            precisions=precision_list(getattr(args, "precisions", None)),
            max_cost_per_mtok=getattr(args, "max_cost_per_mtok", None),
            prices=getattr(args, "prices", None),
            concurrency=getattr(args, "concurrency", None),
            request_rate=getattr(args, "request_rate", None),
            engine=getattr(args, "engine", None),
            engine_version=getattr(args, "engine_version", None),
            range_ratio=getattr(args, "range_ratio", None) or 0.0,
        )
    except ValidationError as exc:
        raise pydantic_to_input_error(exc) from exc


def check_outputs(args: argparse.Namespace) -> None:
    """Fail before searching when an output cannot be written (exit 2, nothing lost)."""
    for flag, path in (("csv", args.csv), ("csv_all", args.csv_all), ("plot", args.plot)):
        if path is None:
            continue
        folder = Path(path).resolve().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            name = flag.replace("_", "-")
            raise PlenaInputError(flag, f"--{name} {path}: folder {folder} is not writable")
    if args.plot is not None:
        suffix = Path(args.plot).suffix.lower().lstrip(".")
        if suffix not in PLOT_FORMATS:
            raise PlenaInputError(
                "plot", f"--plot {args.plot}: use one of .{', .'.join(PLOT_FORMATS)}"
            )
    if getattr(args, "export_dir", None):
        export_model(args)  # before searching: the launch files need the real model id
    if args.trace_dir is not None:
        folder = Path(args.trace_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PlenaInputError(
                "trace_dir", f"--trace-dir {args.trace_dir}: {exc.strerror}"
            ) from None
        if not os.access(folder, os.W_OK):
            raise PlenaInputError("trace_dir", f"--trace-dir {args.trace_dir} is not writable")


def recheck_noise(args: argparse.Namespace):
    """The re-check's settings, validated before the search starts."""
    if args.recheck is not None and args.recheck < 0:
        raise PlenaInputError("recheck", "--recheck must be at least 0 (0 turns it off)")
    if args.samples < 0:
        raise PlenaInputError("samples", "--samples must be at least 0")
    loaded = getattr(args, "concurrency", None) or getattr(args, "request_rate", None)
    if args.recheck and loaded:
        raise PlenaInputError(
            "recheck", "the Monte Carlo re-check prices the static batch: no --recheck under load"
        )
    if loaded:
        args.recheck = 0  # under load the percentile is the serving model's, not a re-check's
    elif getattr(args, "percentile", "p50") != "p50" and (args.recheck == 0 or args.samples == 0):
        raise PlenaInputError(
            "percentile",
            f"--percentile {args.percentile} judges the SLA on the Monte Carlo re-check; give "
            "--recheck K > 0 and --samples N > 0",
        )
    from plena_opt.cli.simulate_args import noise_from_flag

    return noise_from_flag(args.noise)


def export_model(args: argparse.Namespace) -> str:
    """The model id the launch files load: --engine-model, --model-path or the catalog id."""
    from plena_opt.api import engine_model
    from plena_opt.cli.common import DEFAULT_MODEL

    return args.engine_model or engine_model(
        None if args.model_path else (args.model or DEFAULT_MODEL), args.model_path
    )
