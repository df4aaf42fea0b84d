"""The distributed estimate of one plan: pipelined prefill and decode passes (analytic-model §4.6).

``EstimateContext`` holds what is fixed for a (model, NoC, memory, chip, workload); ``PlanCost``
prices one plan: per-stage prefill, the whole decode (a few weighted evaluation points standing
for every generated token, ``decode_steps``), TTFT, TPS, footprints, NoC energy and warnings.
``DistributedEstimate.to_dict()`` is the reference JSON (golden ``distributed.json`` outputs).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from functools import cached_property
from math import ceil

import numpy as np
from deepstack import Network, NocProfile

from plena_opt.chip import ChipProfile, PerfModel, load_chip
from plena_opt.estimate.comm import Cost, PricedNetwork, layer_collectives, pipeline_transfer
from plena_opt.estimate.decode_steps import (
    MAX_REFINES,
    DecodeGrid,
    StairSpec,
    decode_grid,
    failed_pieces,
)
from plena_opt.estimate.gpu import GpuPricing, is_gpu, storage_precision
from plena_opt.estimate.layer import (
    LayerKind,
    LayerShape,
    attention_weight_elements,
    decode_kv_read_bytes,
    dense_ffn_elements,
    layer_cycles,
    layer_kind_runs,
    layer_traffic,
    stage_counts,
)
from plena_opt.estimate.memo import PricingCaches, PricingMemo
from plena_opt.estimate.moe_load import MoeLoad, busiest_rank_load, power_law_alpha
from plena_opt.estimate.moe_routing import check_routing, routing_rows
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.pricing import ONE_STEP, StageArrays, StepWeights, price_arrays
from plena_opt.estimate.results import DistributedEstimate
from plena_opt.estimate.shard import DeviceShard, dense_scheme, moe_scheme, validate_plan
from plena_opt.memory import HbmStoragePrecision, Memory, PhaseEstimate
from plena_opt.models import ModelSpec

GIB = 2**30
# The priced fields of a stage (those of ``PhaseEstimate`` except the optional energy).
FIELDS = tuple(f.name for f in fields(PhaseEstimate) if f.name != "dram_energy_pj")


_THREAD = threading.local()


def weighted_sum(weights: Sequence[float], arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Σ wᵢ·aᵢ over a few equal-length arrays (faster than a matrix product for few rows)."""
    total = None
    for w, a in zip(weights, arrays, strict=True):
        if w:
            total = a * w if total is None else total + a * w
    return np.zeros(len(arrays[0])) if total is None else total


def shared_network(noc: NocProfile) -> Network:
    """The ``Network`` of a profile, shared by the evaluators of one thread.

    Routing patterns depend only on the profile, so every evaluator of a search (one per batch
    size) reuses them. ``Network`` is not thread-safe, hence one cache per thread.
    """
    cache = getattr(_THREAD, "networks", None)
    if cache is None:
        cache = _THREAD.networks = {}
    key = json.dumps(noc.describe(), sort_keys=True, default=str)
    net = cache.get(key)
    if net is None:
        net = cache[key] = Network(noc)
    return net


