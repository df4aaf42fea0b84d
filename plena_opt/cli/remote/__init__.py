"""Remote mode of the CLI: ``plena-opt search|estimate|simulate --server HOST:PORT``.

The subcommands call ``remote_estimate(args)`` / ``remote_search(args)`` / ``remote_simulate(args)``
with their parsed flags. The output is printed by the same renderers as local mode, from the same
numbers (floats travel as IEEE doubles or JSON ``repr``), so it is identical.
"""

from __future__ import annotations

import argparse
import json
import sys

from plena_opt import jsonio
from plena_opt.cli.load_args import print_under_load
from plena_opt.cli.remote.requests import (
    estimate_request_from_args,
    search_request_from_args,
    simulate_request_from_args,
)
from plena_opt.cli.remote.session import (
    RemoteSearch,
    RemoteUnavailable,
    client_of,
    fail,
    received_traces,
    rpc_errors,
    run_search_remote,
)

__all__ = [
    "RemoteSearch",
    "RemoteUnavailable",
    "estimate_request_from_args",
    "remote_estimate",
    "remote_search",
    "remote_simulate",
    "remote_studies",
    "run_search_remote",
    "search_request_from_args",
    "simulate_request_from_args",
]


def remote_estimate(args: argparse.Namespace) -> int:
    """``plena-opt estimate --server``: print what local mode prints."""
    from plena_opt.api.estimates import PlanEstimate
    from plena_opt.api.wire import cost_from_proto, metrics_from_proto

    request = estimate_request_from_args(args)
    try:
        with client_of(args) as client, rpc_errors():
            load = request.load if request.HasField("load") else None
            reply = client.estimate(request.system, request.plan, request.workload, load=load)
    except RemoteUnavailable as exc:
        return fail(exc)
    if reply.HasField("disaggregated_under_load"):
        return _print_disaggregated(args, reply.disaggregated_under_load)
    doc = json.loads(reply.estimate_json)
    if reply.mode == "single_chip":
        result = PlanEstimate("single_chip", doc)
    else:
        metrics = metrics_from_proto(reply.metrics)
        result = PlanEstimate("distributed", doc, metrics, cost_from_proto(reply.metrics))
    if not reply.HasField("under_load"):
        print(result.to_text(as_json=args.json))
        return 0
    from plena_opt.api.under_load_wire import under_load_from_proto

    load = under_load_from_proto(reply.under_load)
    verdict = None
    if reply.HasField("speculative"):
        from plena_opt.api.speculative import verdict_from_proto

        verdict = verdict_from_proto(reply.speculative)
    return print_under_load(args, result, load, verdict)


def _print_disaggregated(args: argparse.Namespace, msg: object) -> int:
    """Pools under load, as local mode prints them (``estimate_cmd._print_disaggregated``)."""
    from plena_opt.api.under_load_wire import disagg_from_proto
    from plena_opt.jsonio import dumps

    load = disagg_from_proto(msg)  # type: ignore[arg-type]
    if args.json:
        print(dumps({"mode": "disaggregated", "serving_under_load": load.to_dict()}, indent=2))
    else:
        print(load.to_text().lstrip("\n"))
    return 0


def remote_search(args: argparse.Namespace) -> int:
    """``plena-opt search --server``: run remotely, print exactly what local mode prints."""
    from plena_opt.api.search_io import no_front_message
    from plena_opt.cli.robust_report import annotate_remote
    from plena_opt.cli.search_args import check_outputs, recheck_noise
    from plena_opt.cli.search_output import write_outputs

    recheck_noise(args)  # same checks as local mode, before anything runs
    check_outputs(args)
    try:
        remote = run_search_remote(args)
    except RemoteUnavailable as exc:
        return fail(exc)
    result = remote.result
    annotate_remote(args, result)
    write_outputs(args, result, remote.recheck, remote.checks, _plot_title(args))
    if not result.front:  # same message as local mode (plena_opt.cli.search_cmd)
        print(f"error: {no_front_message(result)}", file=sys.stderr)
        return 2
    return 0


def remote_studies(args: argparse.Namespace) -> list[dict] | None:
    """``plena-opt studies --server``: the rows local mode lists (None: server unreachable)."""
    try:
        with client_of(args) as client, rpc_errors():
            reply = client.list_studies()
    except RemoteUnavailable as exc:
        fail(exc)
        return None
    if reply.truncated:
        print(f"note: the server lists its first {len(reply.studies)} studies", file=sys.stderr)
    return [json.loads(s.summary_json) for s in reply.studies]


def _plot_title(args: argparse.Namespace) -> str | None:
    """The plot's title (model, cluster, workload) as local mode names it; None without --plot."""
    from plena_opt.cli.search_args import request_from_args
    from plena_opt.cli.search_report import plot_title
    from plena_opt.errors import PlenaInputError

    if not getattr(args, "plot", None):
        return None
    try:
        return plot_title(request_from_args(args))
    except PlenaInputError:  # the server accepted what this machine cannot describe: a plain title
        return None


def remote_simulate(args: argparse.Namespace) -> int:
    """``plena-opt simulate --server``: print what local mode prints (same tables and JSON)."""
    from plena_opt.api.simulation_io import render_schedule, render_serving
    from plena_opt.cli.simulate_args import write_traces

    request = simulate_request_from_args(args)
    try:
        with client_of(args) as client, rpc_errors():
            reply = client.simulate(request)
    except RemoteUnavailable as exc:
        return fail(exc)
    doc = json.loads(reply.result_json)
    traces = []
    if args.trace:
        traces = write_traces(args.trace, received_traces({t.trace_id: t for t in reply.traces}))
    if args.json:
        doc["trace_paths"] = traces
        print(jsonio.dumps(doc, indent=2))
    elif reply.mode == "training":
        print(render_schedule(doc, traces))
    else:
        print(
            render_serving(
                doc,
                traces,
                micro_batches=reply.micro_batches,
                decode_steps=reply.decode_steps,
                n_ops=reply.n_ops,
            )
        )
    return 0
