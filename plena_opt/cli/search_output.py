"""What a finished search prints and writes (text or JSON, the serving decisions, ``--csv``,
``--plot``, ``--export-dir``, next steps and the recommendation); local and remote mode both
end here, so their output is the same."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from plena_opt import api, jsonio
from plena_opt.api.recheck import render_recheck
from plena_opt.api.search_io import (
    BASIS_MONTE_CARLO,
    SearchResult,
    plot_front,
    render_goodput,
    render_json,
    render_text,
    write_csv,
    write_csv_all,
)
from plena_opt.cli.robust_report import api_robust, render_intervals
from plena_opt.cli.search_args import export_model, request_from_args
from plena_opt.cli.search_report import next_steps


def emit_serving(result: SearchResult) -> None:
    """Print goodput and the aggregated/disaggregated comparison (text mode)."""
    if result.serving.get("goodput_tps_per_device") is not None:
        print(render_goodput(result.serving))
    if "comparison" in result.serving:
        from plena_opt.api.search_io import render_comparison

        print(render_comparison(result.serving["comparison"]))


def export_launches(result: SearchResult, args: argparse.Namespace) -> list[str]:
    """``--export-dir``: launch files of the top plans; what was written (for the report)."""
    if not getattr(args, "export_dir", None):
        return []
    from plena_opt.api import export_moe
    from plena_opt.api.launch import ExportSpec, write_exports
    from plena_opt.cli.common import DEFAULT_MODEL

    spec = ExportSpec(
        model=export_model(args),
        input_len=args.input_seq,
        output_len=args.output_seq,
        memory_fraction=args.memory_fraction or 0.9,
        precision=getattr(args, "precision", None),
        kv_precision=getattr(args, "kv_precision", None),
        **export_moe(
            args.chip,
            None if args.model_path else (args.model or DEFAULT_MODEL),
            args.model_path,
            getattr(args, "moe_kernel", None),
        ),  # fmt: skip
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
