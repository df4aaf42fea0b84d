"""Remote mode of the CLI: ``plena-opt search|estimate|simulate --server HOST:PORT``.

The subcommands call ``remote_estimate(args)`` / ``remote_search(args)`` / ``remote_simulate(args)``
with their parsed flags. Local files named by flags (``--model-path``, a NoC/memory/chip JSON path)
are read here and sent inline, so the server never reads client paths. The output is printed by
the same renderers as local mode, from the same numbers (floats travel as IEEE doubles or JSON
``repr``), so it is identical. Server errors become ``PlenaInputError`` (INVALID_ARGUMENT /
NOT_FOUND: ``error: …``, exit 2); an unreachable server prints an error and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
from plena_proto import plena_opt_pb2 as pb

from plena_client.client import PlenaClient
from plena_client.errors import PlenaRpcError
from plena_opt.errors import PlenaInputError, PlenaNotFoundError

USER_ERRORS = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)


class RemoteUnavailable(Exception):
    """The server could not be reached or failed (not a user-input error)."""


def add_server_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--server HOST:PORT`` (remote mode) to a subcommand parser."""
    parser.add_argument("--server", default=None, help="HOST:PORT of a plena-opt server")


def _is_path(value: str) -> bool:
    return value.endswith(".json") or "/" in value or "\\" in value or Path(value).is_file()


def _model_name_from_path(path: Path) -> str:
    # Same naming as plena_opt.models.load_model(path=...): the folder of a config.json, else stem.
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem


