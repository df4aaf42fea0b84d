"""The compressed decode (weighted evaluation points, ``estimate.decode``) equals pricing every
decode step (``estimate.reference.decode_sums``), on random workloads, plans and output lengths
(property test)."""

from __future__ import annotations

import numpy as np
import pytest
from deepstack import load_noc_profile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plena_opt.estimate import Evaluator, Workload
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.evaluator import decode_attribution
from plena_opt.estimate.reference import decode_sums
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


def reference(cost: PlanCost) -> dict[str, float]:
    """Every decode step priced on its own and summed plainly (``estimate.reference``,
    independent of ``estimate.decode``, ``StepWeights``, ``StageArrays`` and ``PassResult``)."""
    return decode_sums(cost.ctx, cost.plan).as_dict()


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
