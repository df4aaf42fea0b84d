"""Disaggregated serving: a prefill pool and a decode pool splitting the cluster (issue 16).

Every pool worker is one plan on its own sub-cluster, priced by the aggregated evaluator on the
first ``n`` devices of the NoC (``sub_noc``). Steady-state serving figures, all in seconds and
tokens/s (a modelling choice of this module; the reference has no serving model):

* **Aggregated** (one worker over all devices, static batches): the worker alternates prefilling
  a batch (``T_pf = prefill latency + (pp − 1) · prefill period``: pp micro-batches pipelined) and
  decoding it (``D = pp · decode_seconds``). TTFT = the evaluator's TTFT; TPOT = ``(D + T_pf) /
  out`` — ``T_pf / out`` is the **interference** of prefills with decoding; tokens/s =
  ``TPS · D / (D + T_pf)``.
* **Disaggregated** (``x`` prefill workers of ``n_p`` devices, ``y`` decode workers of ``n_d``,
  ``x·n_p + y·n_d ≤ N``): TTFT = prefill latency + KV transfer of one prefill micro-batch + first
  decode step of the decode worker; TPOT = ``D_d / out`` (no interference; kept at the full decode
  batch when the pool is under-fed, an upper bound). A prefill worker supplies
  ``R_p = micro_p · pp_p / max(T_pf, pp_p · X)`` sequences/s (X: one micro-batch's KV transfer,
  overlapped with the next prefill); a decode worker consumes ``R_d = TPS_d / out``. The system
  serves ``min(x·R_p, y·R_d)`` sequences/s; ``rate_match`` picks (x, y) maximising it per device.
* **KV transfer**: bytes = the prompt KV of the micro-batch (every layer, all KV heads,
  ``2·S_in·KV·hd·kvW`` per full-attention layer, ``min(S_in, W)`` for sliding ones) moved from the
  prefill worker's devices to the decode worker's, priced as one stage of concurrent flows with
  the DeepStack network model on the whole cluster (prefill worker on devices ``[0, n_p)``,
  decode worker on ``[n_p, n_p + n_d)``): device i → device i when both pools have the same plan
  shape, else every prefill device to every decode device in equal shares. Other pairs' traffic
  is not added (no contention between pairs).
* Energy per token: the decode worker's (DRAM + NoC, as the evaluator's metric) plus the KV
  transfer's NoC energy per generated token; prefill energy is left out on both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from deepstack import Level, NocProfile
from deepstack.gpu_nodes import derived_profile
from deepstack.stage import StagePattern

from plena_opt.chip import ChipProfile
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.capacity import capacity_bound
from plena_opt.estimate.distributed import (
    EstimateContext,
    PlanCost,
    kv_cache_elements,
    shared_network,
)
from plena_opt.estimate.evaluator import metrics_of
from plena_opt.estimate.plan import Plan, Workload
from plena_opt.estimate.shard import DeviceShard
from plena_opt.memory import Memory
from plena_opt.models import ModelSpec


def sub_noc(noc: NocProfile, n: int) -> NocProfile:
    """The NoC of the first ``n`` devices: whole inner levels plus part of one switch level.

    Raises naming ``serving`` when ``n`` does not fill whole levels below a partial switch.
    """
    if not 1 <= n <= noc.num_devices:
        raise PlenaInputError("serving", f"a pool of {n} devices does not fit {noc.name}")
    if n == noc.num_devices:
        return noc
    levels: list[Level] = []
    rest = n
    for lv in reversed(noc.levels):  # inner (L1) to outer (L3)
        if rest >= lv.size and rest % lv.size == 0:
            levels.append(lv)
            rest //= lv.size
        elif rest < lv.size and lv.kind == "switch":
            levels.append(replace(lv, rows=1, cols=rest))
            rest = 1
        else:
            raise PlenaInputError(
                "serving",
                f"a pool of {n} devices does not fill whole levels of {noc.name} (a partial "
                f"level must be a switch; {lv.kind} level of {lv.size} nodes)",
            )
    return derived_profile(  # keeps the node's measured tables for groups that still fit
        noc,
        f"{noc.name}[0:{n}]",
        tuple(reversed(levels)),  # type: ignore[arg-type]
        {**noc.provenance, "sub_cluster_of": noc.name},
    )


@dataclass(frozen=True)
class WorkerFigures:
    """One pool worker (plan × batch on ``devices`` devices), seconds and tokens/s."""

    plan: Plan
    batch: int
    devices: int
    micro: int
    ttft_s: float
    prefill_latency_s: float
    prefill_batch_s: float  # T_pf: prefill of the whole batch, pipelined
    first_decode_s: float
    decode_s: float  # D = pp · decode_seconds: one sequence's whole decode
    tps: float
    tps_per_sequence: float
    energy_per_token_j: float | None
    fits_in_memory: bool | None
    kv_bytes_per_micro: int  # prompt KV of one micro-batch, all layers, bytes
    max_batch: int | None = None  # KV-capacity bound at the asked memory fraction (None: none)
    precision: str | None = None  # the searched weight/activation format (None: the workload's)
    weight_bytes_per_device: float = 0.0  # weights of the fullest stage on one device, bytes
    kv_bytes_per_device: float = 0.0  # KV cache of the fullest stage on one device, bytes

    @property
    def fits(self) -> bool | None:
        """Within the memory budget: the capacity bound when one was asked, else the
        evaluator's ``fits_in_memory`` (None: capacity not modelled)."""
        if self.max_batch is not None:
            return self.batch <= self.max_batch
        return self.fits_in_memory

    @property
    def prefill_rate(self) -> float:
        """Sequences/s the worker prefills (ignoring the KV transfer)."""
        return self.micro * self.plan.pp / self.prefill_batch_s