def _read(path: str, field: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise PlenaInputError(field, f"--{field.replace('_', '-')} {path!r}: {exc}") from exc


def _profile(value: str | None, field: str) -> pb.ProfileSource | None:
    if value is None:
        return None
    if _is_path(value):
        return pb.ProfileSource(json=_read(value, field))
    return pb.ProfileSource(name=value)


def system_from_args(args: argparse.Namespace, default_noc: str | None = None) -> pb.SystemSpec:
    """The ``SystemSpec`` the shared workload flags describe (plena_opt.cli.common)."""
    from plena_opt.estimate.problem import DEFAULT_MEMORY, DEFAULT_MODEL

    if getattr(args, "fixed_capacity_gib", None) is not None and args.fixed_bandwidth_gbs is None:
        raise PlenaInputError(
            "fixed_capacity_gib", "--fixed-capacity-gib requires --fixed-bandwidth-gbs"
        )
    if args.model and args.model_path:
        raise PlenaInputError("model", "give --model or --model-path, not both")
    if args.memory and getattr(args, "fixed_bandwidth_gbs", None) is not None:
        raise PlenaInputError("memory", "give --memory or --fixed-bandwidth-gbs, not both")
    spec = pb.SystemSpec()
    if args.model_path:
        path = Path(args.model_path)
        spec.model.CopyFrom(
            pb.ModelSource(
                hf_config_json=_read(args.model_path, "model_path"),
                display_name=_model_name_from_path(path),
            )
        )
    else:
        spec.model.CopyFrom(pb.ModelSource(name=args.model or DEFAULT_MODEL))
    noc = _profile(args.noc or default_noc, "noc")
    if noc is not None:
        spec.noc.CopyFrom(noc)
    if getattr(args, "fixed_bandwidth_gbs", None) is not None:
        fb = pb.FixedBandwidthMemory(bandwidth_gbytes_per_s=args.fixed_bandwidth_gbs)
        if args.fixed_capacity_gib is not None:
            fb.capacity_gib = args.fixed_capacity_gib
        spec.memory.CopyFrom(pb.ProfileSource(fixed_bandwidth=fb))
    else:
        spec.memory.CopyFrom(_profile(args.memory or DEFAULT_MEMORY, "memory"))
    chip = _profile(getattr(args, "chip", None), "chip")
    if chip is not None:
        spec.chip.CopyFrom(chip)
    return spec


def workload_from_args(args: argparse.Namespace) -> pb.Workload:
    routing = args.routing
    if routing and _is_path(routing):
        raise PlenaInputError("routing", "--routing trace files are not supported with --server")
    return pb.Workload(
        batch_size=args.batch_size,
        input_seq_len=args.input_seq,
        output_seq_len=args.output_seq,
        frequency_hz=args.frequency_hz,
        overlap_policy=args.overlap,
        include_lm_head=bool(args.include_lm_head),
        routing=routing,
    )


def plan_from_args(args: argparse.Namespace) -> pb.Plan:
    return pb.Plan(
        tp=args.tp,
        ep=args.ep,
        dp=args.dp,
        pp=args.pp,
        cp=args.cp,
        moe_tp_mode=args.moe_tp_mode,
        comm_overlap=args.comm_overlap,
    )


_FLAG_OF_FIELD = {
    "input_seq_len": "input_seq",
    "output_seq_len": "output_seq",
    "overlap_policy": "overlap",
    "trials": "trials",
}


@contextlib.contextmanager
def rpc_errors() -> Iterator[None]:
    """Turn a failed RPC into the CLI's error behaviour (see module docstring)."""
    try:
        yield
    except PlenaRpcError as exc:
        if exc.code in USER_ERRORS:
            leaf = (exc.field or "server").rsplit(".", 1)[-1]
            field = _FLAG_OF_FIELD.get(leaf, leaf)
            cls = PlenaNotFoundError if exc.code == grpc.StatusCode.NOT_FOUND else PlenaInputError
            raise cls(field, exc.message) from None
        raise RemoteUnavailable(f"server error: {exc}") from None


def _client(args: argparse.Namespace) -> PlenaClient:
    timeout = getattr(args, "server_timeout", None)
    return PlenaClient(args.server, **({"timeout": timeout} if timeout else {}))


def _fail(exc: RemoteUnavailable) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


# --- estimate ----------------------------------------------------------------------------------


def plan_metrics_from_proto(m: pb.PlanMetrics) -> Any:
    """Rebuild ``plena_opt.estimate.PlanMetrics`` from its proto (exact doubles)."""
    from plena_opt.estimate import Plan
    from plena_opt.estimate.evaluator import PlanMetrics

    p = m.plan
    return PlanMetrics(
        plan=Plan(p.tp, p.ep, p.dp, p.pp, p.cp, p.moe_tp_mode, p.comm_overlap),
        ttft_seconds=m.ttft_seconds,
        tps=m.tps,
        tps_per_sequence=m.tps_per_sequence,
        energy_per_token_joules=(
            m.energy_per_token_joules if m.HasField("energy_per_token_joules") else None
        ),
        weight_bytes_per_device=m.weight_bytes_per_device,
        kv_cache_bytes_per_device=m.kv_cache_bytes_per_device,
        fits_in_memory=m.fits_in_memory if m.HasField("fits_in_memory") else None,
        bottleneck=m.bottleneck,
        decode_step_seconds=m.decode_step_seconds,
        attribution={a.name: a.value for a in m.attribution_seconds},
        warnings=tuple(m.warnings),
    )


def estimate_request_from_args(args: argparse.Namespace) -> pb.EstimateRequest:
    plan = plan_from_args(args)
    system = system_from_args(args)
    if args.noc is None:
        system.ClearField("noc")  # single-chip estimate
    return pb.EstimateRequest(system=system, workload=workload_from_args(args), plan=plan)


def remote_estimate(args: argparse.Namespace) -> int:
    """``plena-opt estimate --server``: print what local mode prints."""
    from plena_opt.estimate.report import estimate_output, single_chip_output

    request = estimate_request_from_args(args)
    try:
        with _client(args) as client, rpc_errors():
            reply = client.estimate(request.system, request.plan, request.workload)
    except RemoteUnavailable as exc:
        return _fail(exc)
    est = json.loads(reply.estimate_json)
    if reply.mode == "single_chip":
        print(single_chip_output(est, as_json=args.json))
        return 0
    print(estimate_output(est, plan_metrics_from_proto(reply.metrics), as_json=args.json))
    return 0


# --- search ------------------------------------------------------------------------------------


def _batch_sizes(text: str | None) -> list[int]:
    from plena_opt.cli.search_cmd import batch_list

    return batch_list(text) or []


def search_request_from_args(args: argparse.Namespace) -> pb.SearchRequest:
    """The proto ``SearchRequest`` the ``plena-opt search`` flags describe."""
    from plena_opt.pipeline.simulator import parse_noise

    if getattr(args, "storage", None):
        raise PlenaInputError(
            "storage", "--storage names a local store; with --server the server's store is used"
        )
    o = pb.SearchOptions(
        trials=args.trials,
        sampler=args.sampler,
        objectives=[k.strip() for k in args.objectives.split(",") if k.strip()],
        study_name=args.study or "",
        batch_sizes=_batch_sizes(args.batch_sizes),
        recheck_top_k=getattr(args, "recheck", 0),
        include_traces=bool(getattr(args, "trace_dir", None)),
    )
    for name, flag in (
        ("seed", "seed"),
        ("max_ttft_ms", "max_ttft_ms"),
        ("min_tps_per_seq", "min_tps_per_seq"),
        ("timeout_seconds", "timeout"),
        ("compare_exact", "compare_exact"),
        ("mc_samples", "samples"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(o, name, value)
    if getattr(args, "noise", None) is not None:
        o.noise.CopyFrom(noise_to_proto(parse_noise(args.noise)))
    return pb.SearchRequest(
        system=system_from_args(args), workload=workload_from_args(args), options=o
    )


_STAGE_NAMES = {
    pb.STAGE_SEARCH: "search",
    pb.STAGE_RECHECK: "recheck",
    pb.STAGE_TRACES: "traces",
    pb.STAGE_DONE: "done",
}


@dataclass
class RemoteSearch:
    """A remote search: the library ``SearchResult``, the re-check (``RecheckResult.to_dict()``
    documents, trace paths local) and attribute views of it for ``render_recheck``."""

    result: Any
    recheck: list[dict]
    checks: list[Any]


def _check_view(doc: dict) -> Any:
    """Attribute view of a ``RecheckResult.to_dict()`` (what ``render_recheck`` reads)."""
    view = SimpleNamespace(**{k: v for k, v in doc.items() if k != "serving"})
    view.serving = SimpleNamespace(**doc["serving"])
    return view


def run_search_remote(
    args: argparse.Namespace, progress: Any = None, client: PlenaClient | None = None
) -> RemoteSearch:
    """Run the search on ``args.server`` (StreamSearch): result, re-check and traces.

    ``progress`` receives ``plena_opt.search.runner.Progress`` reports like a local search. A
    KeyboardInterrupt asks the server to stop (CancelSearch) and still returns the partial result.
    Traces of the re-check are written to ``args.trace_dir`` under the names local mode uses.
    """
    from plena_opt.search.result import SearchResult
    from plena_opt.search.runner import Progress

    request = search_request_from_args(args)
    own = client is None
    client = client or _client(args)
    timeout = client.search_timeout
    if request.options.HasField("timeout_seconds"):
        timeout = request.options.timeout_seconds + 60.0
    study = ""
    final = None
    chunks: dict[str, list[bytes]] = {}
    try:
        with rpc_errors():
            events = client.stream_search(request, timeout=timeout)
            while True:
                try:
                    event = next(events)
                except StopIteration:
                    break
                except KeyboardInterrupt:
                    if study:
                        client.cancel_search(study)  # the stream then ends with the partial front
                        continue
                    raise
                kind = event.WhichOneof("event")
                if kind == "progress":
                    p = event.progress
                    study = p.study_name
                    if progress is not None:
                        stage = _STAGE_NAMES.get(p.stage, "search")
                        total = p.trials_total or None
                        progress(
                            Progress(
                                stage,
                                p.trials_done,
                                total,
                                p.trials_per_second,
                                p.front_size,
                                p.hypervolume,
                            )
                        )
                elif kind == "trace_chunk":
                    chunks.setdefault(event.trace_chunk.trace_id, []).append(event.trace_chunk.data)
                elif kind == "result":
                    final = event.result
    finally:
        if own:
            client.close()
    if final is None:
        raise RemoteUnavailable("the server ended the search without a result")
    if not final.result_json:  # the server read the front from the study at the deadline
        raise RemoteUnavailable(
            f"the search did not finish before the deadline; {len(final.front)} front plans "
            f"are stored in study {final.study_name!r}"
        )
    result = SearchResult.model_validate_json(final.result_json)
    paths = _write_search_traces(getattr(args, "trace_dir", None), chunks)
    recheck = json.loads(final.recheck_json or "[]")
    for doc in recheck:
        doc["trace_paths"] = [paths[t] for t in doc["trace_paths"] if t in paths]
    return RemoteSearch(result, recheck, [_check_view(d) for d in recheck])


def _write_search_traces(trace_dir: str | None, chunks: dict[str, list[bytes]]) -> dict[str, str]:
    from plena_proto.traces import unpack_trace

    from plena_opt.pipeline.simulator import write_trace

    if not trace_dir:
        return {}
    return {
        name: str(write_trace(Path(trace_dir) / f"{name}.json", unpack_trace(data)))
        for name, data in chunks.items()
    }


def remote_search(args: argparse.Namespace) -> int:
    """``plena-opt search --server``: run remotely, print exactly what local mode prints."""
    from plena_opt.cli.search_cmd import check_outputs, recheck_noise
    from plena_opt.search.output import (
        no_front_message,
        plot_front,
        render_json,
        render_text,
        write_csv,
    )
    from plena_opt.api.recheck import render_recheck

    recheck_noise(args)  # same checks as local mode, before anything runs
    check_outputs(args)
    try:
        remote = run_search_remote(args)
    except RemoteUnavailable as exc:
        return _fail(exc)
    result = remote.result
    if args.json:
        doc = json.loads(render_json(result))
        doc["recheck"] = remote.recheck
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(result))
        if remote.checks:
            print(render_recheck(result, remote.checks, args.samples, args.noise))
    if getattr(args, "csv", None):
        write_csv(result, args.csv)
    if getattr(args, "plot", None):
        plot_front(result, args.plot)
    if not result.front:  # same message as local mode (plena_opt.cli.search_cmd)
        print(f"error: {no_front_message(result)}", file=sys.stderr)
        return 2
    return 0


# --- simulate ----------------------------------------------------------------------------------


def noise_to_proto(spec: Any) -> pb.NoiseSpec:
    """``plena_opt.pipeline.NoiseSpec`` (validated locally) → proto."""
    msg = pb.NoiseSpec(
        version=spec.version, jitter_sigma=spec.jitter_sigma, rank_sigma=spec.rank_sigma
    )
    if spec.straggler is not None:
        st = spec.straggler
        msg.straggler.CopyFrom(
            pb.StragglerNoise(
                probability=st.probability, factor_low=st.factor_low, factor_high=st.factor_high
            )
        )
    if spec.moe is not None:
        m = spec.moe
        msg.moe.CopyFrom(
            pb.MoeImbalanceNoise(
                experts=m.experts,
                top_k=m.top_k,
                ep=m.ep,
                tokens=m.tokens,
                alpha=m.alpha,
                fraction=m.fraction,
                op_types=m.op_types or [],
            )
        )
    return msg


def simulate_request_from_args(args: argparse.Namespace) -> pb.SimulateRequest:
    """The proto ``SimulateRequest`` the ``plena-opt simulate`` flags describe."""
    from plena_opt.cli.simulate_cmd import _noise, parse_durations

    noise = noise_to_proto(_noise(args.noise))
    if args.samples < 0:
        raise PlenaInputError("samples", "--samples must be >= 0")
    request = pb.SimulateRequest(
        noise=noise, samples=args.samples, seed=args.seed, include_traces=bool(args.trace)
    )
    if args.schedule:
        if args.durations is None:
            raise PlenaInputError("durations", "--durations is required with --schedule")
        request.training.CopyFrom(
            pb.TrainingSchedule(
                schedule=args.schedule,
                pp_size=args.pp,
                vpp_size=args.vpp,
                microbatches=args.microbatches,
                base_ms=parse_durations(args.durations),
            )
        )
    else:
        request.inference.CopyFrom(
            pb.InferenceTarget(
                system=system_from_args(args),
                workload=workload_from_args(args),
                plan=plan_from_args(args),
                max_window_steps=args.max_window_steps,
            )
        )
    return request


def _write_remote_traces(path: str, reply: Any) -> list[str]:
    """Write the returned traces where local mode writes them (deterministic at ``path``,
    others beside it as ``<stem>.<name><suffix>``)."""
    from plena_proto.traces import unpack_trace

    from plena_opt.pipeline.simulator import write_trace

    base = Path(path)
    out = []
    for trace in reply.traces:
        name = trace.trace_id
        target = base if name == "deterministic" else base.with_suffix(f".{name}{base.suffix}")
        out.append(str(write_trace(target, unpack_trace(trace))))
    return out


def remote_simulate(args: argparse.Namespace) -> int:
    """``plena-opt simulate --server``: print what local mode prints (same tables and JSON)."""
    from plena_opt.pipeline.report import render_schedule, render_serving

    request = simulate_request_from_args(args)
    try:
        with _client(args) as client, rpc_errors():
            reply = client.simulate(request)
    except RemoteUnavailable as exc:
        return _fail(exc)
    doc = json.loads(reply.result_json)
    traces = _write_remote_traces(args.trace, reply) if args.trace else []

    if args.json:
        doc["trace_paths"] = traces
        print(json.dumps(doc, indent=2))
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
