"""Zero-noise serving re-check against the closed-form steady decode (pipeline-simulator §1.4;
analytic-model §4.6), for full and short sampled windows, small and large plans.

Closed form (``InferenceStageTimes.analytic``): the period between successive micro-batch tokens
is ``max(max_stage + X, (Σ stages + p·X) / m)``, the slowest stage or the token-feedback loop
(``m`` micro-batches share one loop of ``p`` stages and hops). Hand check for ``p = 4`` equal
stages of 1 s, ``X = 0.5`` s, ``m = 2``: the loop takes ``4·1.5 = 6`` s and emits 2 micro-batch
tokens, a token every 3 s, where ``micro / (max + X)`` says every 1.5 s (2× too fast).
"""

from __future__ import annotations

import pytest

from plena_opt.simulator import InferenceStageTimes, simulate_serving
from plena_opt.simulator.engine import recheck_plans, serving
from plena_opt.simulator.engine.serving import FULL_WINDOW_OPS, window_graph

# Deterministic pass (float64, a longest path over the same stage times): a few ulps.
DET_REL = 1e-12
# Monte Carlo at σ = 0 runs in float32; the period is a difference of two end times a few
# rounds apart, so its relative error is up to ~2^-24 · end / gap ≈ 1e-7 · steps: 1e-4 covers it.
MC_REL = 1e-4


def _times(stages, x, m, micro=4, steps=64):
    return InferenceStageTimes(
        tuple(3.0 * s for s in stages), 2.0 * x, tuple(stages), x, m, steps, micro
    )


CASES = {
    # hand case of the module docstring: the loop binds, 2 tokens every 6 s
    "p4-m2-loop": ((1.0,) * 4, 0.5, 2),
    "p4-m4-equal": ((1.0,) * 4, 0.5, 4),
    "p3-m6-unequal": ((1.0, 2.5, 1.5), 0.25, 6),
    "p8-m8-unequal": (tuple(1.0 + 0.1 * s for s in range(8)), 0.05, 8),
    "p8-m3-loop": (tuple(1.0 + 0.1 * s for s in range(8)), 0.05, 3),
    # large: the auto mode shortens these windows (more than FULL_WINDOW_OPS ops)
    "p32-m32-unequal": (tuple(1.0 + 0.01 * (s % 5) for s in range(32)), 0.02, 32),
    "p64-m16-loop": ((0.7,) * 63 + (0.74,), 0.003, 16),
}


def test_hand_case() -> None:
    closed = _times((1.0,) * 4, 0.5, 2, micro=1).analytic()
    assert closed["stage_period_seconds"] == 1.5
    assert closed["loop_period_seconds"] == 3.0
    assert closed["decode_period_seconds"] == 3.0
    assert closed["tps"] == pytest.approx(1 / 3, rel=1e-15)


@pytest.mark.parametrize("windows", ["full", "short", "auto"])
@pytest.mark.parametrize("name", list(CASES))
def test_zero_noise_steady_tps_equals_the_closed_form(name, windows, monkeypatch) -> None:
    """Every window mode, at σ = 0: deterministic and sampled TPS equal the closed form. The
    short mode is forced to its shortest window (4 steps: one start-up step, one measured
    round, the last step) to show that the decode is periodic from its second step."""
    stages, x, m = CASES[name]
    times = _times(stages, x, m)
    closed = times.analytic()
    if windows == "full" and len(stages) * m > 256:
        pytest.skip("the full window of a large plan is the slow path this change avoids")
    if windows == "short":
        monkeypatch.setattr(serving, "SHORT_WINDOW_OPS", 1)
    res = simulate_serving(times, "sigma=0", samples=16, windows=windows, lean=True)
    if windows == "short":
        assert res.steady_steps == serving.SHORT_MIN_STEPS == 4
    assert res.period_deterministic == pytest.approx(closed["decode_period_seconds"], rel=DET_REL)
    assert res.tps_deterministic == pytest.approx(closed["tps"], rel=DET_REL)
    assert res.tps.p50 == pytest.approx(closed["tps"], rel=MC_REL)
    assert res.tps.p99 == pytest.approx(closed["tps"], rel=MC_REL)
    assert res.ttft_deterministic == pytest.approx(closed["ttft_seconds"], rel=DET_REL)
    if windows == "short" or (windows == "auto" and len(stages) * m > 256):
        assert res.steady_steps < max(8, 2 * len(stages) + 4)
        assert res.window_steps == 1
        assert any("short window" in c for c in res.causes)
    else:
        assert res.window_steps == times.decode_steps
    loop = closed["loop_period_seconds"] > closed["stage_period_seconds"]
    assert loop == (m < len(stages))
    assert any("token-feedback loop" in c for c in res.causes) == loop


