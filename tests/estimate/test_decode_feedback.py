"""Decode with fewer micro-batches than pipeline stages (docs/deviations.md §5): a micro-batch's
next token waits for its own trip through the pipeline, so the period is
max(max stage + X, (Σ stages + pp·X) / m), and the evaluator agrees with the simulator."""

from __future__ import annotations

import pytest

from plena_opt.estimate.plan import Plan
from plena_opt.estimate.problem import ProblemSpec
from plena_opt.simulator.engine.recheck import recheck_plans


def _estimate(batch: int, pp: int, tp: int, out: int):
    ev = (
        ProblemSpec(
            model="llama-3.1-8b",
            noc="illustrative_gpu_cluster_32",
            batch_size=batch,
            output_seq=out,
        )
        .load()
        .evaluator()
    )
    plan = Plan(tp=tp, ep=1, dp=1, pp=pp, cp=1, moe_tp_mode="replace", comm_overlap="none")
    return ev.estimate(plan).to_dict(), ev.evaluate(plan)


def test_one_decode_step_by_hand() -> None:
    # batch 4 on pp=8: micro-batches of 1, only 4 of them in flight
    est, metrics = _estimate(4, 8, 4, 1)
    stages = [s["seconds"] for s in est["first_token_decode"]["stages"]]
    x = est["first_token_decode"]["transfer_seconds"]
    stage_bound = max(stages) + x
    loop_bound = (sum(stages) + 8 * x) / 4
    assert loop_bound > 1.9 * stage_bound  # 8 equal stages, 4 micro-batches: about twice
    assert est["decode_seconds"] == pytest.approx(loop_bound, rel=1e-12)
    assert metrics.tps == pytest.approx(1 / loop_bound, rel=1e-12)  # one token per period
    # the reference's micro / (max stage + X) would claim 8 micro-batches of phantom sequences
    assert metrics.tps < 0.55 / stage_bound
    assert metrics.tps_per_sequence == pytest.approx(1 / (4 * loop_bound), rel=1e-12)
    assert metrics.attribution["pipeline_feedback"] == pytest.approx(
        loop_bound - stage_bound, rel=1e-9
    )
    assert sum(metrics.attribution.values()) == pytest.approx(metrics.decode_step_seconds)
    assert any("docs/deviations.md §5" in w for w in metrics.warnings)


def test_one_sequence_gets_the_whole_throughput() -> None:
    _, metrics = _estimate(1, 32, 1, 64)
    assert metrics.tps == pytest.approx(metrics.tps_per_sequence, rel=1e-12)


@pytest.mark.parametrize(("batch", "pp", "tp"), [(4, 8, 4), (5, 4, 8), (1, 32, 1), (2, 16, 2)])
def test_the_evaluator_and_the_simulator_agree_at_zero_noise(batch, pp, tp) -> None:
    est, metrics = _estimate(batch, pp, tp, 48)
    (res,) = recheck_plans([est], samples=16, noise="sigma=0", seed=0)
    assert res.analytic_tps == pytest.approx(metrics.tps, rel=1e-12)
    assert res.serving.tps_deterministic == pytest.approx(metrics.tps, rel=1e-9)


def test_a_full_pipeline_is_priced_as_the_reference() -> None:
    # batch 16 on pp=4: 4 micro-batches of 4, the reference's assumption holds
    est, metrics = _estimate(16, 4, 8, 8)
    assert "pipeline_feedback" not in metrics.attribution
    assert not any("§5" in w for w in metrics.warnings)
    periods = est["decode_seconds"] / 8
    stages = [s["seconds"] for s in est["first_token_decode"]["stages"]]
    assert periods >= max(stages) + est["first_token_decode"]["transfer_seconds"] - 1e-15
    assert metrics.tps == pytest.approx(4 * 8 / est["decode_seconds"], rel=1e-12)
