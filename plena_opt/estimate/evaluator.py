"""The evaluator API the search and the server call: legal plans, one estimate, many at once.

``Evaluator`` fixes (model, NoC, memory, chip, workload) and scores plans. ``evaluate_batch``
returns compact ``PlanMetrics`` (headline figures, energy per generated token, memory per device
and a decode-step bottleneck attribution) without building the full report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from itertools import product

from deepstack import NocProfile

from plena_opt.chip import ChipProfile
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.batch_rows import ttft_seconds
from plena_opt.estimate.distributed import (
    DistributedEstimate,
    EstimateContext,
    PassResult,
    PlanCost,
)
from plena_opt.estimate.memo import PricingMemo
from plena_opt.estimate.network import DEFAULT_NETWORK
from plena_opt.estimate.plan import COMM_OVERLAPS, MOE_TP_MODES, Plan, Workload, factorisations
from plena_opt.estimate.plan_passes import plan_base
from plena_opt.memory import DEFAULT_MEMORY_ENERGY, Memory
from plena_opt.models import ModelSpec

PJ = 1e-12  # joules per picojoule


@dataclass(frozen=True)
class PlanMetrics:
    """Headline figures of one plan.

    Seconds, tokens/s, joules per generated token, bytes per device. ``attribution`` splits the
    mean decode step (s) into compute, DRAM, each collective, pipeline transfer and pipeline
    imbalance; its parts sum to ``decode_step_seconds``.
    """

    plan: Plan
    ttft_seconds: float
    tps: float
    tps_per_sequence: float
    energy_per_token_joules: float | None
    weight_bytes_per_device: float
    kv_cache_bytes_per_device: float
    fits_in_memory: bool | None
    bottleneck: str
    decode_step_seconds: float
    attribution: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def memory_bytes_per_device(self) -> float:
        return self.weight_bytes_per_device + self.kv_cache_bytes_per_device

    def to_dict(self) -> dict:
        d = asdict(self)
        d["plan"] = self.plan.fields()
        d["memory_bytes_per_device"] = self.memory_bytes_per_device
        d["warnings"] = list(self.warnings)
        return d


class Evaluator:
    """Scores parallel plans of one model on one cluster, memory and workload."""

    def __init__(
        self,
        model: ModelSpec,
        noc: NocProfile,
        memory: Memory,
        workload: Workload | None = None,
        chip: ChipProfile | None = None,
        memo: PricingMemo | None = None,
        network: str = DEFAULT_NETWORK,
    ) -> None:
        """``memo`` shares priced layers and collectives with the other evaluators built with
        it for the same inputs and another batch size (``estimate.memo``); ``network`` names
        the registered network back-end (``estimate.network``; default ``deepstack``)."""
        w = workload or Workload()
        self.ctx = EstimateContext(model, noc, memory, w, chip, memo=memo, network=network)

    @classmethod
    def of_context(cls, ctx: EstimateContext) -> Evaluator:
        """The evaluator of an existing context (``EstimateContext.with_lengths``)."""
        out = object.__new__(cls)
        out.ctx = ctx
        return out

    @property
    def model(self) -> ModelSpec:
        return self.ctx.model

    @property
    def workload(self) -> Workload:
        return self.ctx.workload

    @property
    def chip_name(self) -> str:
        """The chip profile's name (the key of its price in a price file)."""
        return self.ctx.chip.name

    @property
    def chip_kind(self) -> str:
        """The chip profile's ``kind`` (``plena``, ``gpu``, …): the pricer that prices it."""
        return self.ctx.pricer.kind

    @property
    def num_devices(self) -> int:
        return self.ctx.num_devices

    @property
    def memory_capacity_bytes(self) -> float | None:
        """Capacity of one device's memory (bytes; None: unbounded)."""
        cap = self.ctx.memory.capacity_bytes
        return float(cap) if cap else None

    def check(self, plan: Plan) -> None:
        """Raise ``PlenaInputError`` naming the rule if ``plan`` is illegal here."""
        plan_base(self.ctx, plan)  # the checks; the plan's pricing later starts from this base

    def candidate_plans(self) -> list[Plan]:
        """Every (tp, ep, dp, pp, cp, mode, overlap) whose product is the device count, before
        legality checks. MoE modes only for MoE models; ``keep`` only where it differs
        (tp > 1)."""
        return list(_candidates(self.num_devices, bool(self.model.num_experts)))

    def legal_plans(self) -> list[Plan]:
        """Every legal plan on the cluster (illegal combinations pruned by the §4.2 rules)."""
        out = []
        for plan in self.candidate_plans():
            try:
                self.check(plan)
            except PlenaInputError:
                continue
            out.append(plan)
        return out

    def estimate(self, plan: Plan) -> DistributedEstimate:
        """The full reference report of one plan."""
        return PlanCost(self.ctx, plan).to_estimate()

    def estimate_with_metrics(self, plan: Plan) -> tuple[DistributedEstimate, PlanMetrics]:
        """The full report and the compact metrics of ``plan`` from one pricing."""
        cost = PlanCost(self.ctx, plan)
        return cost.to_estimate(), metrics_of(cost)

    def evaluate(self, plan: Plan) -> PlanMetrics:
        return metrics_of(PlanCost(self.ctx, plan))

    def evaluate_batch(self, plans: Iterable[Plan]) -> list[PlanMetrics]:
        """Score many plans; illegal ones raise (use ``legal_plans`` to enumerate)."""
        ctx = self.ctx  # the TTFT's prefill from its plan base's pieces (``batch_rows``)
        return [metrics_of(PlanCost(ctx, p), ttft_seconds) for p in plans]


