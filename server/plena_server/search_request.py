"""Search/StreamSearch request mapping: a proto ``SearchRequest`` → the library's validated
``SearchRequest`` and loaded ``EvaluatorInputs``, with errors naming the proto field."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api import limits as bounds
from plena_opt.api.catalog import (
    DEFAULT_MEMORY,
    MAX_WORKLOAD,
    EvaluatorInputs,
    InlineDocument,
    ProblemSpec,
    Workload,
    chip_carries_memory,
)
from plena_opt.api.search_io import SearchRequest
from plena_opt.api.simulation_io import NoiseSpec
from plena_opt.errors import PlenaInputError
from plena_server import convert
from plena_server.engine_kernel import (
    check_kernel,
    check_static_engine,
    kernel_field,
    search_engine,
)
from plena_server.errors import ServerLimitError
from plena_server.limits import ServerLimits

MAX_BATCH_SIZES = bounds.MAX_BATCH_SIZES
_STUDY_NAME = re.compile(r"[A-Za-z0-9._:@+-]{1,128}")
_OPTION_OF_FIELD = {
    "batch_sizes": "batch_sizes",
    "timeout": "timeout_seconds",
    "study": "study_name",
    "auto_budget_s": "auto_budget_seconds",
    "auto_batch": "auto_batch_sizes",
    "": "precisions",  # the request's one cross-field rule: --precision with --precisions
}


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def _inline(text: str, name: str = "") -> InlineDocument:
    return InlineDocument(document=json.loads(text), name=name, text=text)


def _source(src: pb.ProfileSource) -> str | InlineDocument | None:
    which = src.WhichOneof("source")
    if which == "name":
        return src.name
    if which == "json":
        return _inline(src.json)
    return None


def problem_spec(system: pb.SystemSpec, workload: Workload) -> ProblemSpec:
    """The ``ProblemSpec`` of a request whose system has been loaded (so inline documents are
    valid JSON): built-in names as given, inline documents by content."""
    kw: dict[str, Any] = {}
    if system.model.WhichOneof("source") == "name":
        kw["model"] = system.model.name
    else:
        kw["model"] = _inline(system.model.hf_config_json, system.model.display_name or "custom")
    kw["noc"] = _source(system.noc)
    mem = system.memory
    if mem.WhichOneof("source") == "fixed_bandwidth":
        kw["memory"] = None
        kw["fixed_bandwidth_gbs"] = mem.fixed_bandwidth.bandwidth_gbytes_per_s
        if mem.fixed_bandwidth.HasField("capacity_gib"):
            kw["fixed_capacity_gib"] = mem.fixed_bandwidth.capacity_gib
    else:
        kw["memory"] = _source(mem) or DEFAULT_MEMORY
    kw["chip"] = _source(system.chip)
    if mem.WhichOneof("source") is None and chip_carries_memory(kw["chip"]):
        kw["memory"] = None  # a GPU chip carries its HBM
    kw.update(
        batch_size=workload.batch_size,
        input_seq=workload.input_seq_len,
        output_seq=workload.output_seq_len,
        include_lm_head=workload.include_lm_head,
        overlap=workload.overlap_policy,
        routing=workload.routing,
        frequency_hz=workload.frequency_hz,
        precision=workload.precision,
        kv_precision=workload.kv_precision,
        engine=workload.engine,
        moe_kernel=None if workload.moe_kernel == "default" else workload.moe_kernel,
        eplb_redundant=workload.eplb_redundant or None,
    )
    return ProblemSpec(**kw)


def _check_options(o: pb.SearchOptions, limits: ServerLimits) -> None:
    trials = _opt(o, "trials")
    if trials is not None and trials > limits.max_trials:
        raise ServerLimitError(
            "options.trials", f"options.trials is above the server limit of {limits.max_trials}"
        )
    if len(o.batch_sizes) > MAX_BATCH_SIZES:
        raise ServerLimitError(
            "options.batch_sizes", f"options.batch_sizes has more than {MAX_BATCH_SIZES} entries"
        )
    top = MAX_WORKLOAD["batch_size"]
    if any(not 1 <= b <= top for b in o.batch_sizes):
        raise PlenaInputError(
            "options.batch_sizes", f"options.batch_sizes: each must be between 1 and {top:,}"
        )
    seed = _opt(o, "seed")
    if seed is not None and not 0 <= seed < 2**32:
        raise PlenaInputError("options.seed", "options.seed must be between 0 and 2**32 - 1")
    if o.study_name and not _STUDY_NAME.fullmatch(o.study_name):
        raise PlenaInputError(
            "options.study_name",
            "options.study_name must be 1-128 characters from A-Z a-z 0-9 . _ : @ + -",
        )
    check_recheck(o, limits)
    for name in (
        "max_ttft_ms",
        "min_tps_per_seq",
        "timeout_seconds",
        "auto_budget_seconds",
        "max_tpot_ms",
        "memory_fraction",
        "max_cost_per_mtok",
    ):
        v = _opt(o, name)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise PlenaInputError(f"options.{name}", f"options.{name} must be greater than zero")


def search_request(
    request: pb.SearchRequest, storage: str | None, limits: ServerLimits
) -> tuple[SearchRequest, EvaluatorInputs]:
    """Validate a proto request; return (``SearchRequest``, ``EvaluatorInputs``)."""
    from pydantic import ValidationError

    request = search_engine(request)  # the load's engine: its own, else the workload's
    system = convert.load_system(request.system, limits)
    load = request.load if request.HasField("load") else None
    if load is None:
        check_static_engine(system.chip, request.workload)
    workload = convert.to_workload(request.workload, load=load)
    check_kernel(system, workload, kernel_field(load))
    o = request.options
    _check_options(o, limits)
    kw: dict[str, Any] = {
        "problem": problem_spec(request.system, workload),
        "batch_sizes": list(o.batch_sizes) or None,
        "max_ttft_ms": _opt(o, "max_ttft_ms"),
        "min_tps_per_seq": _opt(o, "min_tps_per_seq"),
        "timeout": _opt(o, "timeout_seconds"),
        "seed": _opt(o, "seed") or 0,  # unset: the CLI's default seed, so fronts agree
        "study": o.study_name or None,
        "storage": storage or _default_store(),
        "compare_exact": _opt(o, "compare_exact"),
        "max_tpot_ms": _opt(o, "max_tpot_ms"),
        "memory_fraction": _opt(o, "memory_fraction"),
        "max_cost_per_mtok": _opt(o, "max_cost_per_mtok"),
        "auto_batch": o.auto_batch_sizes,
        "precisions": list(o.precisions) or None,
    }
    if o.percentile:
        kw["percentile"] = o.percentile
    if o.serving:
        kw["serving"] = o.serving
    if o.serving_sampler:
        kw["serving_sampler"] = o.serving_sampler
    if o.objectives:
        kw["objectives"] = list(o.objectives)
    if o.sampler:
        kw["sampler"] = o.sampler
    if o.HasField("trials"):
        kw["trials"] = o.trials
    if o.HasField("auto_budget_seconds"):
        kw["auto_budget_s"] = o.auto_budget_seconds
    if request.HasField("load"):
        kw.update(_load(request, o))
    try:
        req = SearchRequest(**kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        field = "options." + _OPTION_OF_FIELD.get(loc, loc)
        msg = err["msg"].removeprefix("Value error, ")
        raise PlenaInputError(field, f"{field}: {msg}") from exc
    inputs = EvaluatorInputs(system.model, system.noc, system.memory, workload, system.chip)
    if req.under_load:
        from plena_opt.api.serving_loaded import check_loaded_serving
        from plena_opt.api.under_load import check_target_engine

        try:
            check_target_engine(inputs, req.engine or "vllm", req.engine_version)
        except PlenaInputError as exc:
            raise convert.qualify_load(exc) from exc
        try:
            check_loaded_serving(req)
        except PlenaInputError as exc:
            raise PlenaInputError("options.serving_sampler", exc.rule) from exc
    for prec in req.precisions or []:
        try:
            inputs.evaluator(req.batch_list()[0], prec)
        except PlenaInputError as exc:
            raise PlenaInputError(
                "options.precisions", f"options.precisions {prec}: {exc}"
            ) from exc
    return req, inputs


def _load(request: pb.SearchRequest, o: pb.SearchOptions) -> dict[str, Any]:
    """The search's serving workload (issue 23), checked as ``Estimate`` checks it (errors name
    ``load.<field>``); a re-check of the static batch does not go with it."""
    from plena_opt.api.under_load import check_load
    from plena_opt.api.under_load_wire import load_kwargs

    kw = load_kwargs(request.load)
    pools = [f for f in ("prefill_workers", "prefill_tp", "decode_workers", "decode_tp")
             if getattr(request.load, f)]  # fmt: skip
    if pools:
        raise PlenaInputError(
            f"load.{pools[0]}",
            "disaggregated pools (load.prefill_workers, prefill_tp, decode_workers, decode_tp) "
            "are priced by Estimate, not searched",
        )
    if request.load.HasField("memory_fraction"):
        raise PlenaInputError(
            "load.memory_fraction",
            "load.memory_fraction is Estimate's; a search takes options.memory_fraction",
        )
    if request.load.speculative or request.load.acceptance or request.load.speculative_method:
        raise PlenaInputError(
            "load.speculative", "speculative decoding is priced by Estimate, not searched"
        )
    try:
        check_load(kw["concurrency"], kw["request_rate"], kw["range_ratio"])
    except PlenaInputError as exc:
        raise convert.qualify_load(exc) from exc
    if o.HasField("recheck_top_k") and o.recheck_top_k > 0:
        raise PlenaInputError(
            "options.recheck_top_k",
            "the Monte Carlo re-check prices the static batch: no re-check under load",
        )
    return kw


def check_recheck(o: pb.SearchOptions, limits: ServerLimits) -> None:
    k = _opt(o, "recheck_top_k")
    if k is not None and not 0 <= k <= limits.max_recheck_top_k:
        raise PlenaInputError(
            "options.recheck_top_k",
            f"options.recheck_top_k must be between 0 and {limits.max_recheck_top_k}",
        )
    n = _opt(o, "mc_samples")
    if n is not None and n < 1:
        raise PlenaInputError("options.mc_samples", "options.mc_samples must be greater than zero")
    if n is not None and n > limits.max_samples:
        raise ServerLimitError(
            "options.mc_samples",
            f"options.mc_samples is above the server limit {limits.max_samples}",
        )
    t = _opt(o, "max_trace_bytes")
    if t is not None and not 0 <= t <= limits.max_trace_bytes:
        raise PlenaInputError(
            "options.max_trace_bytes",
            f"options.max_trace_bytes must be between 0 and {limits.max_trace_bytes}",
        )
    if o.HasField("noise"):
        recheck_noise(o)  # validate now, before the search runs


def recheck_noise(o: pb.SearchOptions) -> NoiseSpec:
    """The re-check's noise (unset: the CLI's ``--noise`` default; errors name
    ``options.noise…``)."""
    from plena_opt.api.recheck import DEFAULT_NOISE

    try:
        return convert.noise_of(o, DEFAULT_NOISE)
    except PlenaInputError as exc:
        raise type(exc)(f"options.{exc.field}", exc.rule) from exc
    except ServerLimitError as exc:
        raise ServerLimitError(f"options.{exc.field}", f"options.{exc}") from exc


def search_field(exc: PlenaInputError) -> PlenaInputError:
    """A library error of the search named by its proto field."""
    mapping = {"study": "options.study_name", "storage": "storage", "noc": "system.noc"}
    if exc.field in mapping and "." not in exc.field:
        return type(exc)(mapping[exc.field], exc.rule)
    return exc


def _default_store() -> str:
    """The server's study store when it was started without ``--storage`` (never ``:memory:``
    by accident: the library default is for the library, the service keeps its studies)."""
    from plena_opt.api.studies import DEFAULT_STORAGE

    return DEFAULT_STORAGE
