"""Simulate RPC: one inference plan's serving windows or one training schedule, as
``plena-opt simulate`` computes them (pipeline-simulator §1–§3), with limits on the work."""

from __future__ import annotations

import json
from typing import Any

import grpc
from plena_proto import plena_opt_pb2 as pb
from plena_proto.traces import pack_trace

from plena_opt.errors import PlenaInputError
from plena_server import convert
from plena_server.errors import ServerLimitError

DEFAULT_NOISE = "sigma=0.05"  # the CLI's --noise default
DEFAULT_SAMPLES = 1000
MAX_WINDOW_STEPS = 1024
MAX_TRAINING_OPS = 200_000  # ops in one training plan
MAX_WORK = 200_000_000  # ops × samples per request
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


def noise_spec(request: pb.SimulateRequest | pb.SearchOptions, default: str = DEFAULT_NOISE) -> Any:
    """The library ``NoiseSpec`` of a request's ``noise`` (unset → ``default``, the CLI's)."""
    from plena_opt.pipeline.simulator import parse_noise

    if not request.HasField("noise"):
        return parse_noise(default)
    n = request.noise
    doc: dict[str, Any] = {}
    if n.version:
        doc["version"] = n.version
    for name in ("jitter_sigma", "rank_sigma"):
        if n.HasField(name):
            doc[name] = getattr(n, name)
    if n.HasField("straggler"):
        st = n.straggler
        doc["straggler"] = {"probability": st.probability}
        for name in ("factor_low", "factor_high"):
            if st.HasField(name):
                doc["straggler"][name] = getattr(st, name)
    if n.HasField("moe"):
        m = n.moe
        doc["moe"] = {"experts": m.experts, "tokens": m.tokens}
        for name in ("top_k", "ep", "alpha", "fraction"):
            if m.HasField(name):
                doc["moe"][name] = getattr(m, name)
        if m.op_types:
            doc["moe"]["op_types"] = list(m.op_types)
    return parse_noise(doc)


def distribution(metric: str, unit: str, q: Any) -> pb.Distribution:
    return pb.Distribution(
        metric=metric,
        unit=unit,
        samples=q.n,
        mean=q.mean,
        p50=q.p50,
        p90=q.p90,
        p99=q.p99,
        mean_ci_low=q.mean_ci[0],
        mean_ci_high=q.mean_ci[1],
        p50_ci_low=q.p50_ci[0],
        p50_ci_high=q.p50_ci[1],
        p90_ci_low=q.p90_ci[0],
        p90_ci_high=q.p90_ci[1],
        p99_ci_low=q.p99_ci[0],
        p99_ci_high=q.p99_ci[1],
    )


def _traces(res: Any, unit_us: float, other: dict, cap: int, out: pb.SimulateResponse) -> None:
    from plena_opt.pipeline.simulator import chrome_trace

    used = 0
    for name, timeline in res.timelines().items():
        packed = pack_trace(chrome_trace(timeline, unit_us=unit_us, other=other), name)
        if used + packed.compressed_bytes > cap:
            out.warnings.append(f"trace {name} dropped: over the {cap}-byte trace limit")
            continue
        used += packed.compressed_bytes
        out.traces.append(packed)


def simulate(servicer: Any, request: pb.SimulateRequest, context: grpc.ServicerContext) -> Any:
    limits = servicer.limits
    samples = _opt(request, "samples", DEFAULT_SAMPLES)
    if samples < 0:
        raise PlenaInputError("samples", "samples must be >= 0")
    if samples > limits.max_samples:
        raise ServerLimitError("samples", f"samples is above the server limit {limits.max_samples}")
    from plena_opt.pipeline.simulator import check_seed

    seed = check_seed(_opt(request, "seed", 0))  # 0 <= seed < 2**32, as the CLI's --seed
    noise = noise_spec(request)
    target = request.WhichOneof("target")
    if target == "training":
        return _training(request.training, noise, samples, seed, request.include_traces, limits)
    if target == "inference":
        return _inference(request.inference, noise, samples, seed, request.include_traces, servicer)
    raise PlenaInputError("target", "target is required: inference or training")


