"""A closed-loop follow-up request misses the step the engine started while it was on its way
(``serving.request_path``): in the steady state and in the replay, with drawn lengths only."""

from __future__ import annotations

import pytest

import plena_opt.serving.replay as replay_mod
import plena_opt.serving.steady as steady_mod
from plena_opt.serving import (
    EngineModel,
    ServingWorkload,
    StepModel,
    closed_loop,
    replay_closed_loop,
)
from tests.serving.test_serving import LinearCosts


def _step(overlap: bool = False) -> StepModel:
    eng = EngineModel("t", 8192, None, None, overlap_schedule=overlap)
    return StepModel(LinearCosts(), eng, gpus=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("overlap", [False, True])
def test_a_follow_up_waits_out_one_mean_step_more(monkeypatch, overlap: bool) -> None:
    """At the fixed point's φ the TTFT is the form's without the step in flight plus one TPOT
    (the mean step), on top of the overlap scheduler's own missed step."""
    step, wl = _step(overlap), ServingWorkload(8, 1024, 256, range_ratio=0.8)
    m = closed_loop(step, wl)
    phi = (wl.output_len - 1) * m.tpot_seconds / m.e2e_seconds
    with_it = steady_mod._cycle_solver(step, wl, 8)(phi, phi, 0, 0)
    monkeypatch.setattr(steady_mod, "IN_FLIGHT_STEPS", 0)
    without = steady_mod._cycle_solver(_step(overlap), wl, 8)(phi, phi, 0, 0)
    assert with_it[1] == pytest.approx(without[1], rel=1e-12)  # TPOT does not see it
    assert with_it[0] - without[0] == pytest.approx(with_it[1], rel=1e-9)
    assert closed_loop(_step(overlap), wl).ttft_seconds < m.ttft_seconds - 0.8 * m.tpot_seconds


@pytest.mark.parametrize("overlap", [False, True])
def test_the_replay_misses_it_too_and_agrees(monkeypatch, overlap: bool) -> None:
    """The replay holds an arrival that finds the engine busy one step more; its mean TTFT is
    the steady state's within 5 %, and without the rule it is about one step lower."""
    wl = ServingWorkload(8, 1024, 256, range_ratio=0.8)
    got, steady = replay_closed_loop(_step(overlap), wl), closed_loop(_step(overlap), wl)
    assert got.ttft_seconds == pytest.approx(steady.ttft_seconds, rel=0.05)
    monkeypatch.setattr(replay_mod, "IN_FLIGHT_STEPS", 0)
    before = replay_closed_loop(_step(overlap), wl)
    assert got.ttft_seconds - before.ttft_seconds > 0.8 * steady.tpot_seconds


def test_an_idle_engine_and_fixed_lengths_miss_nothing(monkeypatch) -> None:
    """One client finds the engine idle (it waits for the request); fixed-length lock-step runs
    are priced as before (the rule is not applied there)."""
    alone = ServingWorkload(1, 1024, 256, range_ratio=0.8)
    fixed = ServingWorkload(8, 1024, 256)
    one, lock = closed_loop(_step(), alone), replay_closed_loop(_step(), fixed)
    one_replay = replay_closed_loop(_step(), alone)
    monkeypatch.setattr(steady_mod, "IN_FLIGHT_STEPS", 0)
    monkeypatch.setattr(replay_mod, "IN_FLIGHT_STEPS", 0)
    assert closed_loop(_step(), alone) == one
    assert replay_closed_loop(_step(), alone) == one_replay
    assert replay_closed_loop(_step(), fixed) == lock
