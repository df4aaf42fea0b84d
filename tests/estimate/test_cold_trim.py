"""r15trim: the cold loaded path's shortcuts give what the long ways give (issue 26).

``EvaluatorStepCosts.decode_mean_and_growth`` reads a request count's mean step and growth from
one bracket; ``StepModel`` prices a first decode read with it and ``_straggler``; ``PlanBase``
keeps a plan's schemes and its passed refusal checks per context family
(``EstimateContext.plan_invariants``); the step costs import their estimate names once.
"""

from __future__ import annotations

import math

import pytest
from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.estimate.memo import PricingMemo
from plena_opt.estimate.plan_base import PlanBase
from plena_opt.models import load_model
from plena_opt.serving import StepModel
from tests.estimate._step_models import h100_step_model as _step_model

COUNTS = (1, 2, 3, 5, 8, 9, 31, 32, 33, 41, 47, 63, 64, 100, 200)


@pytest.mark.parametrize(
    ("name", "fields"),
    [("qwen3-235b-a22b", {"ep": 8}), ("llama-3.1-70b", {"tp": 4, "pp": 2})],
)
def test_mean_and_growth_are_the_two_methods(name, fields):
    """One bracket read gives ``decode_mean_seconds`` and ``decode_growth`` bit for bit."""
    costs = _step_model(name, fields, 0.0).costs
    for n in COUNTS:
        mean, grow = costs.decode_mean_and_growth(n)
        assert mean == costs.decode_mean_seconds(n)
        assert grow == costs.decode_growth(n)


def _old_straggler(step: StepModel, n: int) -> float:
    """``straggler_seconds`` as written before r15trim (``math.ceil``, ``max``)."""
    adp, wl = step.attention_dp, step.costs.workload
    half = (wl.output_seq_len - 1) / 2
    if adp is None or half <= 0:
        return 0.0
    grow = step.costs.decode_mean_seconds(n) - step.costs.decode_seconds(n)
    kv_part = max(0.0, grow) / half * (wl.input_seq_len + half)
    lo = 1 << (n.bit_length() - 1)
    per_lo, per_hi = math.ceil(lo / adp.ranks), math.ceil(2 * lo / adp.ranks)
    priced = per_lo + (n - lo) / lo * (per_hi - per_lo)
    return kv_part / priced * max(0.0, adp.busiest_kv(n) / adp.mean_kv - priced)


@pytest.mark.parametrize("ratio", [0.0, 0.8])
@pytest.mark.parametrize("osl", [1, 2, 1024])
def test_first_decode_reads_equal_the_long_way(ratio, osl):
    """A first decode read through the one-bracket path equals the mean step plus the
    straggler read the long way (its old expression), bit for bit, at every count."""
    fast = _step_model("qwen3-235b-a22b", {"ep": 8}, ratio, osl)
    slow = _step_model("qwen3-235b-a22b", {"ep": 8}, ratio, osl)
    slow._mean_growth = None  # step costs without the one-bracket read
    assert fast._mean_growth is not None
    for n in COUNTS:
        assert fast.straggler_seconds(n) == _old_straggler(fast, n)
    for n in COUNTS:
        assert fast.decode_seconds(n) == slow.decode_seconds(n)
        assert fast.decode_seconds(n + 0.25) == slow.decode_seconds(n + 0.25)
    if osl > 1 and ratio > 0:  # the straggler is there to be added
        assert fast.straggler_seconds(41) > 0.0


def _ctx(model: str, batch: int, osl: int = 1024, memo: PricingMemo | None = None):
    chip = load_chip("h100-sxm")
    wl = Workload(batch_size=batch, input_seq_len=1024, output_seq_len=osl, precision="fp8")
    noc = load_noc_profile("hgx-h100x8")
    return Evaluator(load_model(model), noc, gpu_memory(chip), wl, chip, memo=memo).ctx


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("qwen3-235b-a22b", {"ep": 8}),
        ("qwen3-235b-a22b", {"tp": 2, "ep": 4, "moe_tp_mode": "keep"}),
        ("llama-3.1-70b", {"tp": 4, "pp": 2}),
        ("llama-3.1-70b", {"tp": 2, "dp": 4}),
    ],
)
@pytest.mark.parametrize("batch", [1, 2, 7, 64])
def test_plan_base_in_a_derived_context_equals_a_fresh_one(name, fields, batch):
    """A ``PlanBase`` that reads the first context's kept schemes and refusal check holds what
    one built in a context of its own workload holds: warnings (they follow the batch),
    shard, schemes, loads, and the collectives key's shape."""
    memo = PricingMemo()
    first = _ctx(name, 1, 1, memo)
    plan = Plan(**fields)
    PlanBase(first, plan, True)  # fills the family's invariants
    derived = first.with_lengths(batch, 1024, memo)
    assert derived.plan_invariants is first.plan_invariants
    fast = PlanBase(derived, plan, True)
    fresh_ctx = _ctx(name, batch)
    assert not fresh_ctx.plan_invariants
    slow = PlanBase(fresh_ctx, plan, True)
    assert fast.plan_warnings == slow.plan_warnings
    assert fast.shard == slow.shard and fast.dense == slow.dense and fast.moe == slow.moe
    assert [fast.load(m) for m in ("prefill", "decode")] == [
        slow.load(m) for m in ("prefill", "decode")
    ]
    assert fast.loads == slow.loads and fast.in_flight == slow.in_flight
    if batch < plan.dp * plan.ep:
        assert any("idle" in w for w in fast.plan_warnings)


def test_a_plan_built_unchecked_is_still_refused_when_checked():
    """An unvalidated base does not mark the plan as checked: a later checked base in the
    same family still runs (and raises) the §4.2 refusals; a refused plan keeps nothing."""
    memo = PricingMemo()
    first = _ctx("llama-3.1-70b", 1, 1, memo)
    bad = Plan(ep=8)  # ep > 1 on a dense model
    PlanBase(first, bad, False)
    with pytest.raises(PlenaInputError):
        PlanBase(first.with_lengths(32, 1024, memo), bad, True)
    key = (bad.tp, bad.ep, bad.dp, bad.pp, bad.cp, bad.moe_tp_mode, bad.moe_tp)
    assert first.plan_invariants[key][3] is False
    other = _ctx("llama-3.1-70b", 1, 1, PricingMemo())
    with pytest.raises(PlenaInputError):
        PlanBase(other, bad, True)
    assert key not in other.plan_invariants


def test_step_costs_names_are_the_modules_own():
    from plena_opt.estimate import gpu_host
    from plena_opt.estimate.decode_floor import DecodeFloor
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.estimate.evaluator import Evaluator as EvaluatorClass
    from plena_opt.estimate.gpu_queue import _names

    est = _names()
    assert est.loaded and est.gpu_host is gpu_host and est.DecodeFloor is DecodeFloor
    assert est.PlanCost is PlanCost and est.Evaluator is EvaluatorClass
    assert est.PricingMemo is PricingMemo
