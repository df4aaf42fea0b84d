"""``plena-opt search``: Pareto-optimal parallel plans for a model on a cluster (Optuna)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from plena_opt import api
from plena_opt.api.recheck import default_top_k
from plena_opt.api.search_io import (
    SearchRequest,
    no_front_message,
)
from plena_opt.api.studies import DEFAULT_STORAGE
from plena_opt.bounds import MAX_SAMPLES, MAX_TOP_K, check_count
from plena_opt.cli.calibration_flag import add_calibration_flag
from plena_opt.cli.commands import help_of
from plena_opt.cli.common import (
    UNITS_EPILOG,
    add_server_arg,
    add_workload_args,
)
from plena_opt.cli.conventions import ENV_STORAGE, env_default
from plena_opt.cli.robust_report import api_robust, check_robust, robust_inputs
from plena_opt.cli.search_args import check_outputs, recheck_noise, request_from_args
from plena_opt.cli.search_flags import add_search_flags
from plena_opt.cli.search_output import write_outputs
from plena_opt.cli.search_report import ProgressReporter, plot_title
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


def check_under_load(args: argparse.Namespace, request: SearchRequest) -> None:
    """What a search under load does not combine with (each refused by its flag)."""
    if not request.under_load:
        return
    from plena_opt.api.serving_loaded import check_loaded_serving

    check_loaded_serving(request)
    for flag, given in (("workers", args.workers is not None),
                        ("design_space", args.design_space is not None)):  # fmt: skip
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
    if not interrupted["flag"]:
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
