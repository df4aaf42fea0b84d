"""The faster paths of the steady-state model give the figures of the paths they replace
(issue 26, a plan under load at most 2x its static cost): contexts derived for another batch
size, the bisection run inside a form's frame, the kept decode lines, the metrics built
without the frozen ``__init__``. ``test_step_costs.py`` pins the resulting figures."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest


def _env() -> tuple:
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate.gpu import gpu_memory

    chip = load_chip("h100-sxm")
    return chip, load_noc_profile("hgx-h100x8"), gpu_memory(chip)


@pytest.mark.parametrize(("name", "fields"), [("llama-3.1-70b", {"tp": 8}),
                                              ("qwen3-235b-a22b", {"ep": 8})])  # fmt: skip
def test_derived_context_prices_as_a_new_one(name: str, fields: dict) -> None:
    """``EstimateContext.with_lengths`` (its routing rows shared with the first context) gives
    the full report a new context of that workload gives, in any order of batch sizes."""
    from plena_opt.estimate import Plan, Workload
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.distributed import PlanCost
    from plena_opt.estimate.memo import PricingMemo
    from plena_opt.models import load_model

    chip, noc, mem = _env()
    model, plan = load_model(name), Plan(**fields)
    wl = Workload(batch_size=64, input_seq_len=1024, output_seq_len=512, precision="fp8")
    memos = {1: PricingMemo(), 512: PricingMemo()}
    first = EstimateContext(model, noc, mem, wl, chip, memo=memos[512])
    PlanCost(first, plan).to_estimate()
    for batch, osl in ((7, 1), (300, 512), (1, 512), (2, 1), (64, 1), (1024, 512)):
        derived = first.with_lengths(batch, osl, memos[osl])
        fresh = EstimateContext(model, noc, mem, replace(wl, batch_size=batch, output_seq_len=osl),
                                chip, memo=PricingMemo())  # fmt: skip
        assert derived.workload == fresh.workload
        got, want = PlanCost(derived, plan).to_estimate(), PlanCost(fresh, plan).to_estimate()
        assert got.to_dict() == want.to_dict()
    assert first.with_lengths(8, 1, memos[1])._row_box is first._row_box  # balanced routing


def _step(name: str, fields: dict, isl: int, osl: int, ratio: float):
    from plena_opt.estimate import Plan, Workload
    from plena_opt.models import load_model
    from plena_opt.serving import StepModel, engine_model

    chip, noc, mem = _env()
    # vLLM's scheduler without async scheduling (before 0.14.0): the closed loop's figures are
    # then the solver's own (overlap adds its admission step after the solve, steady._admitted)
    eng = replace(
        engine_model("vllm", float(chip.hbm.capacity_bytes.value)), overlap_schedule=False
    )
    wl = Workload(batch_size=1, input_seq_len=isl, output_seq_len=osl, precision="fp8")
    return StepModel.from_problem(load_model(name), noc, mem, chip, wl, Plan(**fields), eng,
                                  range_ratio=ratio)  # fmt: skip


@pytest.mark.parametrize("ratio", [0.0, 0.8])
@pytest.mark.parametrize(("isl", "c"), [(1024, 4), (1024, 256), (8192, 4), (8192, 64)])
def test_bisection_in_the_forms_frame_is_the_stepwise_one(ratio: float, isl: int, c: int) -> None:
    """``solve(0, 1, n, k)`` lands where ``n`` bisection steps over ``solve(φ, φ, 0, 0)`` (the
    form at one φ) land, and returns the form's figures there."""
    from plena_opt.serving import ServingWorkload, closed_loop
    from plena_opt.serving.steady import BISECTION_STEPS, _cycle_solver, _lockstep_solver

    osl = 1024
    step = _step("qwen3-235b-a22b", {"ep": 8}, isl, osl, ratio)
    wl = ServingWorkload(c, isl, osl, ratio)
    solver = _lockstep_solver if ratio == 0 else _cycle_solver
    solve = solver(step, wl, c)
    lo, hi = 0.0, 1.0
    for _ in range(BISECTION_STEPS):
        phi = (lo + hi) / 2
        ttft, tpot = solve(phi, phi, 0, 0)
        if (osl - 1) * tpot / (ttft + (osl - 1) * tpot) > phi:
            lo = phi
        else:
            hi = phi
    want = solve((lo + hi) / 2, (lo + hi) / 2, 0, 0)
    assert solver(step, wl, c)(0.0, 1.0, BISECTION_STEPS, osl - 1) == want
    m = closed_loop(step, wl)
    assert (m.ttft_seconds, m.tpot_seconds) == want
    assert 0 < lo < hi < 1 and hi - lo == 2.0**-BISECTION_STEPS


def test_decode_lines_are_the_kept_interpolation() -> None:
    """Each kept line ``n`` is (decode part at n, at n + 1 − at n), both ends kept, and the
    interpolation read from it is ``decode_seconds``'s."""
    from plena_opt.serving import ServingWorkload, closed_loop

    step = _step("qwen3-235b-a22b", {"ep": 8}, 1024, 1024, 0.8)
    closed_loop(step, ServingWorkload(64, 1024, 1024, 0.8))
    lines = step.decode_lines
    assert lines
    for n, (t, slope) in lines.items():
        assert step.decode_kept(n) == t and step.decode_kept(n + 1) - t == slope
        for x in (n, n + 0.25, n + 0.7):
            assert step.decode_seconds(x) == t + (x - n) * slope
    kept = [n for n in range(1, 2048) if step.decode_kept(n) is not None]
    assert sorted(lines) == [n for n in kept if n + 1 in kept]


def test_metrics_of_the_means_are_the_dataclass() -> None:
    from plena_opt.serving.workload import ServingMetrics

    args = (0.1, 0.02, 20.0, 3.0, 3000.0, 375.0, 50.0, 12.5)
    fast, slow = ServingMetrics.means(*args), ServingMetrics(*args)
    assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
    assert asdict(fast) == asdict(slow) and list(vars(fast)) == list(vars(slow))
    with pytest.raises(AttributeError):
        fast.ttft_seconds = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(("isl", "c", "budget"), [(1024, 256, 8192), (1000, 64, 8192),
                                                  (300, 100, 2048), (7, 9, 64)])  # fmt: skip
def test_group_size_does_not_rise_with_the_others_decoding(isl: int, c: int, budget: int) -> None:
    """The lock-step solver reuses a group size between two counts of others that gave it:
    exact only because the size never rises as more others decode."""
    from plena_opt.serving.steady import _group_size

    last = None
    for i in range(20001):
        others = (c - 1) * i / 20000
        room = max(1.0, budget - others)
        if isl > room:
            break
        g = _group_size(isl, c, budget, others, room)
        assert 1 <= g <= c and (last is None or g <= last)
        last = g