def test_short_window_is_cheap_and_full_stays_available() -> None:
    stages, x, m = CASES["p64-m16-loop"]
    times = _times(stages, x, m)
    res = simulate_serving(times, windows="auto")
    assert res.steady.plan.n_ops <= 8192 and res.window.plan.n_ops <= 8192
    assert res.window_period_deterministic is None  # one decode step: TTFTs only
    small = _times(*CASES["p4-m4-equal"][:2], 4)
    full = simulate_serving(small, windows="auto")
    assert full.steady_steps == 12 and full.window_steps == small.decode_steps
    assert full.steady.plan.n_ops + full.window.plan.n_ops <= 2 * FULL_WINDOW_OPS
    with pytest.raises(Exception, match="windows"):
        simulate_serving(small, windows="every")


def test_window_graphs_are_shared_by_plans_of_one_shape() -> None:
    a = window_graph(4, 4, 12, False, True, True, True)
    assert window_graph(4, 4, 12, False, True, True, True) is a
    assert window_graph(4, 4, 12, False, False, True, True) is not a


def _switch_4096():
    from deepstack.presets import make_hierarchy
    from deepstack.topology import Level

    def sw(ports: int, hop_s: float, bw: float) -> Level:
        return Level("switch", 1, ports, hop_s, bw, ports * bw, ports * bw)

    # benchmarks/bench_scale.py's 4,096-device switch hierarchy (made-up values): 16 pods of 32
    # nodes of 8 devices
    return make_hierarchy(
        "test-switch-4096", sw(16, 5e-6, 50e9), sw(32, 2e-6, 50e9), sw(8, 1.25e-6, 370e9)
    )


def test_the_4096_device_recheck_case() -> None:
    """Issue 15's case: at 4,096 devices the front's best-TPS plan is tp=64 × pp=64 with the
    default batch of 16, so micro-batches of 1 and only 16 of them for 64 stages. The simulated
    TPS is right: it equals the loop-bound closed form; the reference's ``micro · out /
    decode_seconds`` (one micro-batch per period, i.e. 64 in flight) over-states it, so the
    evaluator prices the loop bound too (docs/deviations.md §5) and the two agree."""
    from plena_opt.estimate import Evaluator, Plan, Workload
    from plena_opt.memory import load_memory
    from plena_opt.models import load_model

    model, memory = load_model("llama-3.1-70b"), load_memory("fictional_stacked_dram")
    ev = Evaluator(model, _switch_4096(), memory, Workload())
    est = ev.estimate(Plan(tp=64, ep=1, dp=1, pp=64, cp=1)).to_dict()
    (res,) = recheck_plans([est], samples=32, noise="sigma=0", seed=0)
    times = res.serving.times
    assert (times.pp, times.micro_batches, times.tokens_per_micro_batch) == (64, 16, 1)
    closed = times.analytic()
    assert closed["loop_period_seconds"] > 2 * closed["stage_period_seconds"]
    assert res.serving.tps_deterministic == pytest.approx(closed["tps"], rel=DET_REL)
    assert res.tps_p50 == pytest.approx(closed["tps"], rel=MC_REL)
    # the evaluator prices the same loop bound (docs/deviations.md §5): at zero noise its TPS
    # is the simulated one, not the stage bound micro / (max stage + X) it gave before
    stage_tps = times.tokens_per_micro_batch / closed["stage_period_seconds"]
    assert res.analytic_tps == pytest.approx(closed["tps"], rel=DET_REL)
    assert stage_tps > 2 * res.tps_p50
    assert any("would need 64 micro-batches in flight" in c for c in res.serving.causes)
    assert not any("averages the per-step decode period" in c for c in res.serving.causes)