class EstimateContext:
    """Inputs shared by every plan of one evaluation: model × NoC × memory × chip × workload."""

    def __init__(
        self,
        model: ModelSpec,
        noc: NocProfile,
        memory: Memory,
        workload: Workload,
        chip: ChipProfile | None = None,
        precision: HbmStoragePrecision | None = None,
        memo: PricingMemo | None = None,
    ) -> None:
        self.model = model
        self.noc = noc
        self.memory = memory
        self.workload = workload
        self.chip = chip if chip is not None else load_chip()
        if precision is None:
            precision = storage_precision(self.chip, workload) or HbmStoragePrecision.default()
        self.precision = precision
        # A GPU chip prices layers kernel by kernel (estimate/gpu.py); PLENA by ISA cycles.
        self.gpu = GpuPricing(self.chip, precision, workload, memory) if is_gpu(self.chip) else None
        self.perf = None if self.gpu else PerfModel(self.chip)
        self.net = shared_network(noc)
        self.compute_hz = workload.frequency_hz * memory.compute_frequency_scale
        self.kind_runs = layer_kind_runs(model)
        self.distinct_kinds = list(dict.fromkeys(k for k, _ in self.kind_runs))
        self.kind_totals: Counter = Counter()
        for kind, n in self.kind_runs:
            self.kind_totals[kind] += n
        self.track_energy = memory.energy_pj(0.0, 0.0) is not None
        self._rows: np.ndarray | None = None
        check_routing(workload.routing)
        if model.num_experts and workload.routing not in ("balanced", "random"):
            self.rows(1)  # read and validate a trace now, not inside the first MoE plan
        self._memory_warnings = list(memory.warnings())
        # Memoised per-layer pricing and collectives, shared by the plans of one evaluation
        # (and, through ``memo``, by the evaluations that differ only in the batch size).
        if memo is None:
            caches = PricingCaches()
        else:
            dense_plena = self.gpu is None and not model.num_experts
            caches = memo.caches(model, noc, memory, chip, workload, dense_plena)
        self.layer_cache: dict = caches.layer
        self.comm_cache: dict = caches.comm
        self.extras_cache: dict = caches.extras
        self._stage_counts: dict[int, list[Counter]] = caches.stage_counts
        self._grids: dict[tuple, DecodeGrid] = caches.grids
        self.priced_net = PricedNetwork(self.net, caches.collectives)  # memoised prices
        self.plan_bases: dict[tuple, _PlanBase] = {}
        self.refined: dict[tuple, DecodeGrid] = caches.refined  # grids refined at equal cuts
        self.shard_ids: dict[tuple, int] = caches.shard_ids
        self.row_groups: dict[tuple, tuple] = {}

    def decode_grid(self, cp: int, read_per_token: float) -> DecodeGrid:
        """The decode's evaluation points for context parallelism ``cp`` and a KV read of
        ``read_per_token`` bytes per attended token and layer (cached)."""
        fast = ("read", cp, read_per_token)  # its own key space: a ratio may equal a read
        grid = self._grids.get(fast)
        if grid is not None:
            return grid
        quantum = self.memory.transfer_quantum_bytes
        ratio = None if quantum is None else Fraction(read_per_token) / quantum
        key = (cp, ratio)
        grid = self._grids.get(key)
        if grid is None:
            m, w = self.model, self.workload
            kinds = self.distinct_kinds
            spec = StairSpec(
                1 if self.perf is None else self.perf.MLEN,
                ratio,
                m.attention_chunk_size if any(k.chunked for k in kinds) else None,
                m.sliding_window if any(k.sliding for k in kinds) else None,
                every_step=self.gpu is not None,
            )
            grid = decode_grid(w.input_seq_len, w.output_seq_len, cp, spec)
            self._grids[key] = grid
        self._grids[fast] = grid
        return grid

    def stage_kind_counts(self, pp: int) -> list[Counter]:
        """Per pipeline stage, how many layers of each kind it holds (§4.6 stage layout)."""
        counts = self._stage_counts.get(pp)
        if counts is None:
            counts = stage_counts(self.kind_runs, self.model.num_layers, pp)
            self._stage_counts[pp] = counts
        return counts

    def rows(self, tokens: int) -> np.ndarray:
        """At least ``tokens`` routing rows (cached; regenerated only to grow)."""
        if self._rows is None or self._rows.shape[0] < tokens:
            m = self.model
            self._rows = routing_rows(
                self.workload.routing, m.num_experts, m.top_k, tokens, power_law_alpha(m)
            )
        return self._rows

    def lm_head_phases(self) -> tuple[bool, bool]:
        """(prefill, decode): whether the LM head is priced in each phase (§4.4)."""
        inc = self.workload.include_lm_head
        return (inc or self.model.family == "moe", inc)


def stage_groups(
    counts: list[Counter], kinds: list[LayerKind], extras: dict[int, list]
) -> tuple[list[tuple[tuple[int, ...], int]], np.ndarray, np.ndarray]:
    """Stages grouped by (layer counts by kind, own extras): the distinct groups as
    (counts, stage with extras or -1), each stage's group index and each group's stage count."""
    keys: dict[tuple, int] = {}
    index = []
    for i, c in enumerate(counts):
        key = (tuple(c.get(k, 0) for k in kinds), i if i in extras else -1)
        index.append(keys.setdefault(key, len(keys)))
    idx = np.asarray(index)
    return list(keys), idx, np.bincount(idx, minlength=len(keys)).astype(float)


