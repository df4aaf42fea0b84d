"""The r17ref shortcuts on a fresh evaluator's path give exactly what they replace (issue 26).

``Evaluator.candidate_plans`` from a per-process table; one layer-refined decode grid per
priced shard (``EstimateContext.shard_grids``); ``PassResult.stage_rows`` of one stage layout
of one layer kind without ``combined_seconds``; ``stage_period_total`` filling the period
sums at once; ``metrics_of`` with ``PlanCost.tps`` / ``tps_per_sequence`` / ``decode_seconds``
inline. Each is compared with the plain code to the bit (the metrics themselves are pinned by
``tests/estimate/test_evaluator_fixture.py``).
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from plena_opt.api import load_problem
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.evaluator import metrics_of
from plena_opt.estimate.layer import decode_kv_read_bytes
from plena_opt.estimate.plan import COMM_OVERLAPS, MOE_TP_MODES, Plan, factorisations
from tests.estimate.test_evaluator_fixture import CASES as FIXTURE_CASES

# the reference case at output 16 (the benchmark's), a small MoE node, and the fixture's serial
# case with the LM head (its metrics are pinned there)
CASES = {
    "dense": {**FIXTURE_CASES["bench-llama70b-cluster32"], "output_seq": 16},
    "moe": dict(model="qwen3-30b-a3b", noc="illustrative_gpu_node_8", batch_size=8, output_seq=64),
    "serial": FIXTURE_CASES["serial-lmhead-llama8b-node8"],
}


@pytest.fixture(scope="module", params=list(CASES))
def scored(request: pytest.FixtureRequest) -> tuple:
    ev = load_problem(**CASES[request.param]).evaluator()
    plans = ev.legal_plans()
    return ev, plans, ev.evaluate_batch(plans)


def test_candidate_plans_are_the_enumeration_in_a_new_list_each_time(scored: tuple) -> None:
    ev = scored[0]
    moe = bool(ev.model.num_experts)
    want = []
    for tp, ep, dp, pp, cp in factorisations(ev.num_devices):
        if ep > 1 and not moe:
            continue
        modes = MOE_TP_MODES if moe and tp > 1 else ("replace",)
        for mode, ov in product(modes, COMM_OVERLAPS):
            want.append(Plan(tp=tp, ep=ep, dp=dp, pp=pp, cp=cp, moe_tp_mode=mode, comm_overlap=ov))
    first = ev.candidate_plans()
    assert first == want
    first.clear()  # the caller's own list: the table is untouched
    assert ev.candidate_plans() == want


def test_a_priced_shard_has_one_layer_grid(scored: tuple) -> None:
    """Every plan base of one ``shard_id`` reads the grid that ``decode_grid`` and
    ``_layer_grid`` give for its own shape (the path before ``shard_grids``)."""
    ev, plans, _ = scored
    ctx = ev.ctx
    seen = 0
    for plan in plans:
        cost = PlanCost(ctx, plan)
        _ = cost.decode
        base = cost.base
        plain = cost._layer_grid(ctx.decode_grid(plan.cp, decode_kv_read_bytes(cost.shape)))
        assert base.layer_grid is plain is ctx.shard_grids[base.shard_id]
        seen += 1
    assert seen == len(plans) and len(ctx.shard_grids) <= len(ctx.plan_bases)
    if not ev.model.num_experts:  # dense bases of another micro-batch share a priced shard
        assert len(ctx.shard_grids) < len(ctx.plan_bases)


def _plain_rows(dec) -> np.ndarray:
    """``stage_rows``'s rows by the general formula: Σ counts × ``combined_seconds`` + extras."""
    distinct = dec.groups.distinct
    combined = [dec.combined_seconds(k) for k in dec.layer]
    rows = np.empty((len(distinct), dec.steps.points))
    for r, (counts, stage) in enumerate(distinct):
        row = None
        for w, a in zip(counts, combined, strict=True):
            if w:
                row = a * w if row is None else row + a * w
        row = np.zeros(dec.steps.points) if row is None else row
        for ex in dec.extras.get(stage, []):
            row = row + ex.seconds
        rows[r] = row
    return rows


def test_decode_rows_and_period_sums_equal_the_plain_formulas(scored: tuple) -> None:
    ev, plans, _ = scored
    for plan in plans:
        dec = PlanCost(ev.ctx, plan).decode
        assert np.array_equal(dec.stage_rows[0], _plain_rows(dec))
        spt = dec.stage_period_total  # fills period, stage_period and period_total at once
        rows = dec.stage_rows[0]
        slowest = rows[0] if len(rows) == 1 else rows.max(axis=0)
        sp = slowest + dec.transfer.seconds
        assert np.array_equal(dec.stage_period, sp)
        assert spt == float(dec.steps.weights.dot(sp))
        if not dec.in_flight:
            assert dec.period_total == spt and dec.period is dec.stage_period


def test_metrics_read_the_plan_costs_figures(scored: tuple) -> None:
    ev, plans, batch = scored
    for plan, m in zip(plans, batch, strict=True):
        cost = PlanCost(ev.ctx, plan)
        again = metrics_of(cost)
        assert again == m
        assert (m.tps, m.tps_per_sequence) == (cost.tps, cost.tps_per_sequence)
        out = ev.workload.output_seq_len
        assert m.decode_step_seconds == cost.decode_seconds / out
        assert m.ttft_seconds == cost.ttft_seconds
