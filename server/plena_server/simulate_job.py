"""Simulate RPC: one inference plan's serving windows or one training schedule, as
``plena-opt simulate`` computes them (pipeline-simulator §1–§3), with limits on the work.

Each Simulate holds one of the server's simulation slots (``max_concurrent_simulates``,
RESOURCE_EXHAUSTED beyond) and its estimated working memory is capped
(``max_simulate_bytes``), so concurrent Simulates' memory is bounded as searches' is. A stop
token carries the RPC deadline (less an answer reserve), the client's cancellation and SIGTERM;
the Monte Carlo checks it at every level of every sample block and the reply then holds the
samples done, ``partial = true`` and the ``stop_reason``."""

from __future__ import annotations

import math
from typing import Any

import grpc
from plena_proto import plena_opt_pb2 as pb
from plena_proto.traces import pack_trace

from plena_opt import api, jsonio
from plena_opt.api import limits as bounds
from plena_opt.api.wire import distribution, serving_to_proto
from plena_opt.errors import PlenaInputError
from plena_opt.stop import StopToken
from plena_server import convert
from plena_server.errors import ServerLimitError

DEFAULT_NOISE = "sigma=0.05"  # the CLI's --noise default
DEFAULT_SAMPLES = 1000
MAX_WINDOW_STEPS = bounds.MAX_WINDOW_STEPS
MAX_TRAINING_OPS = bounds.MAX_TRAINING_OPS  # ops in one training plan
_TRAINING_FIELDS = {
    "durations": "training.base_ms",
    "pp": "training.pp_size",
    "pp_size": "training.pp_size",
    "vpp": "training.vpp_size",
    "vpp_size": "training.vpp_size",
    "microbatches": "training.microbatches",
    "schedule": "training.schedule",
}


def _opt(msg: Any, name: str, default: Any) -> Any:
    return getattr(msg, name) if msg.HasField(name) else default


def _traces(traces: dict[str, dict], cap: int, out: pb.SimulateResponse) -> None:
    used = 0
    for name, trace in traces.items():
        packed = pack_trace(trace, name)
        if used + packed.compressed_bytes > cap:
            out.warnings.append(f"trace {name} dropped: over the {cap}-byte trace limit")
            continue
        used += packed.compressed_bytes
        out.traces.append(packed)


def answer_reserve(remaining: float) -> float:
    """Seconds kept to build and send the reply: 20 % of what is left, 0.5–3 s."""
    return min(3.0, max(0.5, 0.2 * remaining))


def stop_token(context: grpc.ServicerContext) -> StopToken:
    """A token for the RPC's work: its deadline less :func:`answer_reserve`; cancelled when the
    client goes away."""
    remaining = context.time_remaining()
    budget = None
    if remaining is not None and math.isfinite(remaining):
        budget = max(remaining - answer_reserve(remaining), 0.0)
    token = StopToken.within(budget)
    context.add_callback(lambda: token.set("cancelled"))
    return token


def simulate(servicer: Any, request: pb.SimulateRequest, context: grpc.ServicerContext) -> Any:
    """Validate, take a simulation slot, run under the RPC's stop token and reply."""
    token = stop_token(context)
    with servicer.simulations.slot(token):
        out = _simulate(servicer, request, token)
    out.stop_reason = out.stop_reason or "completed"
    return out


def _simulate(servicer: Any, request: pb.SimulateRequest, token: StopToken) -> Any:
    limits = servicer.limits
    samples = _opt(request, "samples", DEFAULT_SAMPLES)
    if samples < 0:
        raise PlenaInputError("samples", "samples must be >= 0")
    if samples > limits.max_samples:
        raise ServerLimitError("samples", f"samples is above the server limit {limits.max_samples}")
    from plena_opt.api.simulation_io import check_seed

    seed = check_seed(_opt(request, "seed", 0))  # 0 <= seed < 2**32, as the CLI's --seed
    noise = convert.noise_of(request, DEFAULT_NOISE)
    target = request.WhichOneof("target")
    traces = request.include_traces
    if target == "training":
        return _training(request.training, noise, samples, seed, traces, limits, token)
    if target == "inference":
        return _inference(request.inference, noise, samples, seed, traces, servicer, token)
    raise PlenaInputError("target", "target is required: inference or training")


