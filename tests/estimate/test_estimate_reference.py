"""The fast evaluator equals the step-by-step reference (``plena_opt.estimate.reference``).

Tolerance: relative 1e-12 on every figure built from sums. The reference adds the same terms
in another order (every stage on its own instead of ``mult × row``, each step on its own instead
of weighted evaluation points, scalar traffic quantised with the arrays), so its sums differ from
the fast path's in the last bits; 1e-12 is ~4,500 ulps, far below any modelling change (the
evaluator fixture records figures to 1e-12 as well). Where the arithmetic is the same — a layer's
collectives, priced by the same network calls — the two are compared bit for bit.
"""

from __future__ import annotations

import math

import pytest
from deepstack import switch_noc

from plena_opt.api import load_problem
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.distributed import FIELDS, PlanCost
from plena_opt.estimate.evaluator import metrics_of
from plena_opt.estimate.reference import plan_layout, reference_metrics
from plena_opt.estimate.reference.collectives import layer_collectives
from plena_opt.estimate.reference.metrics import pass_field_total
from plena_opt.estimate.reference.steps import decode_pass, prefill_pass
from plena_opt.memory import load_memory
from plena_opt.models import load_model
from tests.conftest import SHARED, load_golden, needs_shared
from tests.estimate.test_evaluator_fixture import CASES
from tests.golden_support import golden_memory, golden_model, golden_noc

REL = 1e-12
HEADLINE = ("ttft_seconds", "tps", "tps_per_sequence", "decode_step_seconds")


def _close(name: str, fast: float | None, ref: float | None) -> None:
    assert (fast is None) == (ref is None), name
    if fast is not None:
        assert math.isclose(fast, ref, rel_tol=REL, abs_tol=0.0), f"{name}: {fast!r} != {ref!r}"


def _same_as_reference(cost: PlanCost) -> None:
    """Every headline figure of ``cost`` (the fast path) equals the reference's."""
    fast, ref = metrics_of(cost), reference_metrics(cost.ctx, cost.plan)
    for name in HEADLINE:
        _close(name, getattr(fast, name), getattr(ref, name))
    _close("decode_seconds", cost.decode_seconds, ref.decode_seconds)
    _close("noc_energy", cost.noc_energy_pj_per_decode_token, ref.noc_energy_pj_per_decode_token)
    _close("prefill latency", cost.prefill.latency_at(0), ref.prefill_latency_seconds)
    _close("first decode latency", cost.decode.latency_at(0), ref.first_decode_latency_seconds)
    if cost.ctx.pricer.kind == "plena":  # a GPU board-power energy: not restated by the reference
        _close("energy_per_token_joules", fast.energy_per_token_joules, ref.energy_per_token_joules)
    # Phase totals (the single-chip report's fields; ``PassResult.total``).
    lay = plan_layout(cost.ctx, cost.plan)
    for fast_pass, ref_pass in ((cost.prefill, prefill_pass(lay)), (cost.decode, decode_pass(lay))):
        for name in FIELDS:
            _close(name, fast_pass.total(name), pass_field_total(lay, ref_pass, name))
    # The collectives: the same network calls, so bit-identical, by reference name.
    passes = (("prefill", cost.prefill, cost.shard.q_prefill), ("decode", cost.decode, 1))
    for mode, dec, q in passes:
        for kind in cost.ctx.distinct_kinds:
            assert layer_collectives(lay, kind, mode, q) == dec.comm[kind], (mode, kind)
        if cost.plan.pp > 1:
            assert dec.transfer.seconds > 0


@pytest.fixture(scope="module", params=list(CASES))
def fixture_case(request) -> tuple[str, object]:
    return request.param, load_problem(**CASES[request.param]).evaluator()


def test_fixture_plans_equal_the_reference(fixture_case) -> None:
    """Every legal plan of each evaluator-fixture case (1,084 plans: dense and MoE, PLENA and
    GPU, five NoCs, both overlap policies, three routings), scored as a batch by one evaluator
    (so the memos are shared between plans, as in a search)."""
    name, ev = fixture_case
    plans = ev.legal_plans()
    assert len(plans) > 10, name
    for plan in plans:
        _same_as_reference(PlanCost(ev.ctx, plan))


