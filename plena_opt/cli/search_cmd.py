"""``plena-opt search``: Pareto-optimal parallel plans for a model on a cluster (Optuna)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from plena_opt import api, jsonio
from plena_opt.api.recheck import default_top_k, render_recheck
from plena_opt.api.search_io import (
    BASIS_MONTE_CARLO,
    PLOT_FORMATS,
    SearchRequest,
    SearchResult,
    no_front_message,
    plot_front,
    render_goodput,
    render_json,
    render_text,
    write_csv,
    write_csv_all,
)
from plena_opt.api.studies import DEFAULT_STORAGE
from plena_opt.bounds import MAX_SAMPLES, MAX_TOP_K, check_count
from plena_opt.cli.calibration_flag import add_calibration_flag
from plena_opt.cli.commands import help_of
from plena_opt.cli.common import (
    UNITS_EPILOG,
    add_server_arg,
    add_workload_args,
    problem_from_args,
    pydantic_to_input_error,
)
from plena_opt.cli.conventions import ENV_STORAGE, env_default
from plena_opt.cli.robust_report import api_robust, check_robust, render_intervals, robust_inputs
from plena_opt.cli.search_flags import add_search_flags
from plena_opt.cli.search_report import ProgressReporter, next_steps, plot_title
from plena_opt.cli.worker_cmd import check_store_plans, search_with_workers
from plena_opt.errors import PlenaInputError


def register(subparsers: Any) -> None:
    """Add ``plena-opt search`` and its flags (``plena_opt.cli.search_flags``)."""
    p = subparsers.add_parser(
        "search",
        help=help_of("search"),
        description=__doc__.splitlines()[0],
        epilog=UNITS_EPILOG,
    )
    add_workload_args(p)
    add_search_flags(p)
    add_server_arg(p, "run the search on a plena-opt server (remote mode)")
    add_calibration_flag(p)
    p.set_defaults(func=handle, storage=env_default(ENV_STORAGE))


def batch_list(text: str | None) -> list[int] | None:
    """``--batch-sizes 8,16,64`` as integers (None when the flag is absent or ``auto``)."""
    if text is None or text.strip() == "auto":
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise PlenaInputError(
            "batch_sizes", f"--batch-sizes must be a comma list of integers, got {text!r}"
        ) from exc


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
    from plena_opt.cli.simulate_cmd import noise_from_flag

    return noise_from_flag(args.noise)


def check_under_load(args: argparse.Namespace, request: SearchRequest) -> None:
    """What a search under load does not combine with (each refused by its flag)."""
    if not request.under_load:
        return
    for flag, given in (("workers", args.workers is not None),
                        ("design_space", args.design_space is not None),
                        ("serving", request.serving != "aggregated")):  # fmt: skip
        if given:
            raise PlenaInputError(
                flag,
                f"--{flag.replace('_', '-')} is not priced under load; drop it or "
                "--concurrency/--request-rate",
            )


def check_serving_study(request: Any) -> None:
    """Before searching: the comparison's study name must be free or this search's own."""
    from plena_opt.api.search_io import MEMORY_STORAGE
    from plena_opt.api.studies import open_storage, storage_exists

    url = request.storage or DEFAULT_STORAGE
    if request.serving == "aggregated" or url == MEMORY_STORAGE or not storage_exists(url):
        return
    from plena_opt.api.search_io import default_study_name
    from plena_opt.api.studies import check_owner

    check_owner(open_storage(url), request.study or default_study_name(request))


def emit_serving(result: SearchResult) -> None:
    """Print goodput and the aggregated/disaggregated comparison (text mode)."""
    if result.serving.get("goodput_tps_per_device") is not None:
        print(render_goodput(result.serving))
    if "comparison" in result.serving:
        from plena_opt.api.search_io import render_comparison

        print(render_comparison(result.serving["comparison"]))


def export_model(args: argparse.Namespace) -> str:
    """The model id the launch files load: --engine-model, --model-path or the catalog id."""
    from plena_opt.api import engine_model
    from plena_opt.cli.common import DEFAULT_MODEL

    return args.engine_model or engine_model(
        None if args.model_path else (args.model or DEFAULT_MODEL), args.model_path
    )


def export_launches(result: SearchResult, args: argparse.Namespace) -> list[str]:
    """``--export-dir``: launch files of the top plans; what was written (for the report)."""
    if not getattr(args, "export_dir", None):
        return []
    from plena_opt.api.launch import ExportSpec, write_exports

    spec = ExportSpec(
        model=export_model(args),
        input_len=args.input_seq,
        output_len=args.output_seq,
        memory_fraction=args.memory_fraction or 0.9,
        precision=getattr(args, "precision", None),
        kv_precision=getattr(args, "kv_precision", None),
    )
    paths = write_exports(result, args.export_dir, top_k=args.export_top, spec=spec)
    return [f"{len(paths)} launch files under {args.export_dir}"]


def write_outputs(
    args: argparse.Namespace,
    result: SearchResult,
    recheck_docs: list[dict],
    checks: list[Any],
    title: str | None = None,
) -> None:
    """Print the result (``--json``: with the re-check documents) and the serving decisions,
    write ``--csv``, ``--csv-all``, ``--plot`` and ``--export-dir``, then say what was written and
    how to go on, ending with the one recommendation (``api.recommend``); local and remote mode
    both end here, so their output is the same."""
    rec = api.recommend(result, request_from_args(args)) if result.front or result.serving else None
    if args.json:
        doc = json.loads(render_json(result))
        doc["recheck"] = recheck_docs
        doc["recheck_basis"] = BASIS_MONTE_CARLO
        doc["recommendation"] = (
            None if rec is None else api_robust().recommendation_interval(rec.to_dict(), result)
        )
        doc["goodput_interval"] = api_robust().goodput_interval(result, request_from_args(args))
        doc["robust_search"] = bool(getattr(args, "robust", False))
        doc["robust_peak_factor"] = api_robust().ROBUST_PEAK_FACTOR
        print(jsonio.dumps(doc, indent=2))
    else:
        print(render_text(result))
        gp = api_robust().goodput_interval(result, request_from_args(args))
        if text := render_intervals(result, bool(getattr(args, "robust", False)), gp):
            print(text)
        if checks:
            print(render_recheck(result, checks, args.samples, args.noise, args.recheck))
        emit_serving(result)
    finish_output(args, result, checks, title, rec)


def write_files(
    args: argparse.Namespace, result: SearchResult, checks: list[Any], title: str | None = None
) -> list[str]:
    """Write ``--csv``, ``--csv-all``, ``--plot`` and ``--export-dir``; what was written
    (traces included)."""
    written = []
    if getattr(args, "csv", None):
        write_csv(result, args.csv)
        written.append(f"{args.csv} (front, {len(result.front)} plans)")
    if getattr(args, "csv_all", None):
        n = write_csv_all(result, args.csv_all)
        written.append(f"{args.csv_all} (every scored plan, {n} rows)")
    if getattr(args, "plot", None):
        plot_front(result, args.plot, title=title)
        written.append(f"{args.plot} (plot)")
    traces = [p for rc in checks for p in (rc.trace_paths or [])]
    if traces:
        written.append(f"{len(traces)} traces in {args.trace_dir}: {', '.join(traces)}")
    return written + export_launches(result, args)


def finish_output(
    args: argparse.Namespace,
    result: SearchResult,
    checks: list[Any],
    title: str | None = None,
    rec: Any = None,
) -> None:
    """Write the output files, then say what was written and how to go on (the recommendation
    ``rec`` last): on stdout after the text, on stderr after ``--json`` (stdout stays one
    document)."""
    steps = next_steps(args, result, write_files(args, result, checks, title), rec)
    if steps:
        print("\n".join(steps), file=sys.stderr if args.json else sys.stdout)


def check_counts(args: argparse.Namespace) -> None:
    """The count flags within the bounds every front end shares (``plena_opt.bounds``)."""
    if args.recheck is not None:  # None: sized by the cost model (``api.recheck``)
        check_count(args.recheck, "recheck", "--recheck", 0, MAX_TOP_K)
    check_count(args.samples, "samples", "--samples", 0, MAX_SAMPLES)
    check_count(args.export_top, "export_top", "--export-top", 1, MAX_TOP_K)
    check_robust(args)


def handle(args: argparse.Namespace) -> int:
    check_counts(args)
    if args.server and args.csv_all:
        raise PlenaInputError(
            "csv_all", "--csv-all needs a local search (a server returns the front, not every plan)"
        )
    if args.server:
        from plena_opt.cli.remote import remote_search

        return remote_search(args)
    request = request_from_args(args)
    check_store_plans(args)
    check_under_load(args, request)
    if args.design_space is not None:
        from plena_opt.cli.codesign_report import run as run_codesign

        return run_codesign(args, request)
    if args.max_cost is not None:
        raise PlenaInputError("max_cost", "--max-cost needs --design-space")
    noise = recheck_noise(args)
    check_outputs(args)
    check_serving_study(request)
    interrupted = {"flag": False}

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted["flag"]:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        interrupted["flag"] = True

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the CLI's choice, not the library's
    bar = ProgressReporter(quiet=args.quiet)
    previous = signal.signal(signal.SIGINT, on_sigint)
    checks = []
    try:
        try:
            judged, nominal = request, request.problem.load()  # as asked (before --robust)
            request, problem = robust_inputs(args, request, nominal)
            if args.workers is not None:
                request = search_with_workers(request, args)
                if request is None:  # --workers 0: the queue is ready for remote workers
                    return 0
            result = api.search_plans(
                request, problem, progress=bar, should_stop=lambda: interrupted["flag"]
            )
        finally:
            bar.close()
        if result.partial and result.stop_reason == "cancelled":
            result.stop_reason = "interrupted; every finished trial is saved in the study"
        api_robust().annotate_front(result, judged, nominal, derated=bool(args.robust))
        if args.recheck != 0 and result.front and not interrupted["flag"]:
            try:
                checks = api.recheck_front(
                    result,
                    problem,
                    top_k=default_top_k(args.recheck, request),
                    samples=args.samples,
                    noise=noise,
                    seed=args.seed or 0,
                    trace_dir=args.trace_dir,
                    should_stop=lambda: interrupted["flag"],
                )
            except KeyboardInterrupt:  # a second Ctrl-C: drop the re-check, keep the front
                interrupted["flag"] = True
                checks = []
    finally:
        signal.signal(signal.SIGINT, previous)
    if not interrupted["flag"] and not request.under_load:
        api.decide_serving(result, checks, request, problem)
    write_outputs(args, result, [rc.to_dict() for rc in checks], checks, plot_title(request))
    if interrupted["flag"]:  # Ctrl-C: a partial result, whatever it holds so far
        if not result.front:
            print(f"interrupted before a feasible plan: {no_front_message(result)}",
                  file=sys.stderr)  # fmt: skip
        return 130
    if not result.front:
        print(f"error: {no_front_message(result)}", file=sys.stderr)
        return 2
    return 0