def _training(
    t: pb.TrainingSchedule, noise: Any, samples: int, seed: int, traces: bool, limits: Any
) -> pb.SimulateResponse:
    from plena_opt.pipeline.report import schedule_document
    from plena_opt.pipeline.scheduler import SCHEDULES, build_schedule
    from plena_opt.pipeline.simulator import check_schedule_durations, per_op_durations
    from plena_opt.pipeline.simulator import simulate as run

    if t.schedule not in SCHEDULES:
        raise PlenaInputError(
            "training.schedule", f"schedule must be one of {', '.join(SCHEDULES)}"
        )
    pp, vpp, m = _opt(t, "pp_size", 1), _opt(t, "vpp_size", 1), _opt(t, "microbatches", 8)
    for name, v in (("pp_size", pp), ("vpp_size", vpp), ("microbatches", m)):
        if v < 1:
            raise PlenaInputError(f"training.{name}", f"training.{name} must be greater than zero")
    if pp * vpp * m * 4 > MAX_TRAINING_OPS:
        raise ServerLimitError("training", f"the schedule has more than {MAX_TRAINING_OPS} ops")
    if not t.base_ms:
        raise PlenaInputError("training.base_ms", "training.base_ms is required (ms per op type)")
    try:
        # the CLI's --durations rules: schedule op types only, finite, 0 <= ms <= MAX_DURATION
        stage_ms = check_schedule_durations(t.schedule, dict(t.base_ms))
        plan = build_schedule(t.schedule, pp, m, vpp)
        _check_work(plan.n_ops, samples)
        # base_ms is per pipeline stage; each of the vpp chunk ops takes F/v (spec §1.3)
        res = run(plan, per_op_durations(plan, stage_ms), noise, samples, seed)
    except PlenaInputError as exc:
        raise _training_field(exc) from exc
    doc = schedule_document(res, stage_ms)
    out = pb.SimulateResponse(
        mode="training",
        time_unit="ms",
        makespan=res.makespan,
        bubble_ratio=res.deterministic.bubble_ratio,
        n_ops=plan.n_ops,
        result_json=json.dumps(doc),
    )
    if res.mc:
        out.distributions.append(distribution("makespan", "ms", res.mc.makespan))
        out.criticality.update(res.mc.criticality_by_type)
    if traces:
        _traces(res, 1000.0, {"unit": "ms"}, limits.max_trace_bytes, out)
    return out


def _training_field(exc: PlenaInputError) -> PlenaInputError:
    head, _, rest = exc.field.partition(".")
    if head in _TRAINING_FIELDS:
        name = _TRAINING_FIELDS[head] + (f".{rest}" if rest else "")
        rule = exc.rule
        if head == "durations":  # the rule text names the field too: use the proto's name
            rule = rule.replace(exc.field, name, 1)
        return type(exc)(name, rule)
    return exc


def _check_work(n_ops: int, samples: int) -> None:
    if n_ops * max(samples, 1) > MAX_WORK:
        raise ServerLimitError(
            "samples", f"{n_ops} ops × {samples} samples is above the server limit {MAX_WORK}"
        )


def _inference(
    t: pb.InferenceTarget, noise: Any, samples: int, seed: int, traces: bool, servicer: Any
) -> pb.SimulateResponse:
    from plena_opt.estimate import Evaluator
    from plena_opt.pipeline.report import serving_document
    from plena_opt.pipeline.scheduler import stage_times_from_estimate
    from plena_opt.pipeline.simulator import simulate_serving

    steps = _opt(t, "max_window_steps", 64)
    if not 1 <= steps <= MAX_WINDOW_STEPS:
        raise PlenaInputError(
            "inference.max_window_steps",
            f"inference.max_window_steps must be between 1 and {MAX_WINDOW_STEPS}",
        )
    system = convert.load_system(t.system, servicer.limits, "inference.system")
    workload = convert.to_workload(t.workload, "inference.workload")
    plan = convert.to_plan(t.plan, "inference.plan")
    try:
        ev = Evaluator(system.model, system.noc, system.memory, workload, system.chip)
        est = ev.estimate(plan).to_dict()
        times = stage_times_from_estimate(est, max_decode_steps=steps)
    except PlenaInputError as exc:
        q = convert.qualify(exc)
        raise type(q)(
            q.field if q.field.startswith("inference") else f"inference.{q.field}", q.rule
        ) from exc
    # ops of the largest of the three windows: p stages × (m micro-batches × steps + prefill)
    _check_work(times.pp * times.micro_batches * (times.decode_steps + 2) * 3, samples)
    ana = {"ttft_seconds": float(est["ttft_seconds"]), "tps": float(est["tps"])}
    res = simulate_serving(times, noise, samples, seed, analytic=ana)
    doc = serving_document(res, est.get("plan"))  # the CLI's --json document
    out = pb.SimulateResponse(
        mode="inference",
        time_unit="s",
        makespan=res.window.makespan,
        bubble_ratio=res.window.deterministic.bubble_ratio,
        n_ops=res.window.plan.n_ops,
        micro_batches=times.micro_batches,
        decode_steps=times.decode_steps,
        result_json=json.dumps(doc),
    )
    if res.ttft is not None:
        out.distributions.append(distribution("ttft", "s", res.ttft))
    if res.tps is not None:
        out.distributions.append(distribution("tps", "tokens/s", res.tps))
    if traces:
        other = {"plan": est.get("plan"), "unit": "s"}
        _traces(res.window, 1e6, other, servicer.limits.max_trace_bytes, out)
    return out
