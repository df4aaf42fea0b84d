"""The compressed decode (weighted evaluation points, ``decode_steps``) equals pricing every
decode step, on random workloads, plans and output lengths (property test)."""

from __future__ import annotations

import numpy as np
import pytest
from deepstack import load_noc_profile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plena_opt.estimate import Evaluator, Workload
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.evaluator import decode_attribution
from plena_opt.estimate.layer import layer_cycles, layer_traffic
from plena_opt.memory import FixedBandwidthMemory, load_memory, unbounded
from plena_opt.models import load_model

MODELS = ["llama-3.1-8b", "gpt-oss-20b", "gemma-2-27b", "llama-4-scout", "deepseek-v3"]
MEMORIES = {
    "stacked": load_memory("fictional_stacked_dram"),
    "fixed": FixedBandwidthMemory(0.9e12, None, name="fixed"),
    "fixed-64B": FixedBandwidthMemory(1.6e12, None, transaction_bytes=64, name="fixed-64B"),
    "unbounded": unbounded(),
}
NOC = load_noc_profile("illustrative_gpu_cluster_32")
REL = 1e-12


def _quantised(parts: dict, quantum: int | None, n: int) -> np.ndarray:
    """Σ of the positive traffic components, each rounded up to whole quanta (bytes, per step)."""
    total = np.zeros(n)
    for value in parts.values():
        v = np.broadcast_to(np.maximum(np.asarray(value, dtype=float), 0.0), (n,))
        total += v if quantum is None else np.ceil(v / quantum) * quantum
    return total


