"""Remote mode: the flags of ``search``/``estimate``/``simulate`` as gRPC requests.

Local files named by flags (``--model-path``, a NoC/memory/chip JSON path) are read here and sent
inline, so the server never reads client paths. The flag rules are the local ones
(``plena_opt.cli.common``), checked before anything is sent.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api.catalog import DEFAULT_MEMORY, DEFAULT_MODEL
from plena_opt.api.wire import noise_to_proto, plan_to_proto
from plena_opt.cli.common import check_sources, chip_carries_memory, plan_from_args
from plena_opt.cli.load_args import wants_load
from plena_opt.errors import PlenaInputError


def _is_path(value: str) -> bool:
    return value.endswith(".json") or "/" in value or "\\" in value or Path(value).is_file()


def _model_name_from_path(path: Path) -> str:
    # Same naming as plena_opt.models.load_model(path=...) (catalog.model_name_from_path).
    if path.is_dir():
        return path.resolve().name
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem if path.suffix.lower() == ".json" else path.name


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


def _first_devices(noc: pb.ProfileSource, devices: int | None) -> pb.ProfileSource:
    """``--devices N``: the first N devices of the NoC (``deepstack.gpu_nodes.first_devices``,
    as local mode takes them), sent inline as that profile's JSON; unset: ``noc`` as given."""
    if devices is None:
        return noc
    import json

    from plena_opt.api.network import first_devices, load_noc_profile

    source: str | dict = noc.name if noc.HasField("name") else json.loads(noc.json)
    try:
        whole = load_noc_profile(source)
        profile = first_devices(whole, devices)
    except (ValueError, OSError) as exc:
        raise PlenaInputError(str(getattr(exc, "field", None) or "noc"), str(exc)) from exc
    if profile is whole:  # all its devices: the profile as given
        return noc
    return pb.ProfileSource(json=json.dumps(profile.to_dict()))


#: Flags that shape the model or memory locally and have no request field: refused with
#: ``--server`` rather than dropped (flag, ``args`` attribute).
LOCAL_ONLY = (
    ("--total-layers", "total_layers"),
    ("--connected-layers", "connected_layers"),
)


#: ``search`` flags of a local run (co-design, worker processes) with no request field.
LOCAL_SEARCH = (
    ("--design-space", "design_space"),
    ("--max-cost", "max_cost"),
    ("--workers", "workers"),
    ("--store-plans", "store_plans"),
)


def _refuse_local_only(args: argparse.Namespace) -> None:
    for flag, attr in LOCAL_ONLY:
        if getattr(args, attr, None) is not None:
            raise PlenaInputError(
                attr, f"{flag} is applied locally and has no request field; run without --server"
            )


def system_from_args(args: argparse.Namespace, default_noc: str | None = None) -> pb.SystemSpec:
    """The ``SystemSpec`` the shared workload flags describe (plena_opt.cli.common)."""
    check_sources(args)
    spec = pb.SystemSpec()
    if args.model_path:
        path = Path(args.model_path)
        spec.model.CopyFrom(
            pb.ModelSource(
                hf_config_json=_read(
                    str(path / "config.json") if path.is_dir() else args.model_path, "model_path"
                ),
                display_name=_model_name_from_path(path),
            )
        )
    else:
        spec.model.CopyFrom(pb.ModelSource(name=args.model or DEFAULT_MODEL))
    noc = _profile(args.noc or default_noc, "noc")
    if noc is not None:
        spec.noc.CopyFrom(_first_devices(noc, getattr(args, "devices", None)))
    _refuse_local_only(args)
    if args.fixed_bandwidth_gbs is not None:
        fb = pb.FixedBandwidthMemory(bandwidth_gbytes_per_s=args.fixed_bandwidth_gbs)
        if args.fixed_capacity_gib is not None:
            fb.capacity_gib = args.fixed_capacity_gib
        spec.memory.CopyFrom(pb.ProfileSource(fixed_bandwidth=fb))
    elif args.memory or not chip_carries_memory(args.chip):  # as locally: a GPU carries its HBM
        spec.memory.CopyFrom(_profile(args.memory or DEFAULT_MEMORY, "memory"))
    chip = _profile(args.chip, "chip")
    if chip is not None:
        spec.chip.CopyFrom(chip)
    return spec


def workload_from_args(args: argparse.Namespace) -> pb.Workload:
    routing = args.routing
    if routing and _is_path(routing):
        raise PlenaInputError("routing", "--routing trace files are not supported with --server")
    unset = getattr(args, "load_batch", 0) is None  # estimate --request-rate: engine's cap
    return pb.Workload(
        batch_size=None if unset else args.batch_size,
        input_seq_len=args.input_seq,
        output_seq_len=args.output_seq,
        frequency_hz=args.frequency_hz,
        overlap_policy=args.overlap,
        include_lm_head=bool(args.include_lm_head),
        routing=routing,
        precision=getattr(args, "precision", None) or "",
        kv_precision=getattr(args, "kv_precision", None) or "",
        engine=getattr(args, "engine", None) or "",  # its kernels, with or without a load
        moe_kernel=getattr(args, "moe_kernel", None) or "",
        eplb_redundant=getattr(args, "eplb_redundant", None) or 0,
    )


