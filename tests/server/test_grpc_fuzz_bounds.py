"""Every numeric field of every gRPC request at its bound, one past it, huge and negative (issue
29): never INTERNAL or UNKNOWN; past the bound (and negative where the field must be positive)
INVALID_ARGUMENT or RESOURCE_EXHAUSTED whose BadRequest field (or message) names the field; at
both ends of its range the request runs. The requests are small (a 2-rank schedule,
a one-trial search of a small space), so the accepted ones are cheap; ``BOUNDS`` lists every
numeric leaf of the request messages and a test checks none is missing."""

from __future__ import annotations

import math

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from plena_client.errors import bad_request_field
from plena_proto import plena_opt_pb2 as pb
from plena_proto import plena_opt_pb2_grpc as pb_grpc

from plena_opt.api import limits
from plena_opt.bounds import MAX_SEARCH_SECONDS, MAX_SPECULATIVE_TOKENS, SCHEDULE_OPS_PER_SLOT

OK = grpc.StatusCode.OK
REFUSED = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE}
INT64_MAX = 2**63 - 1
MAX_WORKLOAD = {"batch_size": 2**24, "input_seq_len": 2**26, "output_seq_len": 2**24}
SYSTEM = {"model": "llama-3.1-8b", "noc": "illustrative_gpu_node_8"}
# a search runs on a chip the price file prices (the cost cap needs one)
GPU_SYSTEM = {"model": "llama-3.1-8b", "noc": "hgx-h200x8", "chip": "h200-sxm"}
MAX_SLOTS = limits.MAX_TRAINING_OPS // SCHEDULE_OPS_PER_SLOT

