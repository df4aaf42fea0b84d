"""Use case: capacity over a load curve (``plena-opt capacity``, issue 30 item 2).

For each candidate deployment — a GPU type of ``gpus`` on its one-node HGX profile, at each
tensor-parallel size of ``TP_SIZES`` that the model splits into and whose weights leave KV cache
for at least one sequence in ``DEFAULT_MEMORY_FRACTION`` of memory — the most requests/s one
replica serves within the SLA at its percentile (``serving.sla_rate.max_rate``: the open-loop
steady state of the engine's default scheduler, Poisson arrivals), replicas per interval and the
cost of scaling them (``serving.fleet``: planned scale-up ``delay`` ahead, reactive, fixed fleet
for the peak). GPU-hours are priced at the price file's ``usd_per_gpu_hour`` (an on-demand hour
includes the power: no electricity is added). The answer is the candidate with the lowest planned
$/day that meets the SLA in every interval; a candidate that cannot is listed with the reason.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from plena_opt.api.capacity_mix import MixedCandidate
from plena_opt.errors import PlenaInputError

TP_SIZES = (1, 2, 4, 8)  # tensor-parallel sizes tried; one HGX node holds 8 GPUs
# GPU chip profile -> its one-node NoC profile (deepstack/profiles): the node a replica runs on
NODE_PROFILES = {
    "h100-sxm": "hgx-h100x8",
    "h200-sxm": "hgx-h200x8",
    "b200": "hgx-b200x8",
    "b300": "hgx-b300x8",
}
MAX_GPU_TYPES = 8
MAX_MIN_REPLICAS = 10_000
MAX_DELAY_MIN = 720.0  # a scale-up delay of at most 12 h (below the shortest period, a day)


@dataclass(frozen=True)
class CapacityRequest:
    """What to plan: model, load curve, GPU types, SLA (ms at ``percentile``), scaling inputs."""

    model: str
    load: str | Path
    gpus: tuple[str, ...]
    max_ttft_ms: float | None = None
    max_tpot_ms: float | None = None
    percentile: str = "p90"
    min_replicas: int = 1
    scale_up_delay_min: float = 0.0
    prices: str | Path | None = None
    engine: str = "vllm"
    precision: str = "bf16"
    mixed: bool = False  # also price the per-interval cheapest mix of the candidates


@dataclass
class Candidate:
    """One deployment: ``gpu`` × TP ``tp`` per replica; ``skipped`` says why it was not priced,
    ``infeasible`` why it cannot meet the SLA all day; else its per-interval replicas and costs."""

    name: str
    gpu: str
    tp: int
    skipped: str | None = None
    infeasible: str | None = None
    max_rate_per_replica: list[float] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)
    usd_per_gpu_hour: float | None = None
    gpu_hours_per_day: float | None = None
    usd_per_day: float | None = None
    slo_attainment: float | None = None
    fixed_fleet_usd_per_day: float | None = None
    fixed_fleet_replicas: int | None = None
    reactive_usd_per_day: float | None = None
    reactive_slo_attainment: float | None = None
    # the measured error's interval (``api.capacity_bounds``): replicas, GPU-h and $/day at its
    # low and high ends; None with ``interval_note`` saying why
    interval_group: str | None = None
    interval_note: str | None = None
    replicas_low: list[int] | None = None
    replicas_high: list[int] | None = None
    gpu_hours_per_day_low: float | None = None
    gpu_hours_per_day_high: float | None = None
    usd_per_day_low: float | None = None
    usd_per_day_high: float | None = None
    # requests/s per replica per interval at the interval's ``low`` end (the optimistic one:
    # the model's TTFT/TPOT × the low ratios) and ``high`` end; empty without a measured group
    max_rate_per_replica_at_end: dict[str, list[float]] = field(default_factory=dict)

    @property
    def priced(self) -> bool:
        return self.skipped is None and self.infeasible is None and self.usd_per_day is not None

    def replicas_at(self, i: int) -> int:
        return self.replicas[i]

    def gpus_at(self, i: int) -> dict[str, int]:
        return {self.gpu: self.replicas[i] * self.tp}

    def total_replicas(self) -> list[int]:
        return list(self.replicas)


@dataclass
class CapacityPlan:
    """The answer: the chosen candidate (None: none meets the SLA all day), every candidate, and
    the curve's intervals."""

    request: CapacityRequest
    intervals: list[dict[str, float]]
    period_hours: float
    candidates: list[Candidate]
    chosen: Candidate | MixedCandidate | None
    mix: MixedCandidate | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (names in issue 30)."""
        c = self.chosen
        rows = []
        for i, iv in enumerate(self.intervals):
            row = dict(iv)
            if c is not None:
                row.update(deployment=c.name, replicas=c.replicas_at(i), gpus=c.gpus_at(i))
                for end in ("low", "high"):
                    reps = getattr(c, f"replicas_{end}", None)
                    row[f"replicas_{end}"] = None if reps is None else reps[i]
            rows.append(row)
        saving = None
        if c is not None and c.fixed_fleet_usd_per_day:
            saving = 1 - c.usd_per_day / c.fixed_fleet_usd_per_day  # type: ignore[operator]
        return {
            "model": self.request.model,
            "sla": {
                "max_ttft_ms": self.request.max_ttft_ms,
                "max_tpot_ms": self.request.max_tpot_ms,
                "percentile": self.request.percentile,
            },
            "min_replicas": self.request.min_replicas,
            "scale_up_delay_min": self.request.scale_up_delay_min,
            "period_hours": self.period_hours,
            "deployment": None if c is None else c.name,
            "intervals": rows,
            "gpu_hours_per_day": None if c is None else c.gpu_hours_per_day,
            "usd_per_day": None if c is None else c.usd_per_day,
            "slo_attainment": None if c is None else c.slo_attainment,
            "fixed_fleet_usd_per_day": None if c is None else c.fixed_fleet_usd_per_day,
            **_interval_fields(c),
            "saving_vs_fixed_fleet": saving,
            "candidates": [asdict(k) for k in self.candidates],
            "mixed": None if self.mix is None else asdict(self.mix),
        }


def _interval_fields(c: Candidate | MixedCandidate | None) -> dict[str, Any]:
    """The chosen deployment's interval (``api.capacity_bounds``) or why it has none."""
    names = ("gpu_hours_per_day_low", "gpu_hours_per_day_high", "usd_per_day_low",
             "usd_per_day_high", "interval_group", "interval_note")  # fmt: skip
    out = {n: getattr(c, n, None) for n in names}
    out["interval_left_out"] = getattr(c, "interval_left_out", None)  # a mix's unbounded pools
    return out