CANDIDATE_MEMO = 64  # (device count, MoE or not) pairs whose candidate plans a process keeps


@lru_cache(maxsize=CANDIDATE_MEMO)
def _candidates(num_devices: int, moe: bool) -> tuple[Plan, ...]:
    """``Evaluator.candidate_plans`` of a cluster of ``num_devices`` and a model with (``moe``)
    or without experts: a function of the two alone, so built once per process (plans are
    immutable; every call gets its own list of them, as ``factorisations`` does)."""
    plans = []
    for tp, ep, dp, pp, cp in factorisations(num_devices):
        if ep > 1 and not moe:
            continue
        modes = MOE_TP_MODES if moe and tp > 1 else ("replace",)
        for mode, ov in product(modes, COMM_OVERLAPS):
            plans.append(Plan.enumerated(tp, ep, dp, pp, cp, mode, ov))
    return tuple(plans)


def metrics_of(cost: PlanCost, ttft: Callable[[PlanCost], float] | None = None) -> PlanMetrics:
    """Compact metrics of a priced plan (``ttft``: how to find its TTFT, s; default
    ``PlanCost.ttft_seconds``, the same figure)."""
    ctx, plan = cost.ctx, cost.plan
    out = ctx.workload.output_seq_len
    energy, wb, kb, fits, warnings = _base_metrics(cost)
    energy = ctx.pricer.energy_per_token(cost, energy)  # the chip kind's power model
    attribution = decode_attribution(cost)
    bottleneck = max(attribution, key=attribution.get)
    decode_seconds = cost.decode.period_total  # ``cost.decode_seconds`` (kept by the attribution)
    # ``PlanCost.tps`` and ``tps_per_sequence``, their expressions inline
    tps = cost.shard.micro * out / decode_seconds
    cycle = cost.in_flight or plan.pp  # micro-batches a sequence waits through
    metrics = object.__new__(PlanMetrics)  # every field given: the frozen ``__init__`` skipped
    metrics.__dict__.update(
        plan=plan,
        ttft_seconds=cost.ttft_seconds if ttft is None else ttft(cost),
        tps=tps,
        tps_per_sequence=out / (cycle * decode_seconds),
        energy_per_token_joules=energy,
        weight_bytes_per_device=wb,
        kv_cache_bytes_per_device=kb,
        fits_in_memory=fits,
        bottleneck=bottleneck,
        decode_step_seconds=decode_seconds / out,
        attribution=attribution,
        warnings=warnings,
    )
    return metrics


