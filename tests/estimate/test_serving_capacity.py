"""KV capacity → batch (issue 16): the bound equals the largest batch the evaluator says fits."""

from __future__ import annotations

import pytest
from deepstack import switch_noc

from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.capacity import (
    activation_bytes_per_sequence,
    auto_batch_sizes,
    capacity_bound,
)
from plena_opt.estimate.distributed import PlanCost
from plena_opt.memory import FixedBandwidthMemory
from plena_opt.models import load_model

L8 = load_model("llama-3.1-8b")
GPT = load_model("gpt-oss-20b")
WL = {"input_seq_len": 512, "output_seq_len": 4}
TOP = 2**24  # the workload's batch bound


def evaluator(model, n, cap_gib, batch=1):
    mem = FixedBandwidthMemory(1e12, int(cap_gib * 2**30), name="fixed")
    return Evaluator(model, switch_noc(n), mem, Workload(batch_size=batch, **WL))


def largest(pred) -> int:
    """Largest B in [0, TOP] with ``pred(B)`` (monotone: true then false), by bisection."""
    lo, hi = 0, TOP
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


PLANS = [
    (L8, 4, Plan(tp=4), 24),
    (L8, 4, Plan(tp=2, pp=2), 12),
    (L8, 8, Plan(tp=2, dp=2, pp=2), 9),
    (L8, 4, Plan(tp=2, cp=2), 7),
    (GPT, 4, Plan(tp=2, ep=2), 11),
]


@pytest.mark.parametrize(("model", "n", "plan", "cap"), PLANS)
def test_bound_equals_bisection_on_fits_in_memory(model, n, plan, cap):
    ev = evaluator(model, n, cap)
    bound = capacity_bound(PlanCost(ev.ctx, plan), 1.0, include_activations=False)

    def fits(b: int) -> bool:
        return b == 0 or evaluator(model, n, cap, b).evaluate(plan).fits_in_memory

    assert bound.max_batch == largest(fits)
    assert bound.max_batch > 0


@pytest.mark.parametrize(("model", "n", "plan", "cap"), PLANS)
def test_bound_with_fraction_and_activations(model, n, plan, cap):
    """With a fraction and activations: bisection on the evaluator's weights + KV plus the
    activation working set against fraction × capacity."""
    fraction = 0.8
    ev = evaluator(model, n, cap)
    bound = capacity_bound(PlanCost(ev.ctx, plan), fraction)
    act = activation_bytes_per_sequence(PlanCost(ev.ctx, plan))
    assert act > 0

    def fits(b: int) -> bool:
        if b == 0:
            return True
        e = evaluator(model, n, cap, b)
        m = e.evaluate(plan)
        b_dev = PlanCost(e.ctx, plan).shard.b_dev
        used = m.weight_bytes_per_device + m.kv_cache_bytes_per_device + b_dev * act
        return used <= fraction * cap * 2**30

    assert bound.max_batch == largest(fits)
    plain = capacity_bound(PlanCost(ev.ctx, plan), 1.0, include_activations=False)
    assert bound.max_batch < plain.max_batch


def test_capacity_bound_flag_and_auto_list():
    ev = evaluator(L8, 4, 24)
    bound = capacity_bound(PlanCost(ev.ctx, Plan(tp=4)), 0.9)
    top = bound.max_batch
    assert bound.bound_at(top, None)
    assert not bound.bound_at(top - bound.replicas, None)
    assert bound.bound_at(64, 128) == (64 <= top < 128)
    sizes = auto_batch_sizes([bound])
    assert sizes[0] == 1 and sizes[-1] <= top < 2 * sizes[-1]


def test_weights_that_do_not_fit_give_zero():
    ev = evaluator(L8, 4, 1)
    assert capacity_bound(PlanCost(ev.ctx, Plan(tp=4)), 1.0).max_batch == 0
    with pytest.raises(PlenaInputError, match="batch-sizes auto"):
        auto_batch_sizes([capacity_bound(PlanCost(ev.ctx, Plan(tp=4)), 1.0)])


def test_no_capacity_no_bound_and_bad_fraction():
    mem = FixedBandwidthMemory(1e12, None, name="fixed")
    ev = Evaluator(L8, switch_noc(4), mem, Workload(**WL))
    bound = capacity_bound(PlanCost(ev.ctx, Plan(tp=4)))
    assert bound.max_batch is None and not bound.bound_at(8, 16)
    with pytest.raises(PlenaInputError, match="batch-sizes auto"):
        auto_batch_sizes([bound])
    for bad in (0, 1.5, -0.1, True):
        with pytest.raises(PlenaInputError, match="memory_fraction"):
            capacity_bound(PlanCost(ev.ctx, Plan(tp=4)), bad)
