"""Typed results ↔ gRPC messages (``plena_proto``), in one place for the server and the CLI's
remote mode. Floats travel as IEEE doubles, so a result read back is bit-identical."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from plena_proto import plena_opt_pb2 as pb

from plena_opt.metrics import INTERVAL_BASIS, METRICS
from plena_opt.vocabulary import PLAN_DIMS

if TYPE_CHECKING:
    from plena_opt.estimate.cost import CostFigures
    from plena_opt.estimate.evaluator import PlanMetrics
    from plena_opt.estimate.plan import Plan
    from plena_opt.search.result import FrontEntry
    from plena_opt.simulator.engine import NoiseSpec, QuantileStats, RecheckResult

PLAN_FIELDS = (*PLAN_DIMS, "moe_tp_mode", "comm_overlap")
# PlanMetrics figures a summary always has (set by name); the registry's others are optional
_REQUIRED = ("ttft_seconds", "tps", "tps_per_sequence")
# a summary's figures beside the registry's: serving, cost, and the interval's basis (issue 30)
_SUMMARY_EXTRA = ("max_batch", "capacity_bound", "cost_note", *INTERVAL_BASIS)
# ``estimate.cost.COST_FIELDS`` (named here so the wire does not import the cost module)
COST_FIELDS = (
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "tps_per_kilowatt",
    "power_watts_per_device",
    "cost_note",
)


def plan_to_proto(plan: Plan | Mapping[str, Any]) -> pb.Plan:
    """A ``Plan`` or a ``plan`` mapping (extra keys such as ``batch_size`` are ignored)."""
    if isinstance(plan, Mapping):
        msg = pb.Plan(**{k: plan[k] for k in PLAN_FIELDS if k in plan})
        moe_tp = plan.get("moe_tp")
    else:
        msg = pb.Plan(**{k: getattr(plan, k) for k in PLAN_FIELDS})
        moe_tp = plan.moe_tp
    if moe_tp:  # unset for a shorthand plan (the reference message)
        msg.moe_tp = int(moe_tp)
    return msg


def plan_from_proto(p: pb.Plan) -> Plan:
    from plena_opt.estimate.plan import Plan

    return Plan(p.tp, p.ep, p.dp, p.pp, p.cp, p.moe_tp_mode, p.comm_overlap, p.moe_tp)


def _named(values: Mapping[str, float] | None) -> list[pb.NamedValue]:
    return [pb.NamedValue(name=str(k), value=float(v)) for k, v in (values or {}).items()]


def _num(value: Any) -> float:
    return float(value) if value is not None else 0.0


def metrics_to_proto(
    m: PlanMetrics | Mapping[str, Any], cost: CostFigures | None = None
) -> pb.PlanMetrics:
    """``PlanMetrics`` (SI: seconds, tokens/s, J/token, bytes) or its ``to_dict()`` → proto,
    with the plan's ``cost`` figures when given. The registry's metrics (``plena_opt.metrics``)
    go by name: every declared figure the estimate or its cost carries (and its
    ``_low``/``_high``), unset when None; the rest of the message is the plan's breakdown."""
    d = m if isinstance(m, Mapping) else m.to_dict()
    msg = pb.PlanMetrics(
        plan=plan_to_proto(d["plan"]),
        weight_bytes_per_device=_num(d.get("weight_bytes_per_device")),
        kv_cache_bytes_per_device=_num(d.get("kv_cache_bytes_per_device")),
        bottleneck=str(d.get("bottleneck") or ""),
        decode_step_seconds=_num(d.get("decode_step_seconds")),
        attribution_seconds=_named(d.get("attribution")),
        constraints=_named(d.get("constraints")),
        warnings=[str(w) for w in d.get("warnings") or []],
    )
    figures = {**d, **(cost.to_dict() if cost is not None else {})}  # cost: issue 30
    for metric in METRICS:
        for name in (metric.name, *metric.interval_names):
            _set(msg, name, None if figures.get(name) is None else float(figures[name]))
    if d.get("fits_in_memory") is not None:
        msg.fits_in_memory = bool(d["fits_in_memory"])
    _set(msg, "cost_note", figures.get("cost_note"))
    return msg


def cost_from_proto(m: pb.PlanMetrics) -> CostFigures | None:
    """The cost figures a ``PlanMetrics`` carries (None when it carries none)."""
    from plena_opt.estimate.cost import CostFigures

    if not any(m.HasField(name) for name in COST_FIELDS):
        return None
    return CostFigures(**{n: getattr(m, n) if m.HasField(n) else None for n in COST_FIELDS})


