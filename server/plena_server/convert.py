"""Proto messages ↔ library objects, with field-named validation errors.

Every error names the request field (dotted proto path) so that the server can attach a
``google.rpc.BadRequest`` violation. Remote requests may only name built-in profiles or send
inline JSON: file paths are never read on behalf of a client.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.api import limits as bounds
from plena_opt.errors import (
    MAX_ECHO,
    PlenaInputError,
    PlenaNotFoundError,
    echo,
    name_list,
    not_found,
)
from plena_opt.vocabulary import PLAN_DIMS
from plena_server.engine_kernel import check_kernel, engine_kernel, kernel_field, workload_kwargs
from plena_server.errors import ServerLimitError
from plena_server.limits import ServerLimits

WORKLOAD_FIELDS = (
    "batch_size",
    "input_seq_len",
    "output_seq_len",
    "frequency_hz",
    "overlap_policy",
    "include_lm_head",
    "routing",
    "eplb_redundant",
)
PLAN_FIELDS = (*PLAN_DIMS, "moe_tp_mode", "comm_overlap", "moe_tp")


@dataclass(frozen=True)
class System:
    """Loaded library objects for one request (``chip`` None = the evaluator's default chip)."""

    model: Any
    noc: Any
    memory: Any
    chip: Any


@contextlib.contextmanager
def field_scope(field: str) -> Iterator[None]:
    """Re-raise library errors raised inside as ``PlenaInputError`` naming ``field``.

    A library error that already names a sub-field keeps it, prefixed with ``field``; a bare
    ``ValueError``/``TypeError``/``KeyError`` from parsing inline JSON is attributed to ``field``.
    """
    from pydantic import ValidationError

    try:
        yield
    except (PlenaNotFoundError, ServerLimitError):
        raise
    except PlenaInputError as exc:
        raise _prefix(field, exc) from exc
    except ValidationError as exc:
        loc = ".".join(str(p) for p in (exc.errors() or [{}])[0].get("loc", ()))
        sub = f"{field}.{loc}" if loc else field
        raise PlenaInputError(sub, f"{sub}: {exc.errors()[0]['msg']}") from exc
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        sub = getattr(exc, "field", "") or ""
        name = f"{field}.{sub}" if sub else field
        raise PlenaInputError(name, f"{name}: {exc}") from exc
    except RecursionError as exc:
        raise PlenaInputError(field, f"{field}: document nested too deeply") from exc


def _prefix(field: str, exc: PlenaInputError) -> PlenaInputError:
    if isinstance(exc, PlenaNotFoundError):
        return exc
    name = exc.field if exc.field.startswith(field) else f"{field}.{exc.field}"
    new = type(exc)(name, exc.rule)
    return new


def parse_json_object(field: str, text: str, limits: ServerLimits) -> dict:
    """Parse an inline JSON document that must be an object."""
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_inline_json_bytes:
        raise ServerLimitError(
            field,
            f"{field} is larger than the server limit of {limits.max_inline_json_bytes} bytes",
        )
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PlenaInputError(field, f"{field} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise PlenaInputError(field, f"{field} must be a JSON object")
    return value


def _check_name(field: str, name: str, known: list[str], what: str) -> str:
    """Keep client-named server paths away from the loaders (which also accept paths).

    A built-in name (loaders accept ``_`` and ``-`` interchangeably) or a plain word that is not a
    file passes, so an unknown plain name gets the library's own NOT_FOUND wording; anything that
    looks like a path is NOT_FOUND here.
    """
    variants = {name, name.replace("_", "-"), name.replace("-", "_")}
    if variants & set(known):
        return name
    plain = name and not any(c in name for c in "/\\\0") and not name.startswith(".")
    if plain and not name.endswith(".json") and not _exists(name):
        return name
    raise PlenaNotFoundError(
        field, f"unknown {what} {echo(name)}; choose one of {name_list(known)}"
    )


def _exists(name: str) -> bool:
    from pathlib import Path

    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return True


MAX_DISPLAY_NAME = bounds.MAX_DISPLAY_NAME  # characters of an inline model's display name


def load_model(src: pb.ModelSource, limits: ServerLimits, field: str = "system.model") -> Any:
    from plena_opt.api import catalog

    kind = src.WhichOneof("source")
    if kind == "name":  # load_model(name=...) never reads a path
        if not src.name:  # as the CLI's --model and the web's model refuse it
            raise PlenaInputError(f"{field}.name", f"{field}.name must not be empty")
        with field_scope(f"{field}.name"):
            try:
                return catalog.load_model(name=src.name)
            except PlenaNotFoundError as exc:
                if len(src.name) > MAX_ECHO:  # the catalog echoes the name whole
                    known = catalog.list_models()
                    raise not_found(f"{field}.name", "model", src.name, known) from exc
                raise PlenaNotFoundError(f"{field}.name", str(exc)) from exc
    if kind == "hf_config_json":
        if len(src.display_name) > MAX_DISPLAY_NAME:
            raise PlenaInputError(
                f"{field}.display_name",
                f"{field}.display_name must be at most {MAX_DISPLAY_NAME} characters",
            )
        f = f"{field}.hf_config_json"
        cfg = parse_json_object(f, src.hf_config_json, limits)
        with field_scope(f):
            try:
                return catalog.ModelSpec.from_hf_config(cfg, src.display_name or "custom")
            except PlenaInputError as exc:
                raise _prefix(f, exc) from exc
    raise PlenaInputError(field, f"{field} is required: give a built-in name or hf_config_json")


def _load_profile(
    src: pb.ProfileSource, field: str, kind: str, limits: ServerLimits, *, required: bool
) -> Any:
    loader, lister = profile_api(kind)
    which = src.WhichOneof("source")
    if which == "name":
        known = lister()
        _check_name(f"{field}.name", src.name, known, f"{kind} profile")
        if not {src.name, src.name.replace("_", "-"), src.name.replace("-", "_")} & set(known):
            try:  # not built in: the loader's own "unknown …" wording, as NOT_FOUND
                loader(src.name)
            except (ValueError, OSError) as exc:
                raise PlenaNotFoundError(f"{field}.name", str(exc)) from exc
        with field_scope(f"{field}.name"):
            return loader(src.name)
    if which == "fixed_bandwidth":
        return _fixed_bandwidth(src.fixed_bandwidth, f"{field}.fixed_bandwidth", kind)
    if which == "json":
        f = f"{field}.json"
        doc = parse_json_object(f, src.json, limits)
        with field_scope(f):
            try:
                return loader(doc)
            except PlenaInputError as exc:
                raise _prefix(f, exc) from exc
    if required:
        raise PlenaInputError(field, f"{field} is required: give a built-in name or json")
    return None


def profile_api(kind: str) -> tuple[Any, Any]:
    if kind == "noc":
        from plena_opt.api import network

        return network.load_noc_profile, network.list_noc_profiles
    if kind == "memory":
        from plena_opt.api import catalog

        return catalog.load_memory, catalog.list_memory_profiles
    from plena_opt.api import catalog

    return catalog.load_chip, catalog.list_chip_profiles


def _fixed_bandwidth(fb: pb.FixedBandwidthMemory, field: str, kind: str) -> Any:
    if kind != "memory":
        raise PlenaInputError(field, f"{field} is only valid for the memory profile")
    gbs = fb.bandwidth_gbytes_per_s
    if not (math.isfinite(gbs) and gbs > 0):
        raise PlenaInputError(
            f"{field}.bandwidth_gbytes_per_s",
            f"{field}.bandwidth_gbytes_per_s must be greater than zero",
        )
    gib = fb.capacity_gib if fb.HasField("capacity_gib") else None
    if gib is not None and not (math.isfinite(gib) and gib > 0):
        raise PlenaInputError(
            f"{field}.capacity_gib", f"{field}.capacity_gib must be greater than zero"
        )
    from plena_opt.api import catalog

    try:
        return catalog.fixed_bandwidth(gbs, gib)
    except PlenaInputError as exc:  # name the proto fields, not the CLI's
        names = {
            "fixed_bandwidth_gbs": "bandwidth_gbytes_per_s",
            "fixed_capacity_gib": "capacity_gib",
        }
        if exc.field not in names:
            raise _prefix(field, exc) from exc
        name = f"{field}.{names[exc.field]}"
        raise type(exc)(name, exc.rule.replace(exc.field, name, 1)) from exc


def default_memory() -> Any:
    """The memory when a request names none: the CLI default (``DEFAULT_MEMORY``)."""
    from plena_opt.api.catalog import DEFAULT_MEMORY, load_memory

    return load_memory(DEFAULT_MEMORY)


def load_system(
    spec: pb.SystemSpec, limits: ServerLimits, field: str = "system", *, require_noc: bool = True
) -> System:
    """Load model, NoC, memory and chip from a SystemSpec; enforce the device limit."""
    model = load_model(spec.model, limits, f"{field}.model")
    noc = _load_profile(spec.noc, f"{field}.noc", "noc", limits, required=require_noc)
    if noc is not None and noc.num_devices > limits.max_devices:
        raise ServerLimitError(
            f"{field}.noc",
            f"{field}.noc has {noc.num_devices} devices; the server limit is {limits.max_devices}",
        )
    memory = _load_profile(spec.memory, f"{field}.memory", "memory", limits, required=False)
    chip = _load_profile(spec.chip, f"{field}.chip", "chip", limits, required=False)
    if memory is None:
        from plena_opt.api.catalog import chip_memory

        memory = chip_memory(chip) or default_memory()  # a GPU carries its HBM
    return System(model=model, noc=noc, memory=memory, chip=chip)


def load_inputs(
    system: pb.SystemSpec,
    workload: pb.Workload,
    limits: ServerLimits,
    field: str = "",
    *,
    noc: bool = True,
    load: pb.ServingLoad | None = None,
) -> Any:
    """``EvaluatorInputs`` of a request's system and workload (``field``: their parent in the
    request, e.g. ``inference``); ``noc=False``: no NoC needed (single-chip estimate); ``load``:
    its engine's MoE kernels price the experts (``engine_kernel``)."""
    from plena_opt.api.catalog import EvaluatorInputs

    prefix = f"{field}." if field else ""
    s = load_system(system, limits, f"{prefix}system", require_noc=noc)
    w = to_workload(workload, f"{prefix}workload", load)
    check_kernel(s, w, kernel_field(load, f"{prefix}workload"))
    return EvaluatorInputs(s.model, s.noc, s.memory, w, s.chip)


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def to_workload(w: pb.Workload, field: str = "workload", load: pb.ServingLoad | None = None
                ) -> Any:  # fmt: skip
    """The library ``Workload`` of ``w`` (errors name ``field``), priced on the engine and MoE
    kernel that ``w`` or ``load`` names (``engine_kernel``)."""
    from plena_opt.api.catalog import Workload

    kernel = engine_kernel(w, load, field)  # a bad name: <field>.engine, load.moe_kernel, …
    try:
        return Workload(**workload_kwargs(w, field), **kernel)
    except PlenaInputError as exc:
        if exc.field == "moe_kernel":
            name = kernel_field(load, field)
            raise PlenaInputError(name, f"{name}: {exc.rule}") from exc
        raise _prefix(field, exc) from exc


def plan_kwargs(p: pb.Plan) -> dict:
    kwargs: dict[str, Any] = {}
    for name in ("tp", "ep", "dp", "pp", "cp", "moe_tp"):
        value = _opt(p, name)
        if value is not None:
            kwargs[name] = value
    if p.moe_tp_mode:
        kwargs["moe_tp_mode"] = p.moe_tp_mode
    if p.comm_overlap:
        kwargs["comm_overlap"] = p.comm_overlap
    return kwargs


def to_plan(p: pb.Plan, field: str = "plan") -> Any:
    """The library ``Plan``; a degree above ``MAX_DEVICES`` (no NoC profile has more devices) is
    refused naming ``<field>.<degree>`` before the plan is priced."""
    from plena_opt.api.catalog import Plan

    for name, value in plan_kwargs(p).items():
        if name in (*PLAN_DIMS, "moe_tp") and value > bounds.MAX_DEVICES:
            raise PlenaInputError(
                f"{field}.{name}",
                f"{field}.{name} must be between {0 if name == 'moe_tp' else 1} and "
                f"{bounds.MAX_DEVICES:,} (the devices of a NoC profile), got {value}",
            )
    try:
        return Plan(**plan_kwargs(p))
    except PlenaInputError as exc:
        raise _prefix(field, exc) from exc


def qualify(exc: PlenaInputError) -> PlenaInputError:
    """Give an evaluator error the proto path of its field (``tp`` → ``plan.tp``)."""
    if isinstance(exc, PlenaNotFoundError) or "." in exc.field:
        return exc
    if exc.field in PLAN_FIELDS or exc.field == "world_size":
        return _prefix("plan", exc)
    if exc.field == "moe_kernel":  # the engine's MoE kernel: ServingLoad.moe_kernel
        return _prefix("load", exc)
    if exc.field in WORKLOAD_FIELDS:
        return _prefix("workload", exc)
    return exc


LOAD_FIELDS = ("concurrency", "request_rate", "engine", "engine_version", "range_ratio",
               "moe_kernel",
               "prefill_workers", "prefill_tp", "decode_workers", "decode_tp",
               "speculative", "speculative_method", "acceptance",
               "memory_fraction")  # fmt: skip


def qualify_load(exc: PlenaInputError) -> PlenaInputError:
    """A serving-under-load error with its proto path (``concurrency`` → ``load.concurrency``;
    a plan dimension → ``plan.<dim>``)."""
    if not isinstance(exc, PlenaNotFoundError) and exc.field in LOAD_FIELDS:
        return _prefix("load", exc)
    return qualify(exc)


def noise_of(request: pb.SimulateRequest | pb.SearchOptions, default: str) -> Any:
    """The library ``NoiseSpec`` of a request's ``noise`` (unset → ``default``, the CLI's)."""
    from plena_opt.api.limits import check_noise
    from plena_opt.api.simulation_io import parse_noise
    from plena_opt.api.wire import noise_from_proto

    if not request.HasField("noise"):
        return parse_noise(default)
    return check_noise(noise_from_proto(request.noise))