def _check(req: CapacityRequest) -> None:
    if not req.gpus:
        raise PlenaInputError("gpus", "give at least one GPU type")
    if len(req.gpus) > MAX_GPU_TYPES:
        raise PlenaInputError("gpus", f"at most {MAX_GPU_TYPES} GPU types")
    for g in req.gpus:
        if g not in NODE_PROFILES:
            raise PlenaInputError(
                "gpus", f"no one-node profile for GPU {g[:32]!r}; known: {', '.join(NODE_PROFILES)}"
            )
    if req.max_ttft_ms is None and req.max_tpot_ms is None:
        raise PlenaInputError("sla", "give --max-ttft-ms, --max-tpot-ms or both")
    for name, v in (("max_ttft_ms", req.max_ttft_ms), ("max_tpot_ms", req.max_tpot_ms)):
        if v is not None and not (math.isfinite(v) and 0 < v <= 3.6e6):
            raise PlenaInputError(name, f"{name} must be in (0, 3600000] ms")
    if not 0 <= req.min_replicas <= MAX_MIN_REPLICAS:
        raise PlenaInputError("min_replicas", f"min_replicas must be 0..{MAX_MIN_REPLICAS}")
    from plena_opt.estimate import Workload

    Workload(precision=req.precision)  # an unknown format is refused naming --precision
    d = req.scale_up_delay_min
    if not (math.isfinite(d) and 0 <= d <= MAX_DELAY_MIN):
        raise PlenaInputError("scale_up_delay_min", f"must be 0..{MAX_DELAY_MIN:g} minutes")


