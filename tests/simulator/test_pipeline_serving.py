"""Inference serving re-check against the golden distributed cases (pipeline-simulator §1.4;
analytic-model §4.6)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.simulator import (
    InferenceStageTimes,
    recheck_plans,
    simulate_serving,
    stage_times_from_estimate,
    validate_trace,
)
from tests.conftest import load_golden

# The reference stores floats with repr; the simulator adds the same stage times in a different
# order (a longest-path pass), so equality holds to a few ulps: 1e-12 relative (golden README).
REL = 1e-12


def _pp_cases() -> list[dict]:
    cases = load_golden("distributed")["cases"]
    return [c for c in cases if c.get("output") and c["output"]["plan"]["pp"] > 1]


PP_CASES = _pp_cases()


@pytest.mark.parametrize("case", PP_CASES, ids=[str(c["id"]) for c in PP_CASES])
def test_zero_noise_matches_analytic_ttft_and_period(case: dict) -> None:
    out = case["output"]
    times = stage_times_from_estimate(out, max_decode_steps=8)
    assert times.pp == out["plan"]["pp"]
    assert times.micro_batches * times.tokens_per_micro_batch >= out["batch_size"]
    res = simulate_serving(times, noise=None, samples=0)
    assert res.ttft_deterministic == pytest.approx(out["ttft_seconds"], rel=REL)
    # The steady decode period is the estimate's mean period (its TPS = micro / period), the
    # first decode step's stages scaled for the KV growth of the later steps.
    period = out["decode_seconds"] / out["output_seq_len"]
    assert res.period_deterministic == pytest.approx(period, rel=REL)
    assert out["micro_batch"] / res.period_deterministic == pytest.approx(out["tps"], rel=REL)
    # zero noise through the Monte Carlo path gives the same figures in every sample
    mc = simulate_serving(times, noise={"jitter_sigma": 0.0}, samples=20)
    assert mc.ttft.p50 == pytest.approx(out["ttft_seconds"], rel=1e-6)  # float32 samples
    # float32 end times: the period is a difference of two ends ~ (steps/2)·m periods apart,
    # so its relative error is up to ~2^-24 · end / gap ≈ 1e-6 · steps; 1e-4 covers it
    assert mc.tps.p99 == pytest.approx(out["micro_batch"] / period, rel=1e-4)


def test_window_departure_is_reported_with_its_cause() -> None:
    out = PP_CASES[0]["output"]
    res = simulate_serving(stage_times_from_estimate(out, max_decode_steps=4))
    assert max(res.window_ttft_deterministic) > res.ttft_deterministic
    assert any("prefills queued ahead of decodes" in c for c in res.causes)
    doc = res.to_dict()
    assert doc["analytic"]["ttft_seconds"] == pytest.approx(out["ttft_seconds"], rel=REL)
    assert doc["simulated"]["isolated_ttft_seconds"] == pytest.approx(out["ttft_seconds"], rel=REL)


def test_unequal_stages_and_few_microbatches() -> None:
    times = InferenceStageTimes((1.0, 3.0, 2.0), 0.5, (1.0, 2.0, 1.0), 0.25, 2, 12, 8)
    res = simulate_serving(times)
    # 2 micro-batches on 3 stages: the loop (Σ stages + p·X)/m sets the period, not max + X
    loop = (sum(times.decode_stage_seconds) + 3 * 0.25) / 2
    assert res.period_deterministic == pytest.approx(loop, rel=1e-12)
    closed = times.analytic()
    assert res.period_deterministic > closed["stage_period_seconds"]  # max + X = 2.25
    # the closed form carries the loop bound: period and TPS are the simulated ones
    assert closed["loop_period_seconds"] == pytest.approx(loop, rel=1e-12)
    assert closed["decode_period_seconds"] == pytest.approx(res.period_deterministic, rel=1e-12)
    assert any("token-feedback loop" in c for c in res.causes)
    # isolated TTFT still equals the closed form
    assert res.ttft_deterministic == pytest.approx(times.analytic()["ttft_seconds"], rel=1e-12)


def test_noise_lowers_tps_and_raises_ttft_tail() -> None:
    out = PP_CASES[0]["output"]
    times = stage_times_from_estimate(out, max_decode_steps=4)
    res = simulate_serving(times, noise="sigma=0.1", samples=800, seed=1)
    assert res.ttft.p99 > res.ttft.p50 > 0
    assert res.tps.mean < times.analytic()["tps"]  # max over stages of mean-1 noise
    assert res.ttft.mean == pytest.approx(res.ttft_deterministic, rel=0.02)


def test_recheck_plans_traces_and_ranks(tmp_path) -> None:
    ests = [c["output"] for c in PP_CASES[:4]]
    results = recheck_plans(ests, samples=200, noise="sigma=0.05", seed=0, trace_dir=tmp_path)
    assert len(results) == 4
    for r, est in zip(results, ests, strict=True):
        assert r.analytic_ttft_seconds == est["ttft_seconds"]
        assert r.analytic_tps == est["tps"]
        assert r.ttft_p99_seconds >= r.ttft_p50_seconds > 0
        assert len(r.trace_paths) == 3
        for path in r.trace_paths:
            trace = json.loads(open(path).read())
            assert validate_trace(trace) == []
        det = json.loads(open(r.trace_paths[0]).read())
        assert validate_trace(det, r.serving.window.deterministic, unit_us=1e6) == []
        assert json.dumps(r.to_dict())  # serialisable
    for key in ("rank_ttft_analytic", "rank_ttft_simulated", "rank_tps_analytic"):
        assert sorted(getattr(r, key) for r in results) == [1, 2, 3, 4]
    ttft = [r.analytic_ttft_seconds for r in results]
    assert [r.rank_ttft_analytic for r in results] == list(np.argsort(np.argsort(ttft)) + 1)


def test_recheck_marks_a_rank_change() -> None:
    """The analytic figures say plan b is faster, but b's stage times add up to more: the
    zero-noise re-check reorders the two plans and marks both."""
    a = PP_CASES[0]["output"]
    b = json.loads(json.dumps(a))
    b["ttft_seconds"] = a["ttft_seconds"] * 0.5
    b["tps"] = a["tps"] * 2
    res = recheck_plans([a, b], samples=50, noise=None, seed=0)
    assert res[1].rank_ttft_analytic == 1 and res[0].rank_ttft_analytic == 2
    assert res[1].ttft_p50_seconds == pytest.approx(res[0].ttft_p50_seconds, rel=1e-6)
    assert res[0].rank_ttft_simulated == 1  # stable ordering on ties keeps plan 0 first
    assert res[0].rank_changed and res[1].rank_changed
    assert any("analytic TTFT" in c for c in res[1].serving.causes)
    same = recheck_plans([a, a], samples=50, noise="sigma=0.05", seed=0)
    # common random numbers: identical plans get identical samples
    assert same[0].ttft_p50_seconds == same[1].ttft_p50_seconds and not same[0].rank_changed


def test_stage_times_validation_names_fields() -> None:
    with pytest.raises(PlenaInputError) as exc:
        InferenceStageTimes((1.0, -1.0), 0.0, (1.0, 1.0), 0.0, 2, 1, 1)
    assert exc.value.field == "prefill_stage_seconds[1]"
    with pytest.raises(PlenaInputError) as exc:
        InferenceStageTimes((1.0,), 0.0, (1.0, 1.0), 0.0, 2, 1, 1)
    assert exc.value.field == "decode_stage_seconds"
    with pytest.raises(PlenaInputError) as exc:
        InferenceStageTimes((1.0,), 0.0, (1.0,), 0.0, 0, 1, 1)
    assert exc.value.field == "micro_batches"
    with pytest.raises(PlenaInputError) as exc:
        stage_times_from_estimate({"prefill": {}})
    assert exc.value.field == "first_token_decode"


@pytest.mark.parametrize("steps", [0, -1])
def test_max_decode_steps_below_one_is_rejected(steps: int) -> None:
    """Rule (review fix 5): a window of 0 or fewer decode steps is an error, not silently 1."""
    est = PP_CASES[0]["output"]
    assert stage_times_from_estimate(est, max_decode_steps=1).decode_steps == 1
    with pytest.raises(PlenaInputError) as exc:
        stage_times_from_estimate(est, max_decode_steps=steps)
    assert exc.value.field == "max_decode_steps"