# (message field path, request kind, bound, lowest valid value). A bound of None: no upper bound
# (a threshold only has a lower one); the path's first part says where it sits in the request.
BOUNDS: list[tuple[str, str, float | None, float]] = [
    ("Workload.batch_size", "estimate", MAX_WORKLOAD["batch_size"], 1),
    ("Workload.input_seq_len", "estimate", MAX_WORKLOAD["input_seq_len"], 1),
    ("Workload.output_seq_len", "estimate", MAX_WORKLOAD["output_seq_len"], 1),
    ("Workload.frequency_hz", "estimate", 1e15, 1.0),
    ("Workload.eplb_redundant", "estimate", 1 << 16, 0),  # estimate.eplb.MAX_REDUNDANT
    ("Plan.tp", "estimate", limits.MAX_DEVICES, 8),
    ("Plan.ep", "estimate", limits.MAX_DEVICES, 1),
    ("Plan.dp", "estimate", limits.MAX_DEVICES, 1),
    ("Plan.pp", "estimate", limits.MAX_DEVICES, 1),
    ("Plan.cp", "estimate", limits.MAX_DEVICES, 1),
    ("Plan.moe_tp", "estimate", limits.MAX_DEVICES, 0),
    ("FixedBandwidthMemory.bandwidth_gbytes_per_s", "estimate", 1e8, 1e-3),
    ("FixedBandwidthMemory.capacity_gib", "estimate", 2.0**34, 2.0**-20),
    ("SearchOptions.trials", "search", limits.MAX_TRIALS, 1),
    ("SearchOptions.seed", "search", 2**32 - 1, 0),
    ("SearchOptions.batch_sizes", "search", MAX_WORKLOAD["batch_size"], 1),
    ("SearchOptions.max_ttft_ms", "search", limits.MAX_SLA, 1e-9),
    ("SearchOptions.min_tps_per_seq", "search", limits.MAX_SLA, 1e-9),
    ("SearchOptions.max_tpot_ms", "search", limits.MAX_SLA, 1e-9),
    ("SearchOptions.max_cost_per_mtok", "search", limits.MAX_SLA, 1e-9),
    ("SearchOptions.timeout_seconds", "search", MAX_SEARCH_SECONDS, 1e-3),
    ("SearchOptions.auto_budget_seconds", "search", MAX_SEARCH_SECONDS, 1e-3),
    ("SearchOptions.recheck_top_k", "search", limits.MAX_RECHECK_TOP_K, 0),
    ("SearchOptions.mc_samples", "search", limits.MAX_SAMPLES, 1),
    ("SearchOptions.max_trace_bytes", "search", limits.MAX_TRACE_BYTES, 0),
    ("SearchOptions.memory_fraction", "search", 1.0, 1e-9),
    ("NoiseSpec.version", "simulate", 1, 1),
    ("NoiseSpec.jitter_sigma", "simulate", 2.0, 0.0),
    ("NoiseSpec.rank_sigma", "simulate", 2.0, 0.0),
    ("StragglerNoise.probability", "simulate", 1.0, 0.0),
    ("StragglerNoise.factor_low", "simulate", 2.0, 1.0),  # ≤ factor_high (2 here)
    ("StragglerNoise.factor_high", "simulate", limits.MAX_STRAGGLER_FACTOR, 2.0),
    ("MoeImbalanceNoise.experts", "simulate", limits.MAX_MOE_EXPERTS, 8),  # ≥ top_k, ep | it
    ("MoeImbalanceNoise.top_k", "simulate", 8, 1),  # ≤ experts (8 here)
    ("MoeImbalanceNoise.ep", "simulate", 8, 1),  # divides experts (8 here)
    ("MoeImbalanceNoise.tokens", "simulate", limits.MAX_MOE_TOKENS, 1),
    ("MoeImbalanceNoise.alpha", "simulate", limits.MAX_MOE_ALPHA, 1e-9),
    ("MoeImbalanceNoise.fraction", "simulate", 1.0, 0.0),
    # a schedule's sizes are bounded by their product, pp·vpp·m·4 ≤ MAX_TRAINING_OPS (2 by 1 ops
    # here, vpp with pp = m = 2): each at the largest value the others allow
    ("TrainingSchedule.pp_size", "simulate", MAX_SLOTS, 1),
    ("TrainingSchedule.vpp_size", "simulate", MAX_SLOTS // 4, 1),
    ("TrainingSchedule.microbatches", "simulate", MAX_SLOTS // 2, 1),
    ("TrainingSchedule.base_ms", "simulate", 1e15, 0.0),
    ("InferenceTarget.max_window_steps", "inference", limits.MAX_WINDOW_STEPS, 1),
    ("SimulateRequest.samples", "simulate", limits.MAX_SAMPLES, 0),
    ("SimulateRequest.seed", "simulate", 2**32 - 1, 0),
    ("ListProfilesRequest.kind", "profiles", 3, 0),
    # serving under load: 1-token prompts, 2-token outputs, so the plan serves the top rate
    ("ServingLoad.concurrency", "load", limits.MAX_CONCURRENCY, 1),
    ("ServingLoad.request_rate", "load", limits.MAX_REQUEST_RATE, 1e-9),
    ("ServingLoad.range_ratio", "load", 0.99, 0.0),  # < 1 (an open range: 0.99 stands for it)
    # disaggregated pools on the 8 GPUs: each at the largest value the others leave (POOL_BASE)
    ("ServingLoad.prefill_workers", "load", 4, 1),
    ("ServingLoad.prefill_tp", "load", 4, 1),
    ("ServingLoad.decode_workers", "load", 1, 1),
    ("ServingLoad.decode_tp", "load", 4, 1),
    # speculative decoding (Estimate only): K draft tokens with K rates, a rate in (0, 1]
    ("ServingLoad.speculative", "speculative", limits.MAX_SPECULATIVE_TOKENS, 1),
    ("ServingLoad.acceptance", "speculative", 1.0, 1e-9),
    # the KV pool's share of GPU memory (Estimate only, as the speculative fields: a search
    # refuses it for options.memory_fraction); low 0.5: near 0 no pool is left after the
    # weights, refused naming ``plan`` (the plan's rule, not the field's)
    ("ServingLoad.memory_fraction", "speculative", limits.MAX_MEMORY_FRACTION, 0.5),
]
# the other pool fields while one is fuzzed: 1 + 4 GPUs, or 4 + 1 for decode_tp (a TP of 5 past
# the bound would be refused by the model's heads, not the NoC's size, so its bound is a sum too)
POOL_BASE = {"prefill_workers": 1, "prefill_tp": 1, "decode_workers": 1, "decode_tp": 4}
# A field whose bound is not a field rule but a product (ops of a schedule): past the product the
# error names the schedule's size or samples, which the test accepts for these.
PRODUCT_NAMES = {"pp_size", "vpp_size", "microbatches", "samples", "training", "max_window_steps"}


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    from plena_server.app import start_server
    from plena_server.limits import ServerLimits

    store = tmp_path_factory.mktemp("fuzzbounds") / "studies.log"
    running = start_server("127.0.0.1", 0, str(store), workers=2, limits=ServerLimits())
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield pb_grpc.PlenaOptStub(channel)
    channel.close()
    running.drain(1)


def _system(fixed: bool = False, gpu: bool = False) -> pb.SystemSpec:
    names = GPU_SYSTEM if gpu else SYSTEM
    s = pb.SystemSpec(model=pb.ModelSource(name=names["model"]))
    s.noc.name = names["noc"]
    if gpu:
        s.chip.name = names["chip"]
    if fixed:
        s.memory.fixed_bandwidth.bandwidth_gbytes_per_s = 1000.0
    return s


def _workload() -> pb.Workload:
    return pb.Workload(batch_size=4, input_seq_len=256, output_seq_len=16)


def _requests(kind: str, message: str) -> list[tuple[str, object, object]]:
    """(RPC name, request, the message holding the field) for a field of ``message``."""
    if kind == "estimate":
        req = pb.EstimateRequest(
            system=_system(message == "FixedBandwidthMemory"),
            workload=_workload(),
            plan=pb.Plan(tp=8),
        )
        holder = {
            "Workload": req.workload,
            "Plan": req.plan,
            "FixedBandwidthMemory": req.system.memory.fixed_bandwidth,
        }[message]
        out = [("Estimate", req, holder)]
        if message != "Plan":  # the same messages travel in a search
            s = pb.SearchRequest(system=req.system, workload=req.workload)
            s.options.trials, s.options.batch_sizes[:] = 1, [4]
            h = s.workload if message == "Workload" else s.system.memory.fixed_bandwidth
            out.append(("Search", s, h))
        return out
    if kind == "search":
        req = pb.SearchRequest(system=_system(gpu=True), workload=_workload())
        req.options.trials, req.options.recheck_top_k = 1, 0
        req.options.batch_sizes[:] = [4]
        return [("Search", req, req.options), ("StreamSearch", req, req.options)]
    if kind == "load":
        req = pb.EstimateRequest(
            system=_system(gpu=True),
            workload=pb.Workload(batch_size=4, input_seq_len=1, output_seq_len=2),
            plan=pb.Plan(tp=8),
            load=pb.ServingLoad(concurrency=4),
        )
        s = pb.SearchRequest(system=req.system, workload=req.workload, load=req.load)
        s.options.trials, s.options.batch_sizes[:] = 1, [4]
        return [("Estimate", req, req.load), ("Search", s, s.load)]  # a search under load too
    if kind == "speculative":  # a search refuses any speculative field (Estimate prices it)
        req = pb.EstimateRequest(
            system=_system(gpu=True),
            workload=pb.Workload(batch_size=4, input_seq_len=1, output_seq_len=2),
            plan=pb.Plan(tp=8),
            load=pb.ServingLoad(concurrency=4),
        )
        return [("Estimate", req, req.load)]
    if kind == "profiles":
        req = pb.ListProfilesRequest()
        return [("ListProfiles", req, req)]
    if kind == "inference":
        target = pb.InferenceTarget(system=_system(), workload=_workload(), plan=pb.Plan(tp=8))
        target.max_window_steps = 4
        req = pb.SimulateRequest(inference=target, samples=0)
        return [("Simulate", req, req.inference)]
    training = pb.TrainingSchedule(schedule="1f1b", pp_size=2, microbatches=1)
    training.base_ms.update({"F": 1.0, "B": 2.0})
    req = pb.SimulateRequest(training=training, samples=2)
    holder = {"SimulateRequest": req, "TrainingSchedule": req.training}
    if message == "NoiseSpec":
        req.noise.version = 1
        holder[message] = req.noise
    if message == "StragglerNoise":
        req.noise.straggler.probability, req.noise.straggler.factor_high = 0.5, 2.0
        holder[message] = req.noise.straggler
    if message == "MoeImbalanceNoise":
        req.noise.moe.experts, req.noise.moe.tokens = 8, 64
        holder[message] = req.noise.moe
    out = [("Simulate", req, holder[message])]
    if message in ("NoiseSpec", "StragglerNoise", "MoeImbalanceNoise"):  # a search's re-check
        s = pb.SearchRequest(system=_system(), workload=_workload())
        s.options.trials, s.options.recheck_top_k, s.options.mc_samples = 1, 1, 2
        s.options.batch_sizes[:] = [4]
        s.options.noise.CopyFrom(req.noise)
        inner = {"NoiseSpec": s.options.noise, "StragglerNoise": s.options.noise.straggler}
        inner["MoeImbalanceNoise"] = s.options.noise.moe
        out.append(("Search", s, inner[message]))
    return out


def _set(holder, field: str, value) -> None:
    if field == "base_ms":
        holder.base_ms["F"] = value
    elif field == "batch_sizes":
        holder.batch_sizes[:] = [value]
    elif field in POOL_BASE:
        base = (
            dict(POOL_BASE, prefill_workers=4, decode_tp=1) if field == "decode_tp" else POOL_BASE
        )
        for name, v in base.items():
            setattr(holder, name, v)
        setattr(holder, field, value)
    elif field == "speculative":  # with one rate per draft token where K is in range
        holder.speculative = value
        holder.acceptance[:] = [0.5] * value if 1 <= value <= MAX_SPECULATIVE_TOKENS else []
    elif field == "acceptance":
        holder.speculative, holder.acceptance[:] = 1, [value]
    elif field == "request_rate":  # a rate replaces the closed loop's concurrency
        holder.concurrency, holder.request_rate = 0, value
    elif field == "vpp_size":  # chunks need an interleaved schedule
        holder.schedule, holder.vpp_size, holder.microbatches = "interleaved-1f1b", value, 2
    else:
        setattr(holder, field, value)


def _call(stub, rpc: str, request) -> tuple[grpc.StatusCode, str, str]:
    try:
        result = getattr(stub, rpc)(request, timeout=60)
        if rpc == "StreamSearch":
            list(result)
    except grpc.RpcError as exc:
        return exc.code(), bad_request_field(exc) or "", exc.details() or ""
    return OK, "", ""


def _values(bound: float | None, low: float, integer: bool) -> dict[str, list]:
    """The values past the field's range (``past``) and at its ends (``at``)."""
    if integer:
        past = [int(bound) + 1, INT64_MAX] if bound is not None else []
        past += [-1, -(2**63)] if low >= 0 else []
        return {"at": [int(bound)] if bound is not None else [], "past": past}
    past = [bound * 10, 1e300, math.inf, math.nan] if bound is not None else [math.nan]
    past += [-1.0, -math.inf]
    return {"at": [float(bound)] if bound is not None else [], "past": past}


def _integer(path: str) -> bool:
    message, field = path.split(".")
    desc = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field]
    if desc.message_type is not None:  # a map: its value type
        desc = desc.message_type.fields_by_name["value"]
    return desc.cpp_type in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64) or (
        desc.cpp_type == FieldDescriptor.CPPTYPE_ENUM
    )