def plan_capacity(req: CapacityRequest) -> CapacityPlan:
    """Price every candidate over the load curve and pick the cheapest meeting the SLA."""
    from plena_opt.estimate.cost import load_prices
    from plena_opt.models import load_model
    from plena_opt.serving.load_curve import load_curve
    from plena_opt.serving.sla_rate import Sla

    _check(req)
    curve = load_curve(req.load)
    prices = load_prices(req.prices)
    model = load_model(req.model)
    sla = Sla(
        None if req.max_ttft_ms is None else req.max_ttft_ms / 1e3,
        None if req.max_tpot_ms is None else req.max_tpot_ms / 1e3,
        req.percentile,
    )
    cands = []
    for gpu in dict.fromkeys(req.gpus):
        for tp in TP_SIZES:
            cand = Candidate(f"{gpu} tp{tp}", gpu, tp)
            price = prices.chips.get(gpu)
            if price is None:
                cand.skipped = f"no price for chip {gpu!r} in the price file"
            else:
                cand.usd_per_gpu_hour = price.usd_per_gpu_hour
                _price_candidate(cand, model, curve, sla, req)
            cands.append(cand)
    ok: list[Candidate | MixedCandidate] = [c for c in cands if c.priced]
    mix = None
    if req.mixed:
        from plena_opt.api.capacity_mix import price_mix

        mix = price_mix(cands, curve, req.min_replicas, req.scale_up_delay_min)
        ok += [mix] if mix.priced else []
    # the cheapest; on a tie a single deployment before the mix, then fewer GPUs per replica
    chosen = min(ok, key=_order) if ok else None
    intervals = [
        {"start_hour": iv.start_hour, "hours": iv.hours, "requests_per_second": iv.rate_per_s}
        for iv in curve.intervals
    ]
    return CapacityPlan(req, intervals, curve.period_hours, cands, chosen, mix)


def _order(c: Candidate | MixedCandidate) -> tuple[float, int, str]:
    if isinstance(c, Candidate):
        return (round(c.usd_per_day, 9), c.tp, c.name)  # type: ignore[arg-type]
    return (round(c.usd_per_day, 9), 1 << 30, c.name)  # type: ignore[arg-type]


def _price_candidate(
    cand: Candidate, model: Any, curve: Any, sla: Any, req: CapacityRequest
) -> None:
    from plena_opt.api.capacity_bounds import Profile, bound_candidate
    from plena_opt.serving.fleet import fleet_costs, replicas_needed
    from plena_opt.serving.load_curve import length_profile
    from plena_opt.serving.sla_rate import max_rate

    longest = max(curve.intervals, key=lambda iv: iv.input_tokens + iv.output_tokens)
    step_for = _setup(cand, model, req, (round(longest.input_tokens), round(longest.output_tokens)))
    if step_for is None:
        return
    rates, profiles, keys = {}, {}, []
    for iv in curve.intervals:
        key = length_profile(iv.input_tokens, iv.output_tokens, iv.input_tokens_p90)
        isl, osl, tail = key
        if key not in rates:
            step, max_seqs = step_for(isl, osl)
            rates[key] = max_rate(step, isl, osl, sla, tail_input_len=tail, max_sequences=max_seqs)
            profiles[key] = Profile(step, isl, osl, tail, max_seqs, rates[key])
        cand.max_rate_per_replica.append(rates[key])
        keys.append(key)
    lam = [iv.rate_per_s for iv in curve.intervals]
    if all(mu <= 0 for mu in cand.max_rate_per_replica):
        cand.infeasible = "misses the SLA even at a trickle of requests (one at a time)"
        return
    try:
        cand.replicas = replicas_needed(lam, cand.max_rate_per_replica, req.min_replicas)
    except PlenaInputError as exc:
        cand.infeasible = exc.rule
        return
    costs = fleet_costs(
        [iv.start_hour for iv in curve.intervals],
        lam,
        cand.max_rate_per_replica,
        cand.replicas,
        period=curve.period_hours,
        gpus=cand.tp,
        usd_per_gpu_hour=cand.usd_per_gpu_hour,  # type: ignore[arg-type]
        delay_hours=req.scale_up_delay_min / 60,
    )
    p, r, f = costs["planned"], costs["reactive"], costs["fixed"]
    cand.gpu_hours_per_day, cand.usd_per_day, cand.slo_attainment = (
        p.gpu_hours_per_day,
        p.usd_per_day,
        p.slo_attainment,
    )
    cand.fixed_fleet_usd_per_day, cand.fixed_fleet_replicas = f.usd_per_day, max(cand.replicas)
    cand.reactive_usd_per_day, cand.reactive_slo_attainment = r.usd_per_day, r.slo_attainment
    bound_candidate(cand, profiles, keys, curve, sla, req)


