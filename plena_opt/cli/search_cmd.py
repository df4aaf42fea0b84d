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

from plena_opt import api
from plena_opt.api.recheck import DEFAULT_NOISE, DEFAULT_RECHECK, DEFAULT_SAMPLES, render_recheck
from plena_opt.cli.commands import help_of
from plena_opt.cli.common import (
    UNITS_EPILOG,
    add_server_arg,
    add_workload_args,
    problem_from_args,
    pydantic_to_input_error,
)
from plena_opt.cli.conventions import ENV_STORAGE, env_default
from plena_opt.errors import PlenaInputError
from plena_opt.pipeline.simulator import parse_noise
from plena_opt.search.objectives import DEFAULT_OBJECTIVES, OBJECTIVES
from plena_opt.search.output import (
    PLOT_FORMATS,
    no_front_message,
    plot_front,
    render_json,
    render_text,
    write_csv,
)
from plena_opt.search.request import SearchRequest
from plena_opt.search.result import SearchResult
from plena_opt.search.runner import Progress
from plena_opt.search.serving import render_goodput
from plena_opt.search.storage import DEFAULT_STORAGE
from plena_opt.vocabulary import PERCENTILES, SAMPLERS, SERVING_MODES


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "search",
        help=help_of("search"),
        description=__doc__.splitlines()[0],
        epilog=UNITS_EPILOG,
    )
    add_workload_args(p)
    g = p.add_argument_group("search")
    g.add_argument(
        "--batch-sizes",
        default=None,
        help="comma list of global batch sizes to search (e.g. 8,16,64), or 'auto': powers of "
        "two up to the largest batch whose weights + KV + activations fit (--memory-fraction) "
        "(default: --batch-size)",
    )
    g.add_argument(
        "--memory-fraction",
        type=float,
        default=None,
        help="share of device memory for weights + KV + activations, like vLLM's "
        "--gpu-memory-utilization (default 0.9 with --batch-sizes auto; otherwise memory is "
        "judged on the whole capacity)",
    )
    g.add_argument(
        "--objectives",
        default=",".join(DEFAULT_OBJECTIVES),
        help=f"comma list from {','.join(OBJECTIVES)}",
    )
    g.add_argument(
        "--max-ttft-ms", type=float, default=None, help="SLA: TTFT at most, ms (default: no limit)"
    )
    g.add_argument(
        "--min-tps-per-seq",
        type=float,
        default=None,
        help="SLA: decode tokens/s per sequence at least (default: no limit)",
    )
    g.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="auto",
        help="auto: exhaustive when the plan space is small, else a multi-objective sampler; "
        "tpe / nsga2 / gp (needs plena-opt[gp]) / exhaustive (every plan)",
    )
    g.add_argument(
        "--max-tpot-ms",
        type=float,
        default=None,
        help="SLA: time per output token at most, ms (1000 / per-sequence TPS; default: no limit)",
    )
    g.add_argument(
        "--percentile",
        choices=PERCENTILES,
        default="p50",
        help="judge the SLA at this percentile of the Monte Carlo re-check (default p50)",
    )
    g.add_argument(
        "--serving",
        choices=SERVING_MODES,
        default="aggregated",
        help="aggregated plans, disaggregated prefill/decode pools, or both side by side",
    )
    g.add_argument("--trials", type=int, default=200, help="max new plan evaluations (sampler)")
    g.add_argument(
        "--timeout", type=float, default=None, help="stop after S seconds (default: no limit)"
    )
    g.add_argument(
        "--seed",
        type=int,
        default=None,
        help="sampler seed, for reproducible runs (default: random)",
    )
    g.add_argument(
        "--study",
        default=None,
        help="study name; the same name resumes (default: from model, NoC and workload)",
    )
    g.add_argument(
        "--storage",
        default=None,
        help=f"journal file, RDB URL or :memory: (default: ${ENV_STORAGE} or ./{DEFAULT_STORAGE})",
    )
    g.add_argument(
        "--compare-exact",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score the whole space to rate a sampled front (default: if small)",
    )
    r = p.add_argument_group("Monte Carlo re-check of the best plans")
    r.add_argument(
        "--recheck",
        type=int,
        default=DEFAULT_RECHECK,
        metavar="K",
        help=f"re-check the top K front plans by simulation (0: off; default {DEFAULT_RECHECK})",
    )
    r.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_SAMPLES,
        help=f"Monte Carlo samples per re-checked plan (default {DEFAULT_SAMPLES})",
    )
    r.add_argument(
        "--noise",
        default=DEFAULT_NOISE,
        help=f"noise spec of the re-check (default {DEFAULT_NOISE})",
    )
    r.add_argument(
        "--trace-dir",
        default=None,
        help="write Perfetto traces of the re-checked plans to this folder (default: none)",
    )
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    o.add_argument(
        "--csv", default=None, metavar="FILE", help="write the front as CSV (default: none)"
    )
    o.add_argument(
        "--plot", default=None, metavar="FILE.png", help="plot the front (default: none)"
    )
    o.add_argument("--quiet", action="store_true", help="no progress bar")
    o.add_argument(
        "--export-dir",
        default=None,
        metavar="DIR",
        help="write vLLM / SGLang launch files of the top K front plans (K = --export-top; "
        "default: none)",
    )
    o.add_argument("--export-top", type=int, default=5, metavar="K", help="plans to export")
    o.add_argument(
        "--engine-model", default="MODEL", help="model id written into exported launch files"
    )
    add_server_arg(p, "run the search on a plena-opt server (remote mode)")
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
            storage=args.storage,
            compare_exact=args.compare_exact,
            max_tpot_ms=args.max_tpot_ms,
            percentile=args.percentile,
            memory_fraction=args.memory_fraction,
            auto_batch=(args.batch_sizes or "").strip() == "auto",
            serving=args.serving,
        )
    except ValidationError as exc:
        raise pydantic_to_input_error(exc) from exc