def metrics_from_proto(m: pb.PlanMetrics) -> PlanMetrics:
    """Rebuild ``PlanMetrics`` from its proto (exact doubles)."""
    from plena_opt.estimate.evaluator import PlanMetrics

    return PlanMetrics(
        plan=plan_from_proto(m.plan),
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


def summary_to_proto(
    plan: Mapping[str, Any],
    s: Mapping[str, Any],
    *,
    label: str = "",
    constraints: Mapping[str, float] | None = None,
    trial_number: int | None = None,
) -> pb.PlanMetrics:
    """A stored metric summary (a trial's ``metrics`` attribute or a ``FrontEntry``: ms,
    tokens/s, J/token, bytes) → proto (SI: ms → s): the metrics of ``plena_opt.metrics`` by
    their names, with their ``_low``/``_high`` where the summary has an interval."""
    attribution = s.get("attribution_s") or {}
    msg = pb.PlanMetrics(
        plan=plan_to_proto(plan),
        ttft_seconds=s["ttft_ms"] / 1e3,
        tps=s["tps"],
        tps_per_sequence=s["tps_per_sequence"],
        weight_bytes_per_device=s["weight_bytes_per_device"],
        kv_cache_bytes_per_device=s["kv_cache_bytes_per_device"],
        bottleneck=s.get("bottleneck") or "",
        attribution_seconds=_named(attribution),
        decode_step_seconds=sum(attribution.values()),
        warnings=list(s.get("warnings") or []),
        label=label,
        constraints=_named(constraints),
        batch_size=int(plan.get("batch_size", 0)),
        precision=str(plan.get("precision") or ""),
    )
    if s.get("fits_in_memory") is not None:
        msg.fits_in_memory = s["fits_in_memory"]
    if trial_number is not None:
        msg.trial_number = trial_number
    for m in METRICS:  # the registry's other figures and interval ends (SI; unset when None)
        if m.name not in _REQUIRED:
            _set(msg, m.name, m.to_si(s.get(m.field)))
        for end in m.interval_names:
            _set(msg, end, s.get(end))
    for name in _SUMMARY_EXTRA:  # serving (issue 16), cost (issue 30), the interval's basis
        _set(msg, name, s.get(name))
    if s.get("under_load") is not None:  # a search under load (issue 23)
        from plena_opt.api.under_load_wire import plan_under_load_to

        plan_under_load_to(s, msg.under_load)
    return msg


def _set(msg: pb.PlanMetrics, name: str, value: Any) -> None:
    if value is not None:
        setattr(msg, name, value)


def front_entry_to_proto(e: FrontEntry) -> pb.PlanMetrics:
    """A search front entry → proto."""
    return summary_to_proto(
        e.plan,
        e.model_dump(),
        label=e.label,
        constraints=e.constraints,
        trial_number=e.trial_number,
    )


def distribution(metric: str, unit: str, q: QuantileStats) -> pb.Distribution:
    """Monte Carlo statistics of one metric (``unit`` as named) → proto."""
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


def recheck_to_proto(index: int, rc: RecheckResult) -> pb.RecheckResult:
    res = rc.serving
    msg = pb.RecheckResult(
        plan_index=index,
        ttft_deterministic_seconds=res.ttft_deterministic,
        tps_deterministic=res.tps_deterministic,
        notes=list(res.causes),
    )
    if res.ttft is not None:
        msg.distributions.append(distribution("ttft", "s", res.ttft))
    if res.tps is not None:
        msg.distributions.append(distribution("tps", "tokens/s", res.tps))
    return msg


def noise_to_proto(spec: NoiseSpec) -> pb.NoiseSpec:
    """A validated ``NoiseSpec`` → proto."""
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


def noise_from_proto(n: pb.NoiseSpec) -> NoiseSpec:
    """Proto → validated ``NoiseSpec`` (unset optional fields keep the library defaults)."""
    from plena_opt.simulator.engine import parse_noise

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


def _pass_to_proto(d: Mapping[str, Any]) -> pb.PassCost:
    stages = []
    for st in d["stages"]:
        msg = pb.StageCost(
            stage=st["stage"],
            layers=st["layers"],
            seconds=st["seconds"],
            compute_seconds=st["compute_seconds"],
            memory_seconds=st["memory_seconds"],
            memory_bound_seconds=st["memory_bound_seconds"],
            comm_seconds=_named(st.get("comm_seconds")),
            read_bytes=st["read_bytes"],
            write_bytes=st["write_bytes"],
        )
        if st.get("dram_energy_pj") is not None:
            msg.dram_energy_pj = st["dram_energy_pj"]
        stages.append(msg)
    return pb.PassCost(
        stages=stages,
        transfer_seconds=d["transfer_seconds"],
        period_seconds=d["period_seconds"],
        latency_seconds=d["latency_seconds"],
        bottleneck_stage=d["bottleneck_stage"],
    )


def estimate_to_proto(mode: str, doc: Mapping[str, Any]) -> pb.Estimate:
    """An estimate document (``PlanEstimate.document``) → the typed ``Estimate`` message."""
    single = mode == "single_chip"
    model = doc["model"]
    msg = pb.Estimate(
        model_name=model if isinstance(model, str) else model["name"],
        memory_name=doc["memory"]["name"],
        batch_size=doc["batch_size"],
        input_seq_len=doc["input_seq_len"],
        output_seq_len=doc["output_seq_len"],
        overlap_policy=doc["overlap_policy"],
        include_lm_head=doc["include_lm_head"],
        compute_frequency_hz=doc["compute_frequency_hz"],
        ttft_seconds=doc["ttft_seconds"],
        tps=doc["tps"],
        weight_bytes_per_device=doc[
            "weight_footprint_bytes" if single else "weight_bytes_per_device"
        ],
        kv_cache_bytes_per_device=doc[
            "kv_cache_footprint_bytes" if single else "kv_cache_bytes_per_device"
        ],
        warnings=[str(w) for w in doc.get("warnings") or []],
    )
    for name in ("memory_capacity_bytes", "fits_in_memory", "noc_energy_pj_per_decode_token"):
        if doc.get(name) is not None:
            setattr(msg, name, doc[name])
    if single:
        return msg
    msg.noc_name = doc["noc"]["name"]
    msg.plan.CopyFrom(plan_to_proto(doc["plan"]))
    msg.comm_overlap = doc["comm_overlap"]
    msg.routing = doc["routing"] or ""
    for name in ("micro_batch", "sequences_per_device", "tps_per_sequence", "decode_seconds"):
        setattr(msg, name, doc[name])
    msg.prefill.CopyFrom(_pass_to_proto(doc["prefill"]))
    msg.first_token_decode.CopyFrom(_pass_to_proto(doc["first_token_decode"]))
    return msg


def serving_to_proto(doc: Mapping[str, Any]) -> pb.ServingReport:
    """A serving document (``ServingResult.to_dict()``) → ``ServingReport``."""
    ana, sim = doc["analytic"], doc["simulated"]
    msg = pb.ServingReport(
        analytic_ttft_seconds=ana["ttft_seconds"],
        analytic_tps=ana["tps"],
        isolated_ttft_seconds=sim["isolated_ttft_seconds"],
        steady_decode_period_seconds=sim["steady_decode_period_seconds"],
        steady_decode_tps=sim["steady_decode_tps"],
        window_ttft_seconds=sim["window_ttft_seconds"],
        window_makespan_seconds=sim["window_makespan_seconds"],
        causes=list(doc["causes"]),
    )
    if sim["window_decode_period_seconds"] is not None:
        msg.window_decode_period_seconds = sim["window_decode_period_seconds"]
    return msg


def model_to_proto(describe: Mapping[str, Any]) -> pb.ModelDescription:
    """``ModelSpec.describe()`` → ``ModelDescription``."""
    return pb.ModelDescription(
        **{f.name: describe[f.name] for f in pb.ModelDescription.DESCRIPTOR.fields}
    )


def profile_description(kind: str, describe: Mapping[str, Any]) -> dict[str, Any]:
    """``ProfileInfo``'s typed description (``{"noc"|"memory"|"chip": message}``) of a
    profile's ``describe()`` document."""
    if kind == "noc":
        levels = [
            pb.NocLevel(**{k: lv[k] for k in pb.NocLevel.DESCRIPTOR.fields_by_name if k in lv})
            for lv in describe.get("layers", [])
        ]
        msg = pb.NocDescription(
            name=describe["name"],
            num_devices=describe["num_devices"],
            levels=levels,
            energy_pj_per_bit=describe.get("energy_pj_per_bit") or {},
        )
        return {"noc": msg}
    if kind == "memory":
        mem = pb.MemoryDescription(
            name=describe["name"],
            kind=describe["kind"],
            usable_bandwidth_bytes_per_s=describe["usable_bandwidth_bytes_per_s"],
            compute_frequency_scale=describe["compute_frequency_scale"],
        )
        if describe.get("capacity_bytes") is not None:
            mem.capacity_bytes = describe["capacity_bytes"]
        return {"memory": mem}
    chip = pb.ChipDescription(name=describe["name"], description=describe.get("description", ""))
    return {"chip": chip}