def estimate_request_from_args(args: argparse.Namespace) -> pb.EstimateRequest:
    plan = plan_to_proto(plan_from_args(args))
    system = system_from_args(args)
    if args.noc is None:
        system.ClearField("noc")  # single-chip estimate
    request = pb.EstimateRequest(system=system, workload=workload_from_args(args), plan=plan)
    if wants_load(args):  # --engine/--moe-kernel alone: the workload's (static estimate)
        request.load.CopyFrom(load_from_args(args))
        if args.memory_fraction is not None:  # Estimate's; a search sends its option
            request.load.memory_fraction = args.memory_fraction
    return request


def load_from_args(args: argparse.Namespace) -> pb.ServingLoad:
    """``--concurrency/--request-rate/--engine/--engine-version/--range-ratio`` as a
    ``ServingLoad``, checked first as local mode checks them (0 would read as unset)."""
    from plena_opt.api.under_load import check_load

    check_load(args.concurrency, args.request_rate, args.range_ratio or 0.0)
    pools = ("prefill_workers", "prefill_tp", "decode_workers", "decode_tp")
    return pb.ServingLoad(
        concurrency=args.concurrency or 0,
        request_rate=args.request_rate or 0.0,
        engine=args.engine or "",
        engine_version=args.engine_version or "",
        range_ratio=args.range_ratio or 0.0,
        moe_kernel=getattr(args, "moe_kernel", None) or "",
        **{f: getattr(args, f, None) or 0 for f in pools},
        **_speculative_fields(args),
    )


def _speculative_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``--speculative/--speculative-method/--acceptance`` as ``ServingLoad`` fields (checked
    first, as local mode checks them)."""
    spec = getattr(args, "speculative", None)
    if spec is None:
        return {}
    from plena_opt.cli.load_args import speculation_of_args

    s = speculation_of_args(args)
    rates = list(s.acceptance) if args.acceptance is not None else []
    return {"speculative": s.k, "speculative_method": s.method, "acceptance": rates}


def _recheck_top_k(args: argparse.Namespace) -> int:
    """``--recheck`` for the server (which re-checks exactly K): unset → ``DEFAULT_RECHECK``."""
    from plena_opt.api.recheck import DEFAULT_RECHECK

    k = getattr(args, "recheck", 0)
    return DEFAULT_RECHECK if k is None else k


def search_request_from_args(args: argparse.Namespace) -> pb.SearchRequest:
    """The proto ``SearchRequest`` the ``plena-opt search`` flags describe."""
    from plena_opt.cli.search_args import batch_list, precision_list
    from plena_opt.cli.simulate_args import noise_from_flag

    if getattr(args, "storage", None):
        raise PlenaInputError(
            "storage", "--storage names a local store; with --server the server's store is used"
        )
    if getattr(args, "prices", None) is not None:
        raise PlenaInputError(
            "prices", "--prices is read locally; with --server the server's price file is used"
        )
    for flag, attr in LOCAL_SEARCH:  # refused rather than dropped (a plain search ran)
        if getattr(args, attr, None) is not None:
            raise PlenaInputError(
                attr, f"{flag} runs locally and has no request field; run without --server"
            )
    o = pb.SearchOptions(
        trials=args.trials,
        sampler=args.sampler,
        objectives=[k.strip() for k in args.objectives.split(",") if k.strip()],
        study_name=args.study or "",
        batch_sizes=batch_list(args.batch_sizes) or [],
        recheck_top_k=_recheck_top_k(args),
        include_traces=bool(getattr(args, "trace_dir", None)),
        percentile=getattr(args, "percentile", None) or "",
        serving=getattr(args, "serving", None) or "",
        serving_sampler=getattr(args, "serving_sampler", None) or "",
        auto_batch_sizes=(getattr(args, "batch_sizes", None) or "").strip() == "auto",
        precisions=precision_list(getattr(args, "precisions", None)) or [],
    )
    for name, flag in (
        ("seed", "seed"),
        ("max_ttft_ms", "max_ttft_ms"),
        ("min_tps_per_seq", "min_tps_per_seq"),
        ("timeout_seconds", "timeout"),
        ("compare_exact", "compare_exact"),
        ("mc_samples", "samples"),
        ("max_tpot_ms", "max_tpot_ms"),
        ("memory_fraction", "memory_fraction"),
        ("max_cost_per_mtok", "max_cost_per_mtok"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            setattr(o, name, value)
    if getattr(args, "noise", None) is not None:
        o.noise.CopyFrom(noise_to_proto(noise_from_flag(args.noise)))
    request = pb.SearchRequest(
        system=system_from_args(args), workload=workload_from_args(args), options=o
    )
    if getattr(args, "concurrency", None) is not None or getattr(args, "request_rate", None):
        request.load.CopyFrom(load_from_args(args))  # a search under load (issue 23)
    else:  # as locally: --engine alone is the workload's (a static search on its kernels)
        for name in ("engine_version", "range_ratio"):
            if getattr(args, name, None):
                flag = "--" + name.replace("_", "-")
                raise PlenaInputError(name, f"{flag} needs --concurrency or --request-rate")
    return request


def simulate_request_from_args(args: argparse.Namespace) -> pb.SimulateRequest:
    """The proto ``SimulateRequest`` the ``plena-opt simulate`` flags describe."""
    from plena_opt.cli.simulate_args import noise_from_flag, parse_durations

    noise = noise_to_proto(noise_from_flag(args.noise))
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
                plan=plan_to_proto(plan_from_args(args)),
                max_window_steps=args.max_window_steps,
            )
        )
    return request