def _names(field_path: str, got: str, message: str) -> bool:
    field = field_path.split(".")[1]
    if field in got or field in message:
        return True
    return field in PRODUCT_NAMES and any(n in got or n in message for n in PRODUCT_NAMES)


@pytest.mark.parametrize(("path", "kind", "bound", "low"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_past_a_bound_is_refused_naming_the_field(stub, path, kind, bound, low):
    message, field = path.split(".")
    integer = _integer(path)
    for value in _values(bound, low, integer)["past"]:
        if field == "kind" and value == INT64_MAX:
            value = 2**31 - 1  # an enum is int32
        if field == "version" and value > 2**31:
            value = 2**31 - 1
        for rpc, request, holder in _requests(kind, message):
            try:
                _set(holder, field, value)
            except ValueError:  # out of the proto type's own range: cannot be sent
                continue
            code, got, text = _call(stub, rpc, request)
            assert code not in NEVER, (rpc, path, value, code, text)
            assert code in REFUSED, (rpc, path, value, code, text)
            assert _names(path, got, text), (rpc, path, value, got, text)


@pytest.mark.parametrize(("path", "kind", "bound", "low"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_at_a_bound_is_accepted(stub, path, kind, bound, low):
    """Both ends of the range run (a plan degree alone cannot: the plan's devices must equal
    the NoC's 8, which is refused naming ``plan``, not the degree)."""
    message, field = path.split(".")
    values = _values(bound, low, _integer(path))["at"] + [low]
    for value in values:
        for rpc, request, holder in _requests(kind, message)[:1]:
            _set(holder, field, value)
            if message == "TrainingSchedule":
                request.samples = 0  # 100,000 ops at the bound: the deterministic run only
            if path == "ServingLoad.request_rate":  # the batch of 4 would cap the engine at 4
                request.workload.ClearField("batch_size")  # (issue 23): its default cap
            code, got, text = _call(stub, rpc, request)
            if message == "Plan" and value == bound:  # moe_tp must also divide tp·ep = 8
                want = "plan.moe_tp" if field == "moe_tp" else "plan"
                assert (code, got) == (grpc.StatusCode.INVALID_ARGUMENT, want), text
            elif field == "eplb_redundant" and value == bound:  # a model's experts bound it
                want = (grpc.StatusCode.INVALID_ARGUMENT, "workload.eplb_redundant")
                assert (code, got) == want, text  # below (dense: none), as the CLI's
            else:
                assert code == OK, (rpc, path, value, code, got, text)


def test_every_numeric_request_field_is_fuzzed():
    from tests.test_request_bounds import _request_messages

    numeric = set()
    for m in _request_messages():
        for f in m.fields:
            value = f
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                value = f.message_type.fields_by_name["value"]
            skip = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING)
            if value.type not in (*skip, FieldDescriptor.TYPE_BOOL):
                numeric.add(f"{m.name}.{f.name}")
    assert numeric == {b[0] for b in BOUNDS}