def _training(
    t: pb.TrainingSchedule,
    noise: Any,
    samples: int,
    seed: int,
    traces: bool,
    limits: Any,
    token: StopToken,
) -> pb.SimulateResponse:
    from plena_opt.api.simulation_io import SCHEDULES, check_schedule_durations

    if t.schedule not in SCHEDULES:
        raise PlenaInputError(
            "training.schedule", f"schedule must be one of {', '.join(SCHEDULES)}"
        )
    pp, vpp, m = _opt(t, "pp_size", 1), _opt(t, "vpp_size", 1), _opt(t, "microbatches", 8)
    for name, v in (("pp_size", pp), ("vpp_size", vpp), ("microbatches", m)):
        if v < 1:
            raise PlenaInputError(f"training.{name}", f"training.{name} must be greater than zero")
    if pp * vpp * m * 4 > MAX_TRAINING_OPS:
        raise ServerLimitError(
            "training", f"the schedule has more ops than the server limit of {MAX_TRAINING_OPS}"
        )
    if not t.base_ms:
        raise PlenaInputError("training.base_ms", "training.base_ms is required (ms per op type)")
    try:
        # the CLI's --durations rules: schedule op types only, finite, 0 <= ms <= MAX_DURATION
        stage_ms = check_schedule_durations(t.schedule, dict(t.base_ms))
        plan = api.build_schedule(t.schedule, pp, m, vpp)
        _check_work(plan.n_ops, samples, noise, limits)
        # base_ms is per pipeline stage; each of the vpp chunk ops takes F/v (spec §1.3)
        sim = api.simulate_schedule(
            plan, stage_ms, noise=noise, samples=samples, seed=seed, stop=token
        )
    except PlenaInputError as exc:
        raise _training_field(exc) from exc
    res = sim.result
    out = pb.SimulateResponse(
        mode="training",
        time_unit="ms",
        makespan=res.makespan,
        bubble_ratio=res.deterministic.bubble_ratio,
        n_ops=plan.n_ops,
        result_json=jsonio.dumps(sim.document()),
        partial=res.partial,
        stop_reason=res.stop_reason,
    )
    if res.mc:
        out.distributions.append(distribution("makespan", "ms", res.mc.makespan))
        out.criticality.update(res.mc.criticality_by_type)
    if traces and _may_trace(token, out):
        _traces(sim.trace_documents(), limits.max_trace_bytes, out)
    return out


def _may_trace(token: StopToken, out: pb.SimulateResponse) -> bool:
    if not token.is_set():
        return True
    out.partial = True
    out.stop_reason = out.stop_reason or token.reason
    out.warnings.append(f"traces skipped: the simulation was stopped ({token.reason})")
    return False


def _training_field(exc: PlenaInputError) -> PlenaInputError:
    head, _, rest = exc.field.partition(".")
    if head in _TRAINING_FIELDS:
        name = _TRAINING_FIELDS[head] + (f".{rest}" if rest else "")
        rule = exc.rule
        if head == "durations":  # the rule text names the field too: use the proto's name
            rule = rule.replace(exc.field, name, 1)
        return type(exc)(name, rule)
    return exc


def _check_work(n_ops: int, samples: int, noise: Any, limits: Any) -> None:
    """The shared estimate of a simulation's work and memory (``api.limits.check_work``)."""
    bounds.check_work(n_ops, samples, noise, limits.max_simulate_bytes)


def _inference(
    t: pb.InferenceTarget,
    noise: Any,
    samples: int,
    seed: int,
    traces: bool,
    servicer: Any,
    token: StopToken,
) -> pb.SimulateResponse:
    steps = _opt(t, "max_window_steps", 64)
    if not 1 <= steps <= MAX_WINDOW_STEPS:
        raise PlenaInputError(
            "inference.max_window_steps",
            f"inference.max_window_steps must be between 1 and {MAX_WINDOW_STEPS}",
        )
    inputs = convert.load_inputs(t.system, t.workload, servicer.limits, "inference")
    plan = convert.to_plan(t.plan, "inference.plan")

    def check_work(times: Any) -> None:
        # ops of the largest of the three windows: p stages × (m micro-batches × steps + prefill)
        ops = times.pp * times.micro_batches * (times.decode_steps + 2) * 3
        _check_work(ops, samples, noise, servicer.limits)

    try:
        sim = api.simulate_plan(
            inputs,
            plan,
            noise=noise,
            samples=samples,
            seed=seed,
            max_window_steps=steps,
            check_work=check_work,
            stop=token,
        )
    except PlenaInputError as exc:
        q = convert.qualify(exc)
        raise type(q)(
            q.field if q.field.startswith("inference") else f"inference.{q.field}", q.rule
        ) from exc
    res = sim.result
    doc = sim.document()
    out = pb.SimulateResponse(
        mode="inference",
        time_unit="s",
        makespan=res.window.makespan,
        bubble_ratio=res.window.deterministic.bubble_ratio,
        n_ops=sim.n_ops,
        micro_batches=sim.micro_batches,
        decode_steps=sim.decode_steps,
        result_json=jsonio.dumps(doc),  # the CLI's --json document
        serving=serving_to_proto(doc),
        partial=res.partial,
        stop_reason=res.stop_reason,
    )
    if res.ttft is not None:
        out.distributions.append(distribution("ttft", "s", res.ttft))
    if res.tps is not None:
        out.distributions.append(distribution("tps", "tokens/s", res.tps))
    if traces and _may_trace(token, out):
        _traces(sim.trace_documents(), servicer.limits.max_trace_bytes, out)
    return out