def kv_bytes_per_sequence(ctx: EstimateContext) -> int:
    """Prompt KV of one sequence over every layer and KV head (bytes, KV write precision): the
    evaluator's per-layer KV (``kv_cache_elements``: GQA K and V, MLA latent, sliding/chunked
    windows, the DSA indexer key) of one unsharded sequence holding the prompt, plus the fixed
    state of its Gated DeltaNet layers (``attention_variants.linear_state_bytes``)."""
    from plena_opt.estimate.attention_variants import linear_state_bytes
    from plena_opt.estimate.layer import LayerShape

    m, w = ctx.model, ctx.workload
    whole = DeviceShard.build(m, Plan(), replace(w, batch_size=1))
    elems = sum(n * kv_cache_elements(m, whole, kind, w.input_seq_len) for kind, n in ctx.kind_runs)
    state = 0.0
    if m.linear_layers:
        shape = LayerShape(m, whole, ctx.perf, ctx.precision, 1)
        state = m.linear_layers * linear_state_bytes(shape)
    return math.ceil(elems * ctx.precision.kv_write_bytes + state)


def price_worker(
    model: ModelSpec,
    noc: NocProfile,
    memory: Memory,
    workload: Workload,
    plan: Plan,
    chip: ChipProfile | None = None,
    memory_fraction: float | None = None,
) -> WorkerFigures:
    """Price ``plan`` at ``workload.batch_size`` on the first ``plan.world_size`` devices;
    with ``memory_fraction``, also its KV-capacity bound (``estimate.capacity``)."""
    ctx = EstimateContext(model, sub_noc(noc, plan.world_size), memory, workload, chip)
    return worker_from_cost(PlanCost(ctx, plan), memory_fraction)


def worker_from_cost(cost: PlanCost, memory_fraction: float | None = None) -> WorkerFigures:
    """The serving figures of a priced plan."""
    plan, pre, dec = cost.plan, cost.prefill, cost.decode
    m = metrics_of(cost)
    micro = cost.shard.micro
    return WorkerFigures(
        plan=plan,
        batch=cost.ctx.workload.batch_size,
        devices=plan.world_size,
        micro=micro,
        ttft_s=cost.ttft_seconds,
        prefill_latency_s=pre.latency_at(0),
        prefill_batch_s=pre.latency_at(0) + (plan.pp - 1) * float(pre.period[0]),
        first_decode_s=dec.latency_at(0),
        decode_s=plan.pp * cost.decode_seconds,
        tps=cost.tps,
        tps_per_sequence=cost.tps_per_sequence,
        energy_per_token_j=m.energy_per_token_joules,
        fits_in_memory=cost.fits_in_memory,
        kv_bytes_per_micro=micro * kv_bytes_per_sequence(cost.ctx),
        weight_bytes_per_device=float(cost.footprint[0]),
        kv_bytes_per_device=float(cost.footprint[1]),
        max_batch=None
        if memory_fraction is None
        else capacity_bound(cost, memory_fraction).max_batch,
    )


@lru_cache(maxsize=4096)
def _transfer_pattern(noc: NocProfile, n_p: int, n_d: int, one_to_one: bool) -> StagePattern:
    net = shared_network(noc)
    if one_to_one:
        src = np.arange(n_p)
        dst = n_p + np.arange(n_d)
    else:
        src = np.repeat(np.arange(n_p), n_d)
        dst = n_p + np.tile(np.arange(n_d), n_p)
    return StagePattern(net.router, src, dst, np.ones(len(src), dtype=np.int64))


def kv_transfer(
    noc: NocProfile, prefill: Plan, decode: Plan, nbytes: int
) -> tuple[float, float | None]:
    """(seconds, NoC energy pJ or None) of moving ``nbytes`` of KV between the pools' devices."""
    dims = ("tp", "ep", "dp", "pp", "cp")
    same = all(getattr(prefill, d) == getattr(decode, d) for d in dims)
    return kv_transfer_between(noc, prefill.world_size, decode.world_size, same, nbytes)