def reference(cost: PlanCost) -> dict[str, float]:
    """Every decode step priced on its own and summed plainly (independent of ``decode_steps``,
    ``StepWeights``, ``StageArrays`` and ``PassResult``): only the per-layer cycle and traffic
    formulas (``layer_cycles`` / ``layer_traffic``) and the constant collectives, LM head and
    stage-boundary transfer are taken from the product."""
    ctx, plan = cost.ctx, cost.plan
    w, mem = ctx.workload, ctx.memory
    j = np.arange(w.output_seq_len, dtype=np.int64)
    kv = ((w.input_seq_len + j + plan.cp - 1) // plan.cp).astype(float)  # ceil((S + j) / cp)
    n, quantum, bw = len(kv), mem.transfer_quantum_bytes, mem.usable_bandwidth_bytes_per_s
    load = cost.loads.get("decode")
    dec = cost.decode
    sums = dict.fromkeys(
        ("seconds", "compute_seconds", "memory_seconds", "memory_bound_seconds"), 0.0
    ) | {"read_bytes": 0.0, "write_bytes": 0.0, "overlap_excess": 0.0}
    combined = {}
    for kind in dec.layer:
        cyc = layer_cycles(cost.shape, kind, "decode", 1, kv.copy(), load)
        reads, writes = layer_traffic(cost.shape, kind, "decode", 1, kv.copy(), plan.cp, load)
        r, wr = _quantised(reads, quantum, n), _quantised(writes, quantum, n)
        t_c, t_m = cyc / ctx.compute_hz, (r + wr) / bw
        t = np.maximum(t_c, t_m) if w.overlap_policy == "stage-roofline" else t_c + t_m
        comm = sum(c.seconds for c in dec.comm[kind].values())
        combined[kind] = np.maximum(t, comm) if dec.full_overlap else t + comm
        for name, v in (("seconds", t), ("compute_seconds", t_c), ("memory_seconds", t_m)):
            sums[name] += float(v.sum())
        sums["memory_bound_seconds"] += float(np.where(t_m > t_c, t, 0.0).sum())
        sums["read_bytes"] += float(r.sum())
        sums["write_bytes"] += float(wr.sum())
        if dec.full_overlap:  # what full overlap hides (decode attribution); 0 otherwise
            sums["overlap_excess"] += float(np.maximum(comm - t, 0.0).sum())
    stages = []
    for i, counts in enumerate(ctx.stage_kind_counts(plan.pp)):
        row = np.zeros(n)
        for kind, count in counts.items():
            row += count * combined[kind]
        for ex in dec.extras.get(i, []):  # the LM head: the same at every step
            assert np.all(ex.seconds == ex.seconds[0])
            row += ex.seconds[0]
        stages.append(row)
    rows = np.array(stages)
    period = rows.max(axis=0) + dec.transfer_seconds
    in_flight = -(-w.batch_size // cost.shard.micro)
    if in_flight < plan.pp:  # the token loop bounds the period (docs/deviations.md §5)
        loop = (rows.sum(axis=0) + plan.pp * dec.transfer_seconds) / in_flight
        period = np.maximum(period, loop)
    return sums | {
        "decode_seconds": float(period.sum()),
        "period_mean": float(period.mean()),
        "stage_mean": float(rows.mean(axis=1).sum()),
        "first_latency": float(rows[:, 0].sum()) + (plan.pp - 1) * dec.transfer_seconds,
    }


def compressed(cost: PlanCost) -> dict[str, float]:
    dec = cost.decode
    st_ = dec.steps
    rows, _, mult = dec.stage_rows
    out = {
        "decode_seconds": cost.decode_seconds,
        "period_mean": st_.mean(dec.period),
        "stage_mean": float(mult @ (rows @ st_.weights)) / st_.steps,
        "first_latency": dec.latency_at(0),
    }
    for name in ("seconds", "compute_seconds", "memory_seconds", "memory_bound_seconds"):
        out[name] = sum(la.field_sum(name) for la in dec.layer.values())
    for name in ("read_bytes", "write_bytes"):
        out[name] = sum(la.field_sum(name) for la in dec.layer.values())
    out["overlap_excess"] = (
        sum(
            st_.total(np.maximum(dec.comm_seconds(k) - la.seconds, 0.0))
            for k, la in dec.layer.items()
        )
        if dec.full_overlap
        else 0.0
    )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    memory=st.sampled_from(sorted(MEMORIES)),
    batch=st.sampled_from([1, 4, 16, 64]),
    input_len=st.integers(1, 9000),
    output_len=st.one_of(st.integers(1, 40_000), st.integers(40_000, 400_000)),
    plan_index=st.integers(0, 10_000),
)
def test_compressed_decode_equals_every_step(
    model, memory, batch, input_len, output_len, plan_index
):
    ev = Evaluator(
        load_model(model),
        NOC,
        MEMORIES[memory],
        Workload(batch_size=batch, input_seq_len=input_len, output_seq_len=output_len),
    )
    plans = ev.legal_plans()
    plan = plans[plan_index % len(plans)]
    cost = PlanCost(ev.ctx, plan)
    want, got = reference(cost), compressed(cost)
    assert abs(np.sum(cost.decode.steps.weights) - output_len) <= 1e-12 * output_len
    for name, value in want.items():
        assert abs(got[name] - value) <= REL * abs(value) + 1e-300, (name, got[name], value)
    # The evaluator's metrics come from the same sums: attribution parts add up to the step.
    parts = decode_attribution(cost)
    assert abs(sum(parts.values()) - cost.decode_seconds / output_len) <= 1e-9 * (
        cost.decode_seconds / output_len
    )


@pytest.mark.parametrize("model", ["llama-3.1-70b", "deepseek-v3", "gemma-2-27b"])
@pytest.mark.parametrize("memory", ["stacked", "fixed", "fixed-64B"])
def test_points_do_not_grow_with_the_output(model, memory):
    """At 1M and 8M output tokens a decode is priced at a bounded number of points (ranges are
    summed in closed form and cut only around branch switches, whose zones do not widen with
    the output), far fewer than the steps."""
    sizes = {}
    for out in (1 << 20, 1 << 23):
        ev = Evaluator(
            load_model(model),
            NOC,
            MEMORIES[memory],
            Workload(batch_size=16, input_seq_len=2048, output_seq_len=out),
        )
        sizes[out] = [PlanCost(ev.ctx, p).decode.steps.points for p in ev.legal_plans()[:24]]
    assert max(sizes[1 << 20] + sizes[1 << 23]) < 40_000
