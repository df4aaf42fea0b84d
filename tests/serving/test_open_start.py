"""Where the open loop's bracketing search starts (``serving.spine.open_near``, issue 26 r13cold):
Little's law at a multiple of the plan's weight-streaming floor. The start decides only which
step costs are priced: every figure equals the search's from the fixed start
(``OPEN_SPINE_START``), sawtooth cases (whole prompts per step) included."""

from __future__ import annotations

import math
import sys

import pytest

from plena_opt.serving.spine import (
    OPEN_SPINE_START,
    START_FLOOR_MULTIPLE,
    left_spine,
    open_near,
    open_start,
)
from tests.serving.test_spine import PLANS, _env, _step


def test_open_near_reads_the_floor() -> None:
    """Little's law at ``START_FLOOR_MULTIPLE`` floors; the fixed start without a usable floor;
    never above the CUDA-graph limit."""
    assert open_near(100.0, 0.01, 512) == START_FLOOR_MULTIPLE * 100.0 * 0.01
    assert open_near(100.0, 0.01, None) == START_FLOOR_MULTIPLE * 100.0 * 0.01
    assert open_near(1e6, 0.01, 512) == 512.0
    for floor in (None, 0.0, -1.0, math.nan, math.inf):
        assert open_near(100.0, floor, 512) == OPEN_SPINE_START
    assert open_near(0.0, 0.01, 512) == OPEN_SPINE_START


def test_open_start_defaults_to_the_fixed_start() -> None:
    """The first spine point at or below ``near`` (``OPEN_SPINE_START`` unless given)."""
    for top in (1023.0, 1024.0, 8191.0):
        k = open_start(top, 40)
        assert left_spine(top, k) <= OPEN_SPINE_START < left_spine(top, k - 1)
        for near in (0.7, 2.0, 37.5, 300.0):
            k = open_start(top, 40, near)
            assert left_spine(top, k) <= near < left_spine(top, k - 1)
    assert open_start(1024.0, 5, 1e-3) == 5  # a spine that ends above ``near``


def test_weight_stream_seconds_is_the_fullest_stage_read() -> None:
    """pp × the fullest stage's weight bytes on one device / the usable bandwidth; a step model
    over step costs that give none reads None (the search then starts at the fixed start)."""
    from plena_opt.serving.steps import StepModel

    for fields in ({"tp": 8}, {"tp": 4, "pp": 2}):
        step, _ = _step("llama-3.1-70b", fields, "vllm", 1024, 1024, 0.0, None)
        cost = step.costs._first(1)
        pp = step.costs.plan.pp
        want = pp * cost.footprint[0] / cost.ctx.memory.usable_bandwidth_bytes_per_s
        assert step.weight_stream_seconds == want > 0
    bare = StepModel(object(), step.engine, 8)  # type: ignore[arg-type]
    assert bare.weight_stream_seconds is None


CASES = ((1024, 1024, 0.8, 64), (8192, 1024, 0.0, 4), (2048, 256, 0.8, 256), (1024, 1024, 0.0, 4),
         (512, 2, 0.0, 64), (512, 2, 0.8, 1000), (1024, 1024, 0.0, 256))  # fmt: skip


@pytest.mark.parametrize(("name", "fields"), PLANS)
@pytest.mark.parametrize("eng_name", ["vllm", "sglang", "trtllm"])
def test_open_loop_from_the_floor_is_the_fixed_starts(
    name: str, fields: dict, eng_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dense TP, TP × PP, MoE attention DP × EP and TP × DP, each engine, at 0.2, 0.5 and 0.9 of
    the closed loop's throughput (512/2: whole prompts per step, a sawtooth): the open loop's
    figures (or refusal) from the floor's start equal those from the fixed start, bit for bit."""
    from plena_opt.errors import PlenaInputError
    from plena_opt.serving import OpenLoopWorkload, ServingWorkload, closed_loop, open_loop

    mod = sys.modules["plena_opt.serving.open_loop"]
    floor_start = mod.open_near
    for isl, osl, ratio, c in CASES:
        step, clients = _step(name, fields, eng_name, isl, osl, ratio, c)
        try:
            rate = closed_loop(step, ServingWorkload(clients, isl, osl, ratio))
        except PlenaInputError:
            continue
        for share in (0.2, 0.5, 0.9):
            wl = OpenLoopWorkload(share * rate.request_throughput_per_s, isl, osl, ratio)
            out = []
            for near in (floor_start, lambda *_: OPEN_SPINE_START):
                monkeypatch.setattr(mod, "open_near", near)
                fresh, _ = _step(name, fields, eng_name, isl, osl, ratio, None)
                try:
                    out.append(repr(open_loop(fresh, wl)))
                except PlenaInputError as e:
                    out.append(repr(e.args))
            assert out[0] == out[1], (isl, osl, ratio, c, share)


def test_the_floor_start_skips_the_fixed_starts_pass() -> None:
    """Llama-3.1-70B TP 8 on vLLM at half the C = 4 closed loop's rate (about 2 decoding): the
    floor's start prices the decode batches around the root only (from 16: also 16)."""
    from plena_opt.serving import OpenLoopWorkload, ServingWorkload, closed_loop, open_loop

    step, _ = _step("llama-3.1-70b", {"tp": 8}, "vllm", 1024, 1024, 0.0, 4)
    rate = closed_loop(step, ServingWorkload(4, 1024, 1024, 0.0)).request_throughput_per_s
    fresh, _ = _step("llama-3.1-70b", {"tp": 8}, "vllm", 1024, 1024, 0.0, None)
    open_loop(fresh, OpenLoopWorkload(rate / 2, 1024, 1024, 0.0))
    assert sorted(fresh.costs._mean) == [1, 2]


@pytest.mark.parametrize("c", [64, 1000])
def test_a_sawtooth_keeps_the_fixed_starts_root(c: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Qwen3-235B TP 8 on TensorRT-LLM, 512/2 on H100 (the serving figures sweep's case): with
    one output token after the first, every step's prompt part is whole prompts and
    ``work·TPOT(n) − n`` has roots close together (about 1.99 and 2.00 decoding); a search
    started from the floor alone lands on the other one. Where the start, the fixed start or
    the turn found lies at or above ``chunked``, the search runs from the fixed start: the same
    figures."""
    from plena_opt.estimate import Plan, Workload
    from plena_opt.models import load_model
    from plena_opt.serving import (
        OpenLoopWorkload,
        ServingWorkload,
        StepModel,
        closed_loop,
        engine_model,
        open_loop,
    )

    chip, noc, mem = _env()
    model, plan = load_model("qwen3-235b-a22b"), Plan(tp=8)
    eng = engine_model("trtllm", float(chip.hbm.capacity_bytes.value))
    wl = Workload(batch_size=1, input_seq_len=512, output_seq_len=2, precision="fp8")

    def fresh() -> StepModel:
        return StepModel.from_problem(model, noc, mem, chip, wl, plan, eng)

    rate = closed_loop(fresh(), ServingWorkload(c, 512, 2, 0.0)).request_throughput_per_s
    mod = sys.modules["plena_opt.serving.open_loop"]
    for share in (0.2, 0.9):
        ol = OpenLoopWorkload(share * rate, 512, 2, 0.0)
        got = open_loop(fresh(), ol)
        monkeypatch.setattr(mod, "open_near", lambda *_: OPEN_SPINE_START)
        assert got == open_loop(fresh(), ol)
        monkeypatch.undo()