def kv_transfer_between(
    noc: NocProfile, n_p: int, n_d: int, same_shape: bool, nbytes: int
) -> tuple[float, float | None]:
    """``kv_transfer`` by pool sizes: one-to-one flows when ``same_shape``, else all pairs."""
    if n_p + n_d > noc.num_devices:
        raise PlenaInputError(
            "serving", f"pools of {n_p} + {n_d} devices exceed the {noc.num_devices} of {noc.name}"
        )
    flows = n_p if same_shape else n_p * n_d
    cost = _transfer_pattern(noc, n_p, n_d, same_shape).cost(math.ceil(nbytes / flows))
    energy = cost.energy_pj if noc.energy is not None else None
    return cost.hop_seconds + cost.link_seconds, energy


@dataclass(frozen=True)
class ServingFigures:
    """Steady-state serving of a whole deployment (module docstring): seconds, tokens/s."""

    ttft_s: float
    tpot_s: float
    tps: float  # system generated tokens/s
    devices: int
    energy_per_token_j: float | None
    prefill_workers: int = 0
    decode_workers: int = 0
    kv_transfer_s: float = 0.0
    interference_s_per_token: float = 0.0

    @property
    def tps_per_device(self) -> float:
        return self.tps / self.devices

    @property
    def tps_per_user(self) -> float:
        return 1.0 / self.tpot_s


def aggregated_serving(w: WorkerFigures, output_seq_len: int) -> ServingFigures:
    """Aggregated steady state: prefills interrupt decoding (``T_pf / out`` per token)."""
    cycle = w.decode_s + w.prefill_batch_s
    return ServingFigures(
        ttft_s=w.ttft_s,
        tpot_s=cycle / output_seq_len,
        tps=w.tps * w.decode_s / cycle,
        devices=w.devices,
        energy_per_token_j=w.energy_per_token_j,
        interference_s_per_token=w.prefill_batch_s / output_seq_len,
    )


# A deployment within this relative distance of the continuous optimum (exact ratio) ends the
# search over worker counts: no later (larger) count can do better by more than rounding.
RATE_MATCH_RTOL = 1e-12


def rate_match(n_p: int, n_d: int, r_p: float, r_d: float, total: int) -> tuple[int, int, float]:
    """(x, y, sequences/s): the prefill and decode worker counts with ``x·n_p + y·n_d ≤ total``
    that serve the most sequences/s per device (ties: fewer devices, then fewer prefill workers;
    the first x within ``RATE_MATCH_RTOL`` of the continuous optimum is taken).
    Raises when not even one worker of each fits."""
    if n_p + n_d > total:
        raise PlenaInputError("serving", f"pools of {n_p} + {n_d} devices exceed {total}")
    optimum = r_p * r_d / (r_d * n_p + r_p * n_d)
    best = (-1.0, 0, 0, 0, 0.0)  # (per device, -devices, x, y, rate)
    for x in range(1, (total - n_d) // n_p + 1):
        y_max = (total - x * n_p) // n_d
        ideal = x * r_p / r_d
        for y in (max(1, min(y_max, math.floor(ideal))), max(1, min(y_max, math.ceil(ideal)))):
            rate = min(x * r_p, y * r_d)
            devices = x * n_p + y * n_d
            key = (rate / devices, -devices)
            if key > best[:2]:
                best = (key[0], key[1], x, y, rate)
        if best[0] >= optimum * (1 - RATE_MATCH_RTOL):
            break
    return best[2], best[3], best[4]


def disaggregated_serving(
    p: WorkerFigures,
    d: WorkerFigures,
    transfer_s: float,
    transfer_energy_pj: float | None,
    output_seq_len: int,
    total_devices: int,
    counts: tuple[int, int] | None = None,
) -> ServingFigures:
    """Serving figures of ``x`` prefill workers ``p`` and ``y`` decode workers ``d`` (rate
    matched unless ``counts`` is given)."""
    r_p = p.micro * p.plan.pp / max(p.prefill_batch_s, p.plan.pp * transfer_s)
    r_d = d.tps / output_seq_len
    if counts is None:
        x, y, rate = rate_match(p.devices, d.devices, r_p, r_d, total_devices)
    else:
        x, y = counts
        rate = min(x * r_p, y * r_d)
    energy = d.energy_per_token_j
    if energy is not None and transfer_energy_pj is not None:
        energy += transfer_energy_pj * 1e-12 / (p.micro * output_seq_len)
    return ServingFigures(
        ttft_s=p.prefill_latency_s + transfer_s + d.first_decode_s,
        tpot_s=d.decode_s / output_seq_len,
        tps=rate * output_seq_len,
        devices=x * p.devices + y * d.devices,
        energy_per_token_j=energy,
        prefill_workers=x,
        decode_workers=y,
        kv_transfer_s=transfer_s,
    )
