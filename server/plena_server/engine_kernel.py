"""A request's ``Workload`` message as the library ``Workload``'s keyword arguments: its fields,
and the engine and MoE kernel it names (``plena-opt estimate --engine/--moe-kernel`` without a
load) or its ``ServingLoad`` names (``plena_opt.api.moe_kernel``)."""

from __future__ import annotations

import math
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api.moe_kernel import ENGINES, FUSED_QUANT_ENGINES, MOE_KERNELS
from plena_opt.errors import PlenaInputError, echo
from plena_opt.vocabulary import MOE_ROUTING_MODES

__all__ = ["check_kernel", "check_static_engine", "engine_kernel", "kernel_field", "merged_load",
           "search_engine", "with_engine", "workload_kwargs"]  # fmt: skip

# MoE routing modes a remote client may name (analytic-model §4.2); trace *paths* are refused.
REMOTE_ROUTING = MOE_ROUTING_MODES

_NAMES = ("engine", "moe_kernel")


def workload_kwargs(w: pb.Workload, field: str = "workload") -> dict:
    """Keyword arguments of ``plena_opt.estimate.Workload`` (unset fields keep the defaults)."""
    kwargs: dict[str, Any] = {}
    for name in ("batch_size", "input_seq_len", "output_seq_len", "frequency_hz"):
        value = getattr(w, name) if w.HasField(name) else None
        if value is not None:
            kwargs[name] = value
    if "frequency_hz" in kwargs and not math.isfinite(kwargs["frequency_hz"]):
        raise PlenaInputError(f"{field}.frequency_hz", f"{field}.frequency_hz must be finite")
    if w.overlap_policy:
        kwargs["overlap_policy"] = w.overlap_policy
    if w.routing:
        if w.routing not in REMOTE_ROUTING:
            raise PlenaInputError(
                f"{field}.routing", f"{field}.routing must be one of {', '.join(REMOTE_ROUTING)}"
            )
        kwargs["routing"] = w.routing
    kwargs["include_lm_head"] = bool(w.include_lm_head)
    for name in ("precision", "kv_precision"):
        if getattr(w, name):
            kwargs[name] = getattr(w, name)
    if w.eplb_redundant:  # checked by Workload: 0 .. estimate.eplb.MAX_REDUNDANT
        kwargs["eplb_redundant"] = w.eplb_redundant
    return kwargs


def _pick(workload: pb.Workload | None, load: pb.ServingLoad | None, name: str,
          field: str) -> tuple[str, str]:  # fmt: skip
    """(value, the field that gave it) of ``name``: the load's where set, else the workload's
    (empty: neither); the two set to different names are refused naming ``load.<name>``."""
    mine = getattr(workload, name) if workload is not None else ""
    theirs = getattr(load, name) if load is not None else ""
    if mine and theirs and mine != theirs:
        raise PlenaInputError(
            f"load.{name}",
            f"load.{name} {echo(theirs)} and {field}.{name} {echo(mine)} differ: give one "
            "(the load takes the workload's when empty)",
        )
    if theirs:
        return theirs, f"load.{name}"
    return mine, f"{field}.{name}"


def engine_kernel(workload: pb.Workload | None, load: pb.ServingLoad | None,
                  field: str = "workload") -> dict[str, Any]:  # fmt: skip
    """The ``Workload`` engine / moe_kernel / fused_input_quant a request names (``field``: its
    workload's proto path; empty: vLLM and its default kernel). An unknown engine in the
    workload is refused naming ``<field>.engine``; one in the load is left to the load's own
    check, naming load.engine."""
    out: dict[str, Any] = {}
    engine, where = _pick(workload, load, "engine", field)
    if engine in ENGINES:  # its MoE kernels and its fused input quantisation
        out["engine"] = engine
        out["fused_input_quant"] = engine in FUSED_QUANT_ENGINES
    elif engine and where != "load.engine":
        raise PlenaInputError(
            where, f"{where}: invalid choice {echo(engine)} (choose from {', '.join(ENGINES)})"
        )
    kernel, where = _pick(workload, load, "moe_kernel", field)
    if kernel:
        if kernel not in MOE_KERNELS:
            raise PlenaInputError(
                where, f"{where} must be one of {', '.join(MOE_KERNELS)} (got {echo(kernel)})"
            )
        out["moe_kernel"] = kernel
    return out


def kernel_field(load: pb.ServingLoad | None, field: str = "workload") -> str:
    """The proto path that named the MoE kernel: ``load.moe_kernel`` where the load names one,
    else ``<field>.moe_kernel``."""
    return "load.moe_kernel" if load is not None and load.moe_kernel else f"{field}.moe_kernel"


def merged_load(workload: pb.Workload, load: pb.ServingLoad) -> pb.ServingLoad:
    """``load`` with its empty engine / moe_kernel taken from ``workload`` (one ``--engine``
    prices both views, as the CLI's); ``load`` itself where nothing is taken. Different names
    are refused naming ``load.<name>``."""
    taken = {n: getattr(workload, n) for n in _NAMES if getattr(workload, n)}
    for name in taken:
        _pick(workload, load, name, "workload")
    if all(getattr(load, n) for n in taken):
        return load
    out = pb.ServingLoad()
    out.CopyFrom(load)
    for name, value in taken.items():
        setattr(out, name, value)
    return out


def with_engine(request: Any) -> Any:
    """An ``EstimateRequest`` / ``SearchRequest`` whose load takes its workload's engine and MoE
    kernel where it names none (a copy); ``request`` itself without a load or where nothing is
    taken. Different names are refused naming ``load.<name>``."""
    if not request.HasField("load"):
        return request
    load = merged_load(request.workload, request.load)
    if load is request.load:
        return request
    out = type(request)()
    out.CopyFrom(request)
    out.load.CopyFrom(load)
    return out


def search_engine(request: pb.SearchRequest) -> pb.SearchRequest:
    """``with_engine(request)``: under a load, the load's engine (its own, else the workload's);
    without one, ``workload.engine`` prices the static plans with its kernels, as
    ``plena-opt search --engine E`` without ``--concurrency``/``--request-rate`` does."""
    return with_engine(request)


def check_static_engine(chip: Any, workload: pb.Workload) -> None:
    """A non-default ``workload.engine`` without a load needs a GPU ``chip`` (no serving engine
    targets PLENA chips: ``ProblemSpec.load``'s rule); refused naming ``workload.engine``."""
    if workload.engine not in ("", "vllm") and getattr(chip, "kind", None) != "gpu":
        raise PlenaInputError(
            "workload.engine",
            f"workload.engine {echo(workload.engine)} picks a serving engine's kernels and no "
            "serving engine targets PLENA chips: give a GPU system.chip",
        )


def check_kernel(system: Any, workload: Any, field: str) -> None:
    """A named MoE kernel needs a GPU chip whose engine runs it (``check_named_kernel``, as the
    CLI checks it before pricing): ``system`` (``convert.System``) and the library ``workload``;
    refused naming ``field``, the proto path that named the kernel."""
    from plena_opt.api.moe_kernel import check_named_kernel

    try:
        check_named_kernel(system.chip, system.model, workload)
    except PlenaInputError as exc:
        if exc.field != "moe_kernel":
            raise
        raise PlenaInputError(field, f"{field}: {exc.rule}") from exc