def _base_metrics(cost: PlanCost) -> tuple[float | None, float, float, bool | None, tuple]:
    """(PLENA energy per token (J): DRAM, with ``DEFAULT_MEMORY_ENERGY`` where the memory has no
    energy figure, + NoC; weight and KV bytes per device, fits, warnings): the same
    for the plans that differ only in comm overlap, so kept in the decode pass's shared memo."""
    shared = cost.decode.shared
    hit = shared.base_metrics
    if hit is None:
        plan, decode = cost.plan, cost.decode
        # DRAM energy of the whole decode: every device of a stage does that stage's work.
        per_stage_devices = plan.world_size / plan.pp
        dram = decode.total("dram_energy_pj")
        if dram is None and cost.ctx.pricer.default_dram_energy:  # the cited HBM default
            dram = DEFAULT_MEMORY_ENERGY.energy_pj(
                decode.total("read_bytes"), decode.total("write_bytes")
            )
        energy = None  # a GPU prices energy from its board power (its pricer)
        if dram is not None:
            dram *= per_stage_devices / (cost.shard.micro * cost.ctx.workload.output_seq_len)
            energy = (dram + (cost.noc_energy_pj_per_decode_token or 0.0)) * PJ
        wb, kb = cost.footprint
        hit = (energy, wb, kb, cost.fits_in_memory, tuple(cost.warnings))
        shared.base_metrics = hit
    return hit


def decode_attribution(cost: PlanCost) -> dict[str, float]:
    """Mean decode step (s) split into parts that sum to it.

    Per stage: compute and DRAM time of its layers and extras, each collective's exposed time
    (all of it without overlap; with ``full`` overlap only the part exceeding the layer's
    compute, shared in proportion). Over stages: the mean stage's parts, plus
    ``pipeline_imbalance`` = slowest − mean stage, plus ``pipeline_transfer``.
    """
    dec = cost.decode
    plan = cost.plan
    policy = cost.ctx.workload.overlap_policy
    hit = dec.shared.attribution.get(policy)  # ``_shared_parts``'s hit inline
    compute, dram, comm_parts = _shared_parts(dec, policy) if hit is None else hit
    totals: dict[str, float] = {"compute": compute, "dram": dram}
    st = dec.steps
    steps = st.steps
    if comm_parts:
        full = plan.comm_overlap == "full"
        for la, csum, named in comm_parts:
            # under full overlap, the part of the collectives the layer's own time does not hide
            mean_share = la.exposed_share(csum) if full else 1.0
            for name, x in named:
                totals[name] = totals.get(name, 0.0) + x * mean_share
    pp = plan.pp
    parts = {k: v / pp for k, v in totals.items()}
    rows, _, mult = dec.stage_rows
    # Σ multiplicities = the number of stages (a small integer: the same float either way)
    per_row = rows.dot(st.weights)
    m = dec.groups.mult_floats
    total = m[0] * float(per_row[0]) if len(m) == 1 else float(mult.dot(per_row))
    mean_stage = total / steps / float(len(dec.stage_layers))
    stage_period = dec.stage_period_total / steps
    transfer = dec.transfer.seconds
    parts["pipeline_imbalance"] = stage_period - transfer - mean_stage
    parts["pipeline_transfer"] = transfer
    if dec.in_flight:  # fewer micro-batches than stages: the wait for a micro-batch's own token
        parts["pipeline_feedback"] = dec.period_total / steps - stage_period
    return parts


def _shared_parts(dec: PassResult, policy: str) -> tuple[float, float, list]:
    """(Σ compute share, Σ DRAM share, per layer kind with collectives: (its priced layer,
    Σ of its collectives, [(collective, layers × its seconds)])): the same for the plans that
    differ only in comm overlap, so kept in the pass's shared memo."""
    hit = dec.shared.attribution.get(policy)
    if hit is None:
        compute, dram = _split_totals(dec, policy)
        comm_parts = []
        for n_layers, (kind, la) in zip(dec.layers_per_kind, dec.layer.items(), strict=True):
            csum = dec.comm_seconds(kind)
            if n_layers == 0 or csum <= 0:
                continue
            named = [(name, n_layers * x.seconds) for name, x in dec.comm[kind].items()]
            comm_parts.append((la, csum, named))
        hit = dec.shared.attribution[policy] = (compute, dram, comm_parts)
    return hit


def _split_totals(dec: PassResult, policy: str) -> tuple[float, float]:
    """Σ of the mean compute and DRAM shares of the extras and every layer (s)."""
    compute = dram = 0.0
    for exs in dec.extras.values():
        for ex in exs:
            c, d = ex.split_means(policy)
            compute += c
            dram += d
    for n_layers, la in zip(dec.layers_per_kind, dec.layer.values(), strict=True):
        if n_layers:
            c, d = la.split_means(policy)
            compute += n_layers * c
            dram += n_layers * d
    return compute, dram