@needs_shared
def test_golden_distributed_cases_equal_the_reference() -> None:
    """Every case of ``../shared/golden/distributed.json``: the fast evaluator (which the golden
    test holds to the reference outputs) and the step-by-step reference agree."""
    golden = load_golden("distributed")
    assert SHARED.is_dir() and golden["cases"]
    for case in golden["cases"]:
        i = case["inputs"]
        p = i["plan"]
        mode, overlap = p["moe_tp_mode"], i["comm_overlap"]
        plan = Plan(p["tp"], p["ep"], p["dp"], p["pp"], p["cp"], mode, overlap)
        workload = Workload(
            batch_size=i["batch_size"],
            input_seq_len=i["input_seq_len"],
            output_seq_len=i["output_seq_len"],
            frequency_hz=i["frequency_hz"],
            overlap_policy=i["overlap_policy"],
            include_lm_head=i["include_lm_head"],
            routing=i["routing"],
        )
        ctx = EstimateContext(
            golden_model(i["model"], golden["models"][i["model"]]),
            golden_noc(golden["nocs"][i["noc"]]),
            golden_memory(golden["memories"][i["memory"]]),
            workload,
        )
        cost = PlanCost(ctx, plan)
        _same_as_reference(cost)
        ref = reference_metrics(ctx, plan)
        out = case["output"]  # the reference implementation's own figures (golden rel 1e-9)
        assert math.isclose(ref.ttft_seconds, out["ttft_seconds"], rel_tol=1e-9)
        assert math.isclose(ref.tps, out["tps"], rel_tol=1e-9)


def test_ttft_is_prefill_plus_the_first_decode_step() -> None:
    """TTFT reads as the spec says: the prefill's latency, then the first decode step's."""
    ev = load_problem(**CASES["bench-llama70b-cluster32"]).evaluator()
    plan = next(p for p in ev.legal_plans() if p.pp > 1 and p.tp > 1)
    ref = reference_metrics(ev.ctx, plan)
    assert ref.ttft_seconds == ref.prefill_latency_seconds + ref.first_decode_latency_seconds
    assert ref.decode_step_seconds * ev.workload.output_seq_len == pytest.approx(
        ref.decode_seconds, rel=1e-15
    )


def test_moe_collectives_are_named_as_the_report_names_them() -> None:
    """A MoE plan with expert parallelism has its dispatch, combine and TP all-reduce, each
    under its reference name."""
    ev = load_problem(**CASES["moe-qwen235b-cluster32"]).evaluator()
    plan = next(p for p in ev.legal_plans() if p.ep > 1 and p.tp > 1)
    lay = plan_layout(ev.ctx, plan)
    moe_kind = next(k for k in ev.ctx.distinct_kinds if k.moe)
    names = set(layer_collectives(lay, moe_kind, "decode", 1))
    assert {"tp_all_reduce", "ep_dispatch", "ep_combine"} <= names


def test_an_illegal_plan_is_refused_by_name() -> None:
    ev = load_problem(**CASES["bench-llama70b-cluster32"]).evaluator()
    with pytest.raises(PlenaInputError) as exc:
        reference_metrics(ev.ctx, Plan(tp=3, dp=1, pp=1))
    assert exc.value.field == "plan"


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-20b", "gemma-2-27b", "llama-4-scout"])
@pytest.mark.parametrize("memory", ["fictional_stacked_dram", "fictional_fixed_bandwidth"])
def test_single_chip_equals_the_reference(model: str, memory: str) -> None:
    """The one-device case (``estimate_decoder_latency``: its phase totals are
    ``PassResult.total``) equals the reference, sliding, chunked and MoE layers included."""
    workload = Workload(batch_size=4, input_seq_len=1500, output_seq_len=700)
    ctx = EstimateContext(load_model(model), switch_noc(1), load_memory(memory), workload)
    _same_as_reference(PlanCost(ctx, Plan()))
