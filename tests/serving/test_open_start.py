"""Where the open loop's bracketing search starts (``serving.spine.open_near``, issue 26 r13cold):
Little's law at a multiple of the plan's weight-streaming floor. The start decides only which
step costs are priced: every figure equals the search's from the fixed start
(``OPEN_SPINE_START``), sawtooth cases (whole prompts per step) included."""

from __future__ import annotations

import math
import sys

import pytest

from plena_opt.serving.spine import (
    FLOOR_SETTLED,
    OPEN_SPINE_START,
    START_FLOOR_MULTIPLE,
    left_spine,
    open_near,
    open_start,
)
from tests.serving.test_spine import PLANS, _env, _step


def test_open_near_reads_the_floor() -> None:
    """The decoding requests ``n = work·START_FLOOR_MULTIPLE·floor(n)`` (a floor growing with
    n: the fixed-point steps rise to it); never above the CUDA-graph limit nor ``top``; the fixed
    start without a usable floor."""
    m = START_FLOOR_MULTIPLE
    assert open_near(100.0, lambda n: 0.01, 512, 1024.0) == m * 100.0 * 0.01
    assert open_near(100.0, lambda n: 0.01, None, 1024.0) == m * 100.0 * 0.01
    assert open_near(1e6, lambda n: 0.01, 512, 1024.0) == 512.0
    assert open_near(1e6, lambda n: 0.01, None, 1000.0) == 1000.0
    grow = open_near(10.0, lambda n: 0.01 * (1 + n / 100), None, 1024.0)  # n = 0.4·(1 + n/100)
    assert grow == pytest.approx(0.4 / (1 - 0.004), rel=FLOOR_SETTLED)
    for floor in (None, 0.0, -1.0, math.nan, math.inf):
        assert open_near(100.0, lambda n, f=floor: f, 512, 1024.0) == OPEN_SPINE_START
    assert open_near(0.0, lambda n: 0.01, 512, 1024.0) == OPEN_SPINE_START


def test_open_start_defaults_to_the_fixed_start() -> None:
    """The first spine point at or below ``near`` (``OPEN_SPINE_START`` unless given)."""
    for top in (1023.0, 1024.0, 8191.0):
        k = open_start(top, 40)
        assert left_spine(top, k) <= OPEN_SPINE_START < left_spine(top, k - 1)
        for near in (0.7, 2.0, 37.5, 300.0):
            k = open_start(top, 40, near)
            assert left_spine(top, k) <= near < left_spine(top, k - 1)
    assert open_start(1024.0, 5, 1e-3) == 5  # a spine that ends above ``near``


def test_decode_floor_streams_the_footprint() -> None:
    """At no request the floor reads the fullest stage's weights on one device, less the experts
    no token reaches, over every stage at the usable bandwidth; it grows with the requests (KV,
    the experts they reach) up to the whole footprint's weights; a step model over step costs
    that give none reads None (the search then starts at the fixed start)."""
    from plena_opt.serving.steps import StepModel

    for name, fields in (("llama-3.1-70b", {"tp": 8}), ("llama-3.1-70b", {"tp": 4, "pp": 2}),
                         ("qwen3-235b-a22b", {"ep": 8})):  # fmt: skip
        step, _ = _step(name, fields, "vllm", 1024, 1024, 0.0, None)
        cost = step.costs._first(1)
        floor = step.costs.decode_floor
        bw = cost.ctx.memory.usable_bandwidth_bytes_per_s
        weights = cost.footprint[0]
        pp = cost.plan.pp
        if floor.local_experts:  # MoE: no request reaches an expert; all do at many requests
            assert step.decode_floor_seconds(0.0) == pp * floor.fixed_bytes / bw
            assert floor.fixed_bytes < weights
            assert floor.fixed_bytes + floor.local_experts * floor.expert_bytes == pytest.approx(
                weights, rel=1e-12
            )
        else:
            assert step.decode_floor_seconds(0.0) == pp * weights / bw
        xs = [step.decode_floor_seconds(n) for n in (0.0, 1.0, 2.0, 16.0, 256.0)]
        assert xs == sorted(xs) and xs[0] < xs[-1]
    bare = StepModel(object(), step.engine, 8)  # type: ignore[arg-type]
    assert bare.decode_floor_seconds(4.0) is None


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


PRICED = [("llama-3.1-70b", {"tp": 8}, 4, [1, 2]), ("llama-3.1-70b", {"tp": 8}, 256, [32, 64]),
          ("qwen3-235b-a22b", {"ep": 8}, 4, [1, 2]),
          ("qwen3-235b-a22b", {"ep": 8}, 256, [64, 128])]  # fmt: skip


@pytest.mark.parametrize(("name", "fields", "c", "priced"), PRICED)
def test_the_floor_start_prices_the_roots_batches(name: str, fields: dict, c: int,
                                                  priced: list) -> None:  # fmt: skip
    """vLLM at half the C = 4 / 256 closed loop's rate, 1k/1k (about 2 / 56 / 2 / 118
    decoding): the floor's start prices the two decode batches around the root only (from the
    fixed start, 16, also 16)."""
    from plena_opt.serving import OpenLoopWorkload, ServingWorkload, closed_loop, open_loop

    step, _ = _step(name, fields, "vllm", 1024, 1024, 0.0, c)
    rate = closed_loop(step, ServingWorkload(c, 1024, 1024, 0.0)).request_throughput_per_s
    fresh, _ = _step(name, fields, "vllm", 1024, 1024, 0.0, None)
    open_loop(fresh, OpenLoopWorkload(rate / 2, 1024, 1024, 0.0))
    assert sorted(fresh.costs._mean) == priced


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