@dataclass
class PassResult:
    """One pipelined pass over every stage, for one or many steps (arrays over steps).

    Stage fields are linear in the per-kind layer costs, so they are kept as components
    (layer costs by kind, kind counts per stage, extras per stage) and combined on demand.
    """

    stage_layers: list[int]
    counts: list[Counter]  # per stage: layers of each kind
    layer: dict[LayerKind, StageArrays]  # one layer of each kind, priced
    comm: dict[LayerKind, dict[str, Cost]]  # one layer's collectives, by kind
    extras: dict[int, list[StageArrays]]  # embedding / LM head stages by pipeline stage
    transfer: Cost  # slowest stage-boundary transfer
    full_overlap: bool
    steps: StepWeights = ONE_STEP  # decode steps each evaluation point stands for
    row_groups: dict = field(default_factory=dict)  # memo of ``stage_groups`` (per context)

    @property
    def transfer_seconds(self) -> float:
        return self.transfer.seconds

    @cached_property
    def layers_per_kind(self) -> list[int]:
        """How many layers of each kind (in ``layer`` order) the whole pipeline runs."""
        kinds = tuple(self.layer)
        key = ("per_kind", len(self.counts), kinds)
        hit = self.row_groups.get(key)
        if hit is None:
            hit = self.row_groups[key] = [sum(c.get(k, 0) for c in self.counts) for k in kinds]
        return hit

    @cached_property
    def _comm_totals(self) -> dict[LayerKind, float]:
        return {k: sum(c.seconds for c in comm.values()) for k, comm in self.comm.items()}

    def comm_seconds(self, kind: LayerKind) -> float:
        """Σ of one layer's collective times (s)."""
        return self._comm_totals[kind]

    def combined_seconds(self, kind: LayerKind) -> np.ndarray:
        """One layer's seconds with its collectives: sum, or max under full overlap (§4.6)."""
        comm = self.comm_seconds(kind)
        la = self.layer[kind].seconds
        return np.maximum(la, comm) if self.full_overlap else la + comm

    def failed_checks(self, grid: DecodeGrid) -> dict[int, list[int]]:
        """Compressed pieces of ``grid`` where a branch may switch, with where to cut them."""
        if not grid.checks:
            return {}
        signs = []
        for kind, la in self.layer.items():
            signs.append(la.memory_seconds - la.compute_seconds)
            if self.full_overlap:
                signs.append(self.comm_seconds(kind) - la.seconds)
        return failed_pieces(grid, signs, self.stage_rows[0])

    @cached_property
    def stage_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct stage-time rows [U, steps], each stage's row index, and row multiplicities.

        Stages with the same layer counts and no extras take the same time, so each distinct
        stage is computed once (e.g. one row for four identical pipeline stages).
        """
        kinds = list(self.layer)
        combined = [self.combined_seconds(k) for k in kinds]
        gkey = (len(self.counts), tuple(kinds), tuple(self.extras))
        groups = self.row_groups.get(gkey)
        if groups is None:
            groups = self.row_groups[gkey] = stage_groups(self.counts, kinds, self.extras)
        distinct, index, mult = groups
        rows = np.empty((len(distinct), self.steps.points))
        for r, (counts, stage) in enumerate(distinct):
            row = weighted_sum(counts, combined)
            for ex in self.extras.get(stage, ()):
                row = row + ex.seconds
            rows[r] = row
        return rows, index, mult

    def stage_seconds_at(self, step: int) -> np.ndarray:
        """Seconds of each stage for one micro-batch at one evaluation point (0: step 0)."""
        rows, index, _ = self.stage_rows
        return rows[index, step]

    @cached_property
    def period(self) -> np.ndarray:
        """Per step: slowest stage + one boundary transfer (s)."""
        rows = self.stage_rows[0]
        slowest = rows[0] if len(rows) == 1 else rows.max(axis=0)
        return slowest + self.transfer.seconds

    def latency_at(self, step: int) -> float:
        """Σ stages + (pp − 1) transfers at one evaluation point (0: step 0) (s)."""
        rows, _, mult = self.stage_rows
        pp = len(self.stage_layers)
        return float(mult @ rows[:, step]) + (pp - 1) * self.transfer.seconds

    def stage_field(self, stage: int, name: str, step: int) -> float | None:
        """A priced field of one stage at one step (extras first, then layers by kind)."""
        if name == "dram_energy_pj" and next(iter(self.layer.values())).dram_energy_pj is None:
            return None
        total = 0.0
        for ex in self.extras.get(stage, []):
            total += getattr(ex, name)[step]
        for kind, count in self.counts[stage].items():
            total += count * getattr(self.layer[kind], name)[step]
        return float(total)

    def total(self, name: str, first_step: bool = False) -> float | None:
        """A field summed over every stage and every step (or step 0 only)."""
        priced = [ex for exs in self.extras.values() for ex in exs]
        weights = [1.0] * len(priced)
        priced += list(self.layer.values())
        weights += self.layers_per_kind
        total = 0.0
        for weight, st in zip(weights, priced, strict=True):
            value = st.field_sum(name, first_step)
            if value is None:
                return None
            total += weight * value
        return total

    def report(self, step: int = 0) -> dict:
        """The reference pass dict for one step."""
        stages = []
        secs = self.stage_seconds_at(step)
        for i, layers in enumerate(self.stage_layers):
            comm: dict[str, float] = {}
            for kind, count in self.counts[i].items():
                for name, c in self.comm[kind].items():
                    comm[name] = comm.get(name, 0.0) + count * c.seconds
            stages.append(
                {
                    "stage": i,
                    "layers": layers,
                    "seconds": float(secs[i]),
                    "compute_seconds": self.stage_field(i, "compute_seconds", step),
                    "memory_seconds": self.stage_field(i, "memory_seconds", step),
                    "memory_bound_seconds": self.stage_field(i, "memory_bound_seconds", step),
                    "comm_seconds": {k: v for k, v in comm.items() if v > 0},
                    "read_bytes": self.stage_field(i, "read_bytes", step),
                    "write_bytes": self.stage_field(i, "write_bytes", step),
                    "dram_energy_pj": self.stage_field(i, "dram_energy_pj", step),
                }
            )
        return {
            "stages": stages,
            "transfer_seconds": self.transfer.seconds,
            "period_seconds": float(self.period[step]),
            "latency_seconds": self.latency_at(step),
            "bottleneck_stage": int(np.argmax(secs)),
        }


def kv_cache_elements(m: ModelSpec, d: DeviceShard, kind: LayerKind, held: int) -> int:
    """KV-cache elements one device holds for one layer of ``kind`` with ``held`` tokens.

    GQA: K and V of the device's KV heads. MLA: one latent of ``kv_lora_rank + qk_rope_head_dim``
    per token, replicated on every TP rank. Sliding/chunked layers keep at most W / C tokens.
    """
    if kind.sliding:
        held = min(held, m.sliding_window)
    elif kind.chunked:
        held = min(held, m.attention_chunk_size)
    if m.is_mla:
        return d.b_dev * held * m.kv_latent_dim
    return 2 * d.b_dev * held * d.kv_heads * m.head_dim


class _PlanBase:
    """What a plan's pricing needs besides the passes: checks, shard, schemes, MoE loads, and
    (filled on first use) footprint and warnings; shared by plans that differ in comm overlap."""

    def __init__(self, ctx: EstimateContext, plan: Plan, validate: bool) -> None:
        m, w = ctx.model, ctx.workload
        self.plan_warnings = (
            validate_plan(m, plan, w, ctx.noc.num_devices, ctx.noc.name) if validate else []
        )
        self.shard = DeviceShard.build(m, plan, w)
        # What the layers, collectives and extras are priced from: the micro-batch size matters
        # only to MoE loads (dense layers see the sequences per device), so dense plans with
        # another micro-batch but the same shard share their priced pieces.
        self.priced_shard = self.shard if m.num_experts else replace(self.shard, micro=0)
        self.shape = LayerShape(m, self.shard, ctx.perf, ctx.precision, plan.tp)
        self.dense = dense_scheme(plan)
        self.moe = moe_scheme(plan, self.shard.tp_moe, self.shard.ep_moe) if m.num_experts else None
        per_stage = ceil(m.num_layers / plan.pp)
        self.stage_ranges = [
            range(min(m.num_layers, i * per_stage), min(m.num_layers, (i + 1) * per_stage))
            for i in range(plan.pp)
        ]
        self.stage_kind_counts = ctx.stage_kind_counts(plan.pp)
        self.loads: dict[str, MoeLoad] = {}
        self.rows = None
        ids = ctx.shard_ids
        self.shard_id = ids.setdefault((self.priced_shard, plan.tp, plan.cp), len(ids))
        self.comm_id = ids.setdefault((self.shard_id, self.dense, self.moe), len(ids))
        self.footprint: tuple[float, float] | None = None
        self.warnings: list[str] | None = None
        if m.num_experts:
            q_pre = self.shard.q_prefill
            micro = self.shard.micro
            need = max(micro * q_pre if micro * q_pre < 8192 else 0, micro)
            if w.routing != "balanced" or self.shard.ep_moe > 1:
                self.rows = ctx.rows(max(need, 1))
            for mode, q in (("prefill", q_pre), ("decode", 1)):
                self.loads[mode] = busiest_rank_load(
                    m,
                    micro=micro,
                    q=q,
                    dp=plan.dp,
                    tp_moe=self.shard.tp_moe,
                    ep_moe=self.shard.ep_moe,
                    routing=w.routing,
                    rows=self.rows,
                )


class PlanCost:
    """Everything the analytic model says about one legal plan."""

    def __init__(self, ctx: EstimateContext, plan: Plan, *, validate: bool = True) -> None:
        self.ctx = ctx
        self.plan = plan
        # Everything but the passes is the same for plans that differ only in comm overlap.
        key = (plan.tp, plan.ep, plan.dp, plan.pp, plan.cp, plan.moe_tp_mode, validate)
        base = ctx.plan_bases.get(key)
        if base is None:
            base = ctx.plan_bases[key] = _PlanBase(ctx, plan, validate)
        self.base = base
        self.plan_warnings = base.plan_warnings
        self.shard = base.shard
        self.priced_shard = base.priced_shard
        self.shape = base.shape
        self.dense = base.dense
        self.moe = base.moe
        self.stage_ranges = base.stage_ranges
        self.stage_kind_counts = base.stage_kind_counts
        self.distinct_kinds = ctx.distinct_kinds
        self.loads = base.loads
        self._rows = base.rows

    # -- passes ------------------------------------------------------------------------------
    def _run_pass(
        self, mode: str, q: int, kv: np.ndarray, steps: StepWeights, points_key: Hashable | None
    ) -> PassResult:
        """Price every stage at the KV lengths ``kv``; ``points_key`` names the point set for the
        shared layer cache (None: a plan's own refined points, not cached)."""
        ctx, plan, shape = self.ctx, self.plan, self.shape
        load = self.loads.get(mode)
        layer_arrays: dict[LayerKind, StageArrays] = {}
        layer_comm: dict[LayerKind, dict[str, Cost]] = {}
        # Plans that differ only in what does not change a layer's cost share it (the
        # comm-overlap choice, dp versus ep placement with equal shapes, …).
        # small interned ids: a key never hashes the shard or the schemes again
        shard_key = (self.base.shard_id, mode)
        comm_key = (self.base.comm_id, mode)
        layer_cache = ctx.layer_cache if points_key is not None else {}
        for kind in self.distinct_kinds:
            key = (shard_key, kind, points_key)
            priced = layer_cache.get(key)
            if priced is None and ctx.gpu is not None:
                priced = ctx.gpu.layer(shape, kind, mode, q, kv, load, steps)
                layer_cache[key] = priced
            if priced is None:
                cyc = layer_cycles(shape, kind, mode, q, kv, load)
                reads, writes = layer_traffic(shape, kind, mode, q, kv, plan.cp, load)
                priced = price_arrays(
                    cyc,
                    reads,
                    writes,
                    ctx.memory,
                    ctx.compute_hz,
                    ctx.workload.overlap_policy,
                    steps,
                )
                layer_cache[key] = priced
            layer_arrays[kind] = priced
            ckey = (comm_key, kind)
            comm = ctx.comm_cache.get(ckey)
            if comm is None:
                comm = layer_collectives(
                    ctx.priced_net,
                    shape,
                    kind,
                    mode,
                    q,
                    dense=self.dense,
                    moe=self.moe,
                    cp=plan.cp,
                    input_seq_len=ctx.workload.input_seq_len,
                    load=ctx.gpu.collective_load(load) if ctx.gpu else load,
                    rows=self._rows,
                    micro=self.shard.micro,
                    shared_with_experts=ctx.gpu is not None,
                )
                ctx.comm_cache[ckey] = comm
            layer_comm[kind] = comm
        ekey = (shard_key, plan.pp, points_key)
        extras_cache = ctx.extras_cache if points_key is not None else {}
        cached = extras_cache.get(ekey)
        if cached is None:
            cached = (
                self._extras(mode, q, steps, extras_cache, (shard_key, "priced", points_key)),
                pipeline_transfer(ctx.priced_net, self.dense, shape, q),
            )
            extras_cache[ekey] = cached
        extras, transfer = cached
        result = PassResult(
            [len(r) for r in self.stage_ranges],
            self.stage_kind_counts,
            layer_arrays,
            layer_comm,
            extras,
            transfer,
            plan.comm_overlap == "full",
            steps,
            ctx.row_groups,
        )
        return result

    def _extras(
        self, mode: str, q: int, steps: StepWeights, cache: dict, key: tuple
    ) -> dict[int, list[StageArrays]]:
        """Embedding (prefill, first stage) and LM head (last stage) as separate stages; the
        priced pair is kept in ``cache`` under ``key`` for plans of another depth."""
        ctx = self.ctx
        if ctx.gpu is not None:
            return ctx.gpu.extras(self.shape, mode, q, steps, self.plan.pp - 1)
        pair = cache.get(key)
        if pair is None:
            pair = cache[key] = self._price_extras(mode, q, steps)
        emb, lm = pair
        out: dict[int, list[StageArrays]] = {}
        if emb is not None:
            out.setdefault(0, []).append(emb)
        if lm is not None:
            out.setdefault(self.plan.pp - 1, []).append(lm)
        return out

    def _price_extras(
        self, mode: str, q: int, steps: StepWeights
    ) -> tuple[StageArrays | None, StageArrays | None]:
        """(embedding, LM head) of one device, each None where the phase does not price it."""
        ctx, d = self.ctx, self.shard
        h, prec, perf = ctx.model.hidden_size, ctx.precision, ctx.perf
        price = lambda cyc, reads: price_arrays(  # noqa: E731
            cyc, reads, {}, ctx.memory, ctx.compute_hz, ctx.workload.overlap_policy, steps
        )
        emb = lm = None
        if mode == "prefill":
            emb = price(
                perf.embeddings(h, q, d.b_dev, "prefill"),
                {"embedding_rows": d.b_dev * q * h * prec.activation_bytes},
            )
        lm_prefill, lm_decode = ctx.lm_head_phases()
        if (mode == "prefill" and lm_prefill) or (mode == "decode" and lm_decode):
            lm = price(
                perf.lm_head(h, d.vocab, d.b_dev),
                {"lm_head_weights": d.vocab * h * prec.weight_bytes},
            )
        return emb, lm

    @cached_property
    def prefill(self) -> PassResult:
        q = self.shard.q_prefill
        kv = np.array([float(self.ctx.workload.input_seq_len)])
        return self._run_pass("prefill", q, kv, ONE_STEP, ())

    @cached_property
    def decode(self) -> PassResult:
        """Every decode step: step j attends to ceil((S_in + j) / cp) tokens (§4.6), priced at
        the weighted points of a ``DecodeGrid`` (refined where a check fails)."""
        grid = self.ctx.decode_grid(self.plan.cp, decode_kv_read_bytes(self.shape))
        for tries in range(MAX_REFINES + 1):
            key = grid.token  # refined grids too: plans of one layer shape share their switches
            result = self._run_pass("decode", 1, grid.kv, grid.weights, key)
            failed = result.failed_checks(grid)
            if not failed:
                return result
            last = tries == MAX_REFINES - 1
            rkey = (grid.key, tuple((i, tuple(c)) for i, c in sorted(failed.items())), last)
            refined = self.ctx.refined.get(rkey)
            if refined is None:
                refined = self.ctx.refined[rkey] = grid.refine(failed, enumerate_failed=last)
            grid = refined
        raise AssertionError("unreachable: the last refinement enumerates every failed piece")

    # -- headline metrics -------------------------------------------------------------------
    @cached_property
    def decode_seconds(self) -> float:
        return self.decode.steps.total(self.decode.period)

    @property
    def ttft_seconds(self) -> float:
        return self.prefill.latency_at(0) + self.decode.latency_at(0)

    @property
    def tps(self) -> float:
        return self.shard.micro * self.ctx.workload.output_seq_len / self.decode_seconds

    @property
    def tps_per_sequence(self) -> float:
        return self.ctx.workload.output_seq_len / (self.plan.pp * self.decode_seconds)

    @property
    def footprint(self) -> tuple[float, float]:
        """(weight bytes, KV bytes) of the fullest stage on one device (§4.6)."""
        fp = self.base.footprint
        if fp is None:
            fp = self.base.footprint = self._fullest_stage()
        return fp

    def _fullest_stage(self) -> tuple[float, float]:
        best = None
        for wb, kb in self.stage_footprints():
            if best is None or wb + kb > best[0] + best[1]:
                best = (wb, kb)
        return best

    def stage_footprints(self, b_dev: int | None = None) -> list[tuple[float, float]]:
        """(weight bytes, KV bytes) of every pipeline stage on one device (§4.6), with
        ``b_dev`` sequences per device (default: the plan's own)."""
        ctx, d, m, plan = self.ctx, self.shard, self.ctx.model, self.plan
        b_dev = d.b_dev if b_dev is None else b_dev
        h, prec = m.hidden_size, ctx.precision
        attn = attention_weight_elements(self.shape)
        moe_w = h * m.num_experts + (m.num_experts // max(d.ep_moe, 1)) * 3 * h * d.expert_ffn
        moe_w += 3 * h * d.shared_ffn
        dense_w = dense_ffn_elements(self.shape)
        held = ceil((ctx.workload.input_seq_len + ctx.workload.output_seq_len) / plan.cp)
        shard = d if b_dev == d.b_dev else replace(d, b_dev=b_dev)
        out = []
        for i, counts in enumerate(self.stage_kind_counts):
            welem = 0
            kvelem = 0
            for kind, n in counts.items():
                welem += n * (attn + (moe_w if kind.moe else dense_w))
                kvelem += n * kv_cache_elements(m, shard, kind, held)
            tables = 0
            if i == 0:
                tables += 1
            if i == plan.pp - 1 and not (plan.pp == 1 and m.tie_word_embeddings):
                tables += 1
            welem += tables * d.vocab * h
            out.append((welem * prec.weight_bytes, kvelem * prec.kv_write_bytes))
        return out

    @property
    def fits_in_memory(self) -> bool | None:
        cap = self.ctx.memory.capacity_bytes
        return None if cap is None else sum(self.footprint) <= cap

    @cached_property
    def noc_energy_pj_per_decode_token(self) -> float | None:
        """(Σ_layers Σ_collectives E / pp + E(p2p, all boundaries)) / micro, pJ (§4.8)."""
        if self.ctx.noc.energy is None:
            return None
        if self.plan.world_size == 1:
            return 0.0
        comm = self.decode.comm
        total = 0.0
        for kind, count in self.ctx.kind_totals.items():
            total += count * sum((c.energy_pj or 0.0) for c in comm[kind].values())
        transfer = self.decode.transfer.energy_pj or 0.0
        return (total / self.plan.pp + transfer) / self.shard.micro

    def capacity_warning(self, single_chip: bool) -> str:
        """The reference's words for weights + KV cache over capacity (distributed and
        single-chip estimates word it differently)."""
        wb, kb = self.footprint
        cap = self.ctx.memory.capacity_bytes / GIB
        if single_chip:
            return (
                f"weights ({wb / GIB:.2f} GiB) and KV cache ({kb / GIB:.2f} GiB) exceed the "
                f"memory capacity ({cap:.2f} GiB)"
            )
        return (
            f"a device of the fullest stage holds weights ({wb / GIB:.2f} GiB) and KV cache "
            f"({kb / GIB:.2f} GiB) beyond its memory capacity ({cap:.2f} GiB)"
        )

    @property
    def warnings(self) -> list[str]:
        """The plan's warnings (the same list for plans that differ only in comm overlap)."""
        out = self.base.warnings
        if out is None:
            out = self.base.warnings = self._warnings()
        return out

    def _warnings(self) -> list[str]:
        ctx, m = self.ctx, self.ctx.model
        out = list(self.plan_warnings)
        if self.fits_in_memory is False:
            out.append(self.capacity_warning(single_chip=False))
        out.extend(ctx._memory_warnings)
        out.extend(m.not_modelled)  # parts of the model that are not priced (vision tower, …)
        if ctx.gpu is not None:
            out.extend(ctx.gpu.warnings)
        width = m.head_dim * m.num_heads
        if width != m.hidden_size and not m.is_mla and ctx.gpu is None:
            out.append(
                f"head_dim * num_attention_heads ({width}) differs from hidden_size "
                f"({m.hidden_size}); weight traffic uses the true projection shapes, PerfModel's "
                "projection cycles assume hidden-wide Q/O"
            )
        return out

    def moe_report(self) -> dict | None:
        m, d = self.ctx.model, self.shard
        if not m.num_experts:
            return None
        return {
            "tp": d.tp_moe,
            "ep": d.ep_moe,
            "dp": self.plan.dp,
            "experts_per_rank": m.num_experts // d.ep_moe,
            "prefill": self.loads["prefill"].to_dict(),
            "decode": self.loads["decode"].to_dict(),
        }

    def to_estimate(self) -> DistributedEstimate:
        ctx, w = self.ctx, self.ctx.workload
        wb, kb = self.footprint
        return DistributedEstimate(
            model=ctx.model.describe(),
            plan=self.plan.to_dict(),
            noc=ctx.noc.describe(),
            memory=ctx.memory.describe(),
            precision=ctx.precision.to_dict(),
            batch_size=w.batch_size,
            micro_batch=self.shard.micro,
            sequences_per_device=self.shard.b_dev,
            input_seq_len=w.input_seq_len,
            output_seq_len=w.output_seq_len,
            overlap_policy=w.overlap_policy,
            comm_overlap=self.plan.comm_overlap,
            routing=w.routing if ctx.model.num_experts else None,
            include_lm_head=w.include_lm_head,
            compute_frequency_hz=ctx.compute_hz,
            ttft_seconds=self.ttft_seconds,
            tps=self.tps,
            tps_per_sequence=self.tps_per_sequence,
            prefill=self.prefill.report(0),
            first_token_decode=self.decode.report(0),
            decode_seconds=self.decode_seconds,
            weight_bytes_per_device=wb,
            kv_cache_bytes_per_device=kb,
            memory_capacity_bytes=ctx.memory.capacity_bytes,
            fits_in_memory=self.fits_in_memory,
            moe=self.moe_report(),
            noc_energy_pj_per_decode_token=self.noc_energy_pj_per_decode_token,
            warnings=list(self.warnings),
            chip=None if ctx.gpu is None else ctx.gpu.describe(),
        )


def estimate_distributed(
    model: ModelSpec,
    noc: NocProfile,
    memory: Memory,
    plan: Plan,
    workload: Workload,
    chip: ChipProfile | None = None,
) -> DistributedEstimate:
    """Estimate one plan (convenience wrapper over ``EstimateContext`` and ``PlanCost``)."""
    return PlanCost(EstimateContext(model, noc, memory, workload, chip), plan).to_estimate()