class _Bar:
    """One-line progress on stderr (only when it is a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.width = 0

    def __call__(self, p: Progress) -> None:
        if not self.enabled:
            return
        total = f"/{p.total}" if p.total else ""
        hv = f" hv {p.hypervolume:.3f}" if p.hypervolume is not None else ""
        text = (
            f"[{p.stage}] {p.done}{total} plans, {p.trials_per_s:.0f}/s, front {p.front_size}{hv}"
        )
        sys.stderr.write("\r" + text.ljust(self.width))
        self.width = len(text)
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def check_outputs(args: argparse.Namespace) -> None:
    """Fail before searching when an output cannot be written (exit 2, nothing lost)."""
    for flag, path in (("csv", args.csv), ("plot", args.plot)):
        if path is None:
            continue
        folder = Path(path).resolve().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise PlenaInputError(flag, f"--{flag} {path}: folder {folder} is not writable")
    if args.plot is not None:
        suffix = Path(args.plot).suffix.lower().lstrip(".")
        if suffix not in PLOT_FORMATS:
            raise PlenaInputError(
                "plot", f"--plot {args.plot}: use one of .{', .'.join(PLOT_FORMATS)}"
            )
    if getattr(args, "export_top", 1) < 1:
        raise PlenaInputError("export_top", "--export-top must be at least 1")
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
    if args.recheck < 0:
        raise PlenaInputError("recheck", "--recheck must be at least 0 (0 turns it off)")
    if args.samples < 0:
        raise PlenaInputError("samples", "--samples must be at least 0")
    if getattr(args, "percentile", "p50") != "p50" and (args.recheck == 0 or args.samples == 0):
        raise PlenaInputError(
            "percentile",
            f"--percentile {args.percentile} judges the SLA on the Monte Carlo re-check; give "
            "--recheck K > 0 and --samples N > 0",
        )
    return parse_noise(args.noise)


def check_serving_study(request: Any) -> None:
    """Before searching: the comparison's study name must be free or this search's own."""
    from plena_opt.search.request import MEMORY_STORAGE
    from plena_opt.search.storage import open_storage, storage_exists

    url = request.storage or DEFAULT_STORAGE
    if request.serving == "aggregated" or url == MEMORY_STORAGE or not storage_exists(url):
        return
    from plena_opt.search.runner import default_study_name
    from plena_opt.search.serving_store import check_owner

    check_owner(open_storage(url), request.study or default_study_name(request))


def emit_serving(result: SearchResult) -> None:
    """Print goodput and the aggregated/disaggregated comparison (text mode)."""
    if result.serving.get("goodput_tps_per_device") is not None:
        print(render_goodput(result.serving))
    if "comparison" in result.serving:
        from plena_opt.search.serving_compare import render_comparison

        print(render_comparison(result.serving["comparison"]))


def export_launches(result: SearchResult, args: argparse.Namespace) -> None:
    """``--export-dir``: launch files of the top plans."""
    if not getattr(args, "export_dir", None):
        return
    from plena_opt.export.files import write_exports

    paths = write_exports(
        result,
        args.export_dir,
        top_k=args.export_top,
        model=args.engine_model,
        max_len=args.input_seq + args.output_seq,
        memory_fraction=args.memory_fraction or 0.9,
    )
    if not args.json:
        print(f"launch files: {len(paths)} written under {args.export_dir}")


def write_outputs(
    args: argparse.Namespace, result: SearchResult, recheck_docs: list[dict], checks: list[Any]
) -> None:
    """Print the result (``--json``: with the re-check documents), the serving decisions and
    write ``--csv``/``--plot``/``--export-dir``; local and remote mode both end here, so their
    output is the same."""
    if args.json:
        doc = json.loads(render_json(result))
        doc["recheck"] = recheck_docs
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(result))
        if checks:
            print(render_recheck(result, checks, args.samples, args.noise))
        emit_serving(result)
    export_launches(result, args)
    if getattr(args, "csv", None):
        write_csv(result, args.csv)
    if getattr(args, "plot", None):
        plot_front(result, args.plot)


def handle(args: argparse.Namespace) -> int:
    if args.server:
        from plena_opt.cli.remote import remote_search

        return remote_search(args)
    request = request_from_args(args)
    noise = recheck_noise(args)
    check_outputs(args)
    check_serving_study(request)
    interrupted = {"flag": False}

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted["flag"]:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        interrupted["flag"] = True

    bar = _Bar(enabled=not args.quiet and sys.stderr.isatty())
    previous = signal.signal(signal.SIGINT, on_sigint)
    checks = []
    try:
        try:
            problem = request.problem.load()
            result = api.search_plans(
                request, problem, progress=bar, should_stop=lambda: interrupted["flag"]
            )
        finally:
            bar.close()
        if result.partial and result.stop_reason == "cancelled":
            result.stop_reason = "interrupted; every finished trial is saved in the study"
        if args.recheck > 0 and result.front and not interrupted["flag"]:
            try:
                checks = api.recheck_front(
                    result,
                    problem,
                    top_k=args.recheck,
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
    write_outputs(args, result, [rc.to_dict() for rc in checks], checks)
    if interrupted["flag"]:  # Ctrl-C: a partial result, whatever it holds so far
        if not result.front:
            print(f"interrupted before a feasible plan: {no_front_message(result)}",
                  file=sys.stderr)  # fmt: skip
        return 130
    if not result.front:
        print(f"error: {no_front_message(result)}", file=sys.stderr)
        return 2
    return 0
