"""The distributed estimate of one plan: pipelined prefill and decode passes (analytic-model §4.6).

``EstimateContext`` holds what is fixed for a (model, NoC, memory, chip, workload); ``PlanCost``
prices one plan: per-stage prefill, the whole decode (one array entry per generated token),
TTFT, TPS, footprints, NoC energy and warnings. ``DistributedEstimate.to_dict()`` is the
reference JSON (golden ``distributed.json`` outputs).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from math import ceil

import numpy as np
from deepstack import Network, NocProfile

from plena_opt.chip import ChipProfile, PerfModel, load_chip
from plena_opt.estimate.comm import Cost, layer_collectives, pipeline_transfer
from plena_opt.estimate.layer import (
    LayerKind,
    LayerShape,
    attention_weight_elements,
    layer_cycles,
    layer_kinds,
    layer_traffic,
)
from plena_opt.estimate.moe_load import MoeLoad, busiest_rank_load
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.pricing import StageArrays, price_arrays
from plena_opt.estimate.routing import check_routing, routing_rows
from plena_opt.estimate.shard import DeviceShard, dense_scheme, moe_scheme, validate_plan
from plena_opt.memory import HbmStoragePrecision
from plena_opt.models import ModelSpec

GIB = 2**30
FIELDS = (
    "seconds",
    "compute_seconds",
    "memory_seconds",
    "memory_bound_seconds",
    "read_bytes",
    "write_bytes",
)


class EstimateContext:
    """Inputs shared by every plan of one evaluation: model × NoC × memory × chip × workload."""

    def __init__(
        self,
        model: ModelSpec,
        noc: NocProfile,
        memory,
        workload: Workload,
        chip: ChipProfile | None = None,
        precision: HbmStoragePrecision | None = None,
    ) -> None:
        self.model = model
        self.noc = noc
        self.memory = memory
        self.workload = workload
        self.chip = chip if chip is not None else load_chip()
        self.perf = PerfModel(self.chip)
        self.precision = precision if precision is not None else HbmStoragePrecision.default()
        self.net = Network(noc)
        self.compute_hz = workload.frequency_hz * memory.compute_frequency_scale
        self.kinds = layer_kinds(model)
        self.track_energy = memory.energy_pj(0.0, 0.0) is not None
        if model.num_experts:
            check_routing(workload.routing)
        self._rows: np.ndarray | None = None
        self._memory_warnings = list(memory.warnings())

    def rows(self, tokens: int) -> np.ndarray:
        """At least ``tokens`` routing rows (cached; regenerated only to grow)."""
        if self._rows is None or self._rows.shape[0] < tokens:
            m = self.model
            self._rows = routing_rows(self.workload.routing, m.num_experts, m.top_k, tokens)
        return self._rows

    def lm_head_phases(self) -> tuple[bool, bool]:
        """(prefill, decode): whether the LM head is priced in each phase (§4.4)."""
        inc = self.workload.include_lm_head
        return (inc or self.model.family == "moe", inc)


@dataclass
class PassResult:
    """One pipelined pass over all stages, for one or many steps (arrays over steps)."""

    stage_layers: list[int]
    stages: list[StageArrays]  # per stage, every field summed over its layers and extras
    comm: list[dict[str, float]]  # per stage, seconds per collective name (step-independent)
    stage_seconds: np.ndarray  # [stages, steps]
    transfer_seconds: float

    @cached_property
    def period(self) -> np.ndarray:
        return self.stage_seconds.max(axis=0) + self.transfer_seconds

    @cached_property
    def latency(self) -> np.ndarray:
        pp = len(self.stage_layers)
        return self.stage_seconds.sum(axis=0) + (pp - 1) * self.transfer_seconds

    def report(self, step: int = 0) -> dict:
        """The reference pass dict for one step."""
        stages = []
        for i, (layers, st, comm) in enumerate(
            zip(self.stage_layers, self.stages, self.comm, strict=True)
        ):
            entry = {"stage": i, "layers": layers, "seconds": float(self.stage_seconds[i, step])}
            for name in FIELDS[1:]:
                entry[name] = float(getattr(st, name)[step])
            entry["comm_seconds"] = {k: v for k, v in comm.items() if v > 0}
            order = ("stage", "layers", "seconds", "compute_seconds", "memory_seconds",
                     "memory_bound_seconds", "comm_seconds", "read_bytes", "write_bytes")
            entry = {k: entry[k] for k in order}
            e = st.dram_energy_pj
            entry["dram_energy_pj"] = None if e is None else float(e[step])
            stages.append(entry)
        col = self.stage_seconds[:, step]
        return {
            "stages": stages,
            "transfer_seconds": self.transfer_seconds,
            "period_seconds": float(self.period[step]),
            "latency_seconds": float(self.latency[step]),
            "bottleneck_stage": int(np.argmax(col)),
        }


class PlanCost:
    """Everything the analytic model says about one legal plan."""

    def __init__(self, ctx: EstimateContext, plan: Plan, *, validate: bool = True) -> None:
        self.ctx = ctx
        self.plan = plan
        m, w = ctx.model, ctx.workload
        self.plan_warnings = (
            validate_plan(m, plan, w, ctx.noc.num_devices, ctx.noc.name) if validate else []
        )
        self.shard = DeviceShard.build(m, plan, w)
        self.shape = LayerShape(m, self.shard, ctx.perf, ctx.precision, plan.tp)
        self.dense = dense_scheme(plan)
        self.moe = (
            moe_scheme(plan, self.shard.tp_moe, self.shard.ep_moe) if m.num_experts else None
        )
        per_stage = ceil(m.num_layers / plan.pp)
        self.stage_ranges = [
            range(min(m.num_layers, i * per_stage), min(m.num_layers, (i + 1) * per_stage))
            for i in range(plan.pp)
        ]
        self.stage_kind_counts = [
            Counter(ctx.kinds[j] for j in r) for r in self.stage_ranges
        ]
        self.distinct_kinds = list(dict.fromkeys(ctx.kinds))
        self.loads: dict[str, MoeLoad] = {}
        self._rows = None
        if m.num_experts:
            q_pre = self.shard.q_prefill
            micro = self.shard.micro
            need = max(micro * q_pre if micro * q_pre < 8192 else 0, micro)
            if w.routing != "balanced" or self.shard.ep_moe > 1:
                self._rows = ctx.rows(max(need, 1))
            for mode, q in (("prefill", q_pre), ("decode", 1)):
                self.loads[mode] = busiest_rank_load(
                    m,
                    micro=micro,
                    q=q,
                    dp=plan.dp,
                    tp_moe=self.shard.tp_moe,
                    ep_moe=self.shard.ep_moe,
                    routing=w.routing,
                    rows=self._rows,
                )

    # -- passes ------------------------------------------------------------------------------
    def _run_pass(self, mode: str, q: int, kv: np.ndarray) -> tuple[PassResult, dict]:
        ctx, plan, shape = self.ctx, self.plan, self.shape
        n = kv.shape[0]
        load = self.loads.get(mode)
        layer_arrays: dict[LayerKind, StageArrays] = {}
        layer_comm: dict[LayerKind, dict[str, Cost]] = {}
        for kind in self.distinct_kinds:
            cyc = layer_cycles(shape, kind, mode, q, kv, load)
            reads, writes = layer_traffic(shape, kind, mode, q, kv, plan.cp, load)
            layer_arrays[kind] = price_arrays(
                cyc, reads, writes, ctx.memory, ctx.compute_hz, ctx.workload.overlap_policy, n
            )
            layer_comm[kind] = layer_collectives(
                ctx.net,
                shape,
                kind,
                mode,
                q,
                dense=self.dense,
                moe=self.moe,
                cp=plan.cp,
                input_seq_len=ctx.workload.input_seq_len,
                load=load,
                rows=self._rows,
                micro=self.shard.micro,
            )
        extras = self._extras(mode, q, n)
        transfer = pipeline_transfer(ctx.net, self.dense, shape, q)
        stages, comms, secs = [], [], []
        full = plan.comm_overlap == "full"
        for i, counts in enumerate(self.stage_kind_counts):
            acc = {f: np.zeros(n) for f in FIELDS}
            energy = np.zeros(n) if ctx.track_energy else None
            comm_total: dict[str, float] = {}
            for ex in extras.get(i, []):
                for f in FIELDS:
                    acc[f] = acc[f] + getattr(ex, f)
                if energy is not None:
                    energy = energy + ex.dram_energy_pj
            for kind, count in counts.items():
                la, lc = layer_arrays[kind], layer_comm[kind]
                comm_sum = sum(c.seconds for c in lc.values())
                combined = np.maximum(la.seconds, comm_sum) if full else la.seconds + comm_sum
                acc["seconds"] = acc["seconds"] + count * combined
                for f in FIELDS[1:]:
                    acc[f] = acc[f] + count * getattr(la, f)
                if energy is not None:
                    energy = energy + count * la.dram_energy_pj
                for name, c in lc.items():
                    comm_total[name] = comm_total.get(name, 0.0) + count * c.seconds
            stages.append(StageArrays(*(acc[f] for f in FIELDS), energy))
            comms.append(comm_total)
            secs.append(acc["seconds"])
        result = PassResult(
            [len(r) for r in self.stage_ranges], stages, comms, np.vstack(secs), transfer.seconds
        )
        info = {
            "layer_arrays": layer_arrays,
            "layer_comm": layer_comm,
            "extras": extras,
            "transfer": transfer,
        }
        return result, info

    def _extras(self, mode: str, q: int, n: int) -> dict[int, list[StageArrays]]:
        """Embedding (prefill, first stage) and LM head (last stage) as separate stages."""
        ctx, d = self.ctx, self.shard
        h, prec, perf = ctx.model.hidden_size, ctx.precision, ctx.perf
        out: dict[int, list[StageArrays]] = {}
        price = lambda cyc, reads: price_arrays(  # noqa: E731
            cyc, reads, {}, ctx.memory, ctx.compute_hz, ctx.workload.overlap_policy, n
        )
        if mode == "prefill":
            emb = price(
                perf.embeddings(h, q, d.b_dev, "prefill"),
                {"embedding_rows": d.b_dev * q * h * prec.activation_bytes},
            )
            out.setdefault(0, []).append(emb)
        lm_prefill, lm_decode = ctx.lm_head_phases()
        if (mode == "prefill" and lm_prefill) or (mode == "decode" and lm_decode):
            lm = price(perf.lm_head(h, d.vocab, d.b_dev), {"lm_head_weights": d.vocab * h * prec.weight_bytes})
            out.setdefault(self.plan.pp - 1, []).append(lm)
        return out

    @cached_property
    def prefill(self) -> PassResult:
        q = self.shard.q_prefill
        return self._run_pass("prefill", q, np.array([self.ctx.workload.input_seq_len]))[0]

    @cached_property
    def _decode(self) -> tuple[PassResult, dict]:
        w, cp = self.ctx.workload, self.plan.cp
        steps = np.arange(w.output_seq_len)
        kv = -(-(w.input_seq_len + steps) // cp)  # ceil((S_in + j) / cp)
        return self._run_pass("decode", 1, kv)

    @property
    def decode(self) -> PassResult:
        return self._decode[0]

    # -- headline metrics -------------------------------------------------------------------
    @cached_property
    def decode_seconds(self) -> float:
        return float(self.decode.period.sum())

    @property
    def ttft_seconds(self) -> float:
        return float(self.prefill.latency[0] + self.decode.latency[0])

    @property
    def tps(self) -> float:
        return self.shard.micro * self.ctx.workload.output_seq_len / self.decode_seconds

    @property
    def tps_per_sequence(self) -> float:
        return self.ctx.workload.output_seq_len / (self.plan.pp * self.decode_seconds)

    @cached_property
    def footprint(self) -> tuple[float, float]:
        """(weight bytes, KV bytes) of the fullest stage on one device (§4.6)."""
        ctx, d, m, plan = self.ctx, self.shard, self.ctx.model, self.plan
        h, prec = m.hidden_size, ctx.precision
        attn = attention_weight_elements(self.shape)
        moe_w = h * m.num_experts + (m.num_experts // max(d.ep_moe, 1)) * 3 * h * d.expert_ffn
        dense_w = 3 * h * d.ffn
        held = ceil((ctx.workload.input_seq_len + ctx.workload.output_seq_len) / plan.cp)
        best = None
        for i, r in enumerate(self.stage_ranges):
            welem = 0
            kvelem = 0
            for j in r:
                kind = ctx.kinds[j]
                welem += attn + (moe_w if kind.moe else dense_w)
                tokens = min(held, m.sliding_window) if kind.sliding else held
                kvelem += 2 * d.b_dev * tokens * d.kv_heads * m.head_dim
            tables = 0
            if i == 0:
                tables += 1
            if i == plan.pp - 1 and not (plan.pp == 1 and m.tie_word_embeddings):
                tables += 1
            welem += tables * d.vocab * h
            wb, kb = welem * prec.weight_bytes, kvelem * prec.kv_write_bytes
            if best is None or wb + kb > best[0] + best[1]:
                best = (wb, kb)
        return best

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
        info = self._decode[1]
        total = 0.0
        for kind, count in Counter(self.ctx.kinds).items():
            total += count * sum((c.energy_pj or 0.0) for c in info["layer_comm"][kind].values())
        transfer = info["transfer"].energy_pj or 0.0
        return (total / self.plan.pp + transfer) / self.shard.micro

    @cached_property
    def warnings(self) -> list[str]:
        ctx, m = self.ctx, self.ctx.model
        out = list(self.plan_warnings)
        if self.fits_in_memory is False:
            wb, kb = self.footprint
            out.append(
                f"weights ({wb / GIB:.2f} GiB) and KV cache ({kb / GIB:.2f} GiB) exceed the "
                f"memory capacity ({ctx.memory.capacity_bytes / GIB:.2f} GiB)"
            )
        out.extend(ctx._memory_warnings)
        width = m.head_dim * m.num_heads
        if width != m.hidden_size:
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
            {
                "model": ctx.model.describe(),
                "plan": self.plan.to_dict(),
                "noc": ctx.noc.describe(),
                "memory": ctx.memory.describe(),
                "precision": ctx.precision.to_dict(),
                "batch_size": w.batch_size,
                "micro_batch": self.shard.micro,
                "sequences_per_device": self.shard.b_dev,
                "input_seq_len": w.input_seq_len,
                "output_seq_len": w.output_seq_len,
                "overlap_policy": w.overlap_policy,
                "comm_overlap": self.plan.comm_overlap,
                "routing": w.routing if ctx.model.num_experts else None,
                "include_lm_head": w.include_lm_head,
                "compute_frequency_hz": ctx.compute_hz,
                "ttft_seconds": self.ttft_seconds,
                "tps": self.tps,
                "tps_per_sequence": self.tps_per_sequence,
                "prefill": self.prefill.report(0),
                "first_token_decode": self.decode.report(0),
                "decode_seconds": self.decode_seconds,
                "weight_bytes_per_device": wb,
                "kv_cache_bytes_per_device": kb,
                "memory_capacity_bytes": ctx.memory.capacity_bytes,
                "fits_in_memory": self.fits_in_memory,
                "moe": self.moe_report(),
                "noc_energy_pj_per_decode_token": self.noc_energy_pj_per_decode_token,
                "warnings": self.warnings,
            }
        )


@dataclass(frozen=True)
class DistributedEstimate:
    """The reference result of one plan; ``to_dict()`` is the ``estimate --json`` document."""

    data: dict = field(repr=False)

    def to_dict(self) -> dict:
        return self.data

    def __getattr__(self, name: str):
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None


def estimate_distributed(
    model: ModelSpec,
    noc: NocProfile,
    memory,
    plan: Plan,
    workload: Workload,
    chip: ChipProfile | None = None,
) -> DistributedEstimate:
    """Estimate one plan (convenience wrapper over ``EstimateContext`` and ``PlanCost``)."""
    return PlanCost(EstimateContext(model, noc, memory, workload, chip), plan).to_estimate()