def _setup(cand: Candidate, model: Any, req: CapacityRequest, longest: tuple[int, int]) -> Any:
    """A function of the lengths giving (step model, requests a replica keeps running), or None
    with ``cand.skipped`` set when the plan is not priced at this TP (the model does not split,
    the chip lacks the format) or holds no request of the curve's ``longest`` lengths."""
    from deepstack import load_noc_profile
    from deepstack.gpu_nodes import first_devices

    from plena_opt.api.running_cap import EXPORTED_MEMORY_FRACTION
    from plena_opt.chip import load_chip
    from plena_opt.estimate import Evaluator, Plan, Workload
    from plena_opt.estimate.capacity import DEFAULT_MEMORY_FRACTION, capacity_bound
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.serving import StepModel, engine_model
    from plena_opt.serving.calibration import calibrated
    from plena_opt.serving.kv_admission import KV_CAPPED_ENGINES, kv_cap

    chip = load_chip(cand.gpu)
    node = load_noc_profile(NODE_PROFILES[cand.gpu])
    if cand.tp > node.num_devices:
        cand.skipped = f"TP {cand.tp} exceeds the {node.num_devices} GPUs of one node"
        return None
    noc = first_devices(node, cand.tp)
    memory = gpu_memory(chip)
    plan = Plan(tp=cand.tp)
    eng = engine_model(req.engine, float(chip.hbm.capacity_bytes.value))  # type: ignore[union-attr]
    eng = calibrated(eng, chip.name)
    routing = "power_law" if model.num_experts else "balanced"

    def workload(isl: int, osl: int) -> Any:
        return Workload(
            batch_size=1,
            input_seq_len=isl,
            output_seq_len=osl,
            precision=req.precision,
            routing=routing,
        )

    def bound(isl: int, osl: int) -> Any:
        ev = Evaluator(model, noc, memory, workload(isl, osl), chip)
        return capacity_bound(PlanCost(ev.ctx, plan), DEFAULT_MEMORY_FRACTION)

    def held(isl: int, osl: int) -> int | None:
        """Requests a replica keeps running: the KV pool's admission where it is priced
        (vLLM, SGLang: ``api.running_cap``, the rule ``estimate`` applies), else the bound."""
        if eng.name not in KV_CAPPED_ENGINES:
            return bound(isl, osl).max_batch
        cap = kv_cap(model, noc, memory, chip, workload(isl, osl), plan, eng.name,
                     eng.budget_tokens, EXPORTED_MEMORY_FRACTION)  # fmt: skip
        if cap is None:
            return eng.max_running
        return cap.requests if eng.max_running is None else min(cap.requests, eng.max_running)

    try:
        top = bound(*longest)
    except (PlenaInputError, ValueError) as exc:
        cand.skipped = f"not priced at TP {cand.tp}: {exc}"
        return None
    if held(*longest) == 0 and not (top.max_batch is not None and top.max_batch < 1):
        cand.skipped = (
            f"the {eng.name} KV pool at {EXPORTED_MEMORY_FRACTION:.0%} of memory holds no "
            "request of the curve's longest lengths beside the weights and one step's activations"
        )
        return None
    if top.max_batch is not None and top.max_batch < 1:
        cand.skipped = (
            f"weights ({top.weight_bytes / 2**30:.0f} GiB per GPU) leave no KV "
            f"cache for one sequence in {DEFAULT_MEMORY_FRACTION:.0%} of memory"
        )
        return None
    cache: dict[tuple[int, int], Any] = {}

    def step_for(isl: int, osl: int) -> Any:
        if (isl, osl) not in cache:
            step = StepModel.from_problem(model, noc, memory, chip, workload(isl, osl), plan, eng)
            cache[(isl, osl)] = (step, held(isl, osl))
        return cache[(isl, osl)]

    return step_for
