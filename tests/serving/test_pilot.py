"""A fixed point's bisection checked at the two ends of a guessed path (``serving.pilot``, issue 26
r11cold) lands where the bisection run step by step lands, bit for bit, from any guess; the
guess takes a handful of evaluations; a residual seen rising sends it step by step; the loaded
figures are the stepwise bisection's (also ``test_spine.py``) with far fewer evaluations."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from plena_opt.serving.pilot import (
    PILOT_TRIES,
    Residual,
    bisection_path,
    pilot_bisection,
    secant_guess,
)

STEPS = 40


def _stepwise(decide, lo: float, hi: float, steps: int) -> tuple[float, float]:
    for _ in range(steps):
        m = (lo + hi) / 2
        if decide(m):
            lo = m
        else:
            hi = m
    return lo, hi


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (16.0, 32.0), (0.0, 1023.0), (1.5, 1.75)])
def test_bisection_path_is_the_stepwise_bisection(lo: float, hi: float) -> None:
    """The path a guess decides is the stepwise bisection's whose decision is m < guess."""
    for share in (0.0, 1e-13, 0.25, 0.5, 1 / 3, 0.999999, 1.0):
        guess = lo + share * (hi - lo)
        assert bisection_path(lo, hi, STEPS, guess) == _stepwise(lambda m, g=guess: m < g,
                                                                 lo, hi, STEPS)  # fmt: skip


ROOTS = [0.0, 1e-300, 2.0**-41, 1e-9, 0.3, 0.5, 0.75, 1 / 3, 0.9921875, 1 - 2.0**-40, 1.0]


@pytest.mark.parametrize("root", ROOTS)
def test_pilot_bisection_is_the_stepwise_one_from_any_guess(root: float) -> None:
    """With one crossing at ``root`` (f = root − x, its decision f > 0 exactly x < root) the
    pilot's [lo, hi] is the stepwise bisection's from any guess (near, far, outside, NaN); with
    the guess at the root it asks at most the path's two ends."""
    want = _stepwise(lambda m: root - m > 0.0, 0.0, 1.0, STEPS)
    for guess in (root, root + 1e-15, root - 1e-15, root + 3e-13, root - 3e-13, root + 1e-6,
                  0.5, 0.0, 1.0, -1.0, 2.0, math.nan):  # fmt: skip
        f = Residual(lambda x: root - x)
        assert pilot_bisection(f, 0.0, 1.0, STEPS, guess) == want
        if guess == root:
            assert len(f.seen) <= 2
        if abs(guess - root) > 1e-6 or guess != guess:  # far: the step-by-step run
            assert len(f.seen) <= PILOT_TRIES + 2 + STEPS


def test_pilot_bisection_goes_step_by_step_where_f_rises() -> None:
    """Three crossings (a sawtooth, as a pipelined plan's whole-prompt steps give the open
    loop): the guess near the upper root would land there; a point seen where f rises sends
    the bisection step by step, to the root the stepwise bisection finds."""

    def saw(x: float) -> float:  # falls 0.3 → −0.1 on [0, 0.4), jumps up, falls again
        return 0.3 - x if x < 0.4 else 0.7 - x

    want = _stepwise(lambda m: saw(m) > 0.0, 0.0, 1.0, STEPS)
    f = Residual(saw)
    f(0.35), f(0.45)  # seen: f rises from 0.35 to 0.45
    assert not f.falls(0.0, 1.0) and f.falls(0.5, 1.0)
    assert pilot_bisection(f, 0.0, 1.0, STEPS, 0.7) == want
    assert want[0] < 0.7 <= want[1] or want[0] < 0.3 <= want[1]


@pytest.mark.parametrize("slope", [0.0, 0.05, 0.5, 0.95])
@pytest.mark.parametrize("root", [0.2, 0.61, 0.98, 0.9999])
def test_secant_guess_lands_within_the_last_interval(slope: float, root: float) -> None:
    """F falling through a curve (f = F − x, F(x) = root + slope·(root − x)·(1 + x)): the guess
    from 3/4 is within 2⁻⁴⁴ of the root, in at most 8 evaluations."""

    def big_f(x: float) -> float:
        return root + slope * (root - x) * (1 + x)

    f = Residual(lambda x: big_f(x) - x)
    guess = secant_guess(f, 0.75, 0.0, 1.0, 2.0**-44)
    assert abs(guess - root) < 2.0**-44
    assert len(f.seen) <= 8


def _bench_step(c: int, isl: int, ratio: float, name: str = "llama-3.1-70b",
                fields: dict | None = None):  # fmt: skip
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Plan, Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model
    from plena_opt.serving import StepModel, engine_model

    chip = load_chip("h100-sxm")
    # vLLM's scheduler without async scheduling (before 0.14.0): the closed loop's figures are
    # then the solver's own (overlap adds its admission step after the solve, steady._admitted)
    eng = replace(
        engine_model("vllm", float(chip.hbm.capacity_bytes.value)), overlap_schedule=False
    )
    wl = Workload(batch_size=1, input_seq_len=isl, output_seq_len=1024, precision="fp8")
    return StepModel.from_problem(load_model(name), load_noc_profile("hgx-h100x8"),
                                  gpu_memory(chip), chip, wl, Plan(**(fields or {"tp": 8})),
                                  eng, range_ratio=ratio)  # fmt: skip


@pytest.mark.parametrize(("c", "isl", "ratio"), [(4, 1024, 0.8), (64, 1024, 0.8), (256, 8192, 0.8),
                                                 (64, 1024, 0.0), (256, 1024, 0.0)])  # fmt: skip
def test_closed_loop_evaluates_the_form_a_handful_of_times(c: int, isl: int, ratio: float) -> None:
    """The benchmark's cases (``benchmarks/bench_load_cost.py``, Llama-3.1-70B TP 8, vLLM): the
    closed loop evaluates its form at most 10 times (r10cold: the spine walk and 40 − k*
    bisection steps, 44–48) and gives the stepwise bisection's figures (``test_spine.py``)."""
    from plena_opt.serving import ServingWorkload, closed_loop, steady

    step = _bench_step(c, isl, ratio)
    wl = ServingWorkload(c, isl, 1024, ratio)
    make = steady._lockstep_solver if ratio == 0 else steady._cycle_solver
    solve = make(step, wl, c)
    calls: list[float] = []

    def counted(lo: float, hi: float, n: int, k: int) -> tuple[float, float]:
        calls.append((lo + hi) / 2)
        return solve(lo, hi, n, k)

    name = "_lockstep_solver" if ratio == 0 else "_cycle_solver"
    mp = pytest.MonkeyPatch()
    mp.setattr(steady, name, lambda *a: counted)
    try:
        m = closed_loop(step, wl)
    finally:
        mp.undo()
    assert 1 < len(calls) <= 10
    lo, hi = _stepwise(lambda p: _decide(solve, p), 0.0, 1.0, STEPS)
    assert (m.ttft_seconds, m.tpot_seconds) == solve(lo, hi, 0, 1023)


def _decide(solve, phi: float) -> bool:
    ttft, tpot = solve(phi, phi, 0, 0)
    return 1023 * tpot / (ttft + 1023 * tpot) > phi
