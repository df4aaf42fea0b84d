"""Arrivals held back by a recipe's scheduler settings: TensorRT-LLM batch waiting (up to N steps,
``steady.batch_wait_steps``; ``validate.serving_recipes.trtllm_batch_wait``) and SGLang's receive
interval (read every N decode steps; ``validate.serving_recipes.sglang_recv_interval``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.serving import EngineModel, ServingWorkload, StepModel, closed_loop
from plena_opt.serving.steady import batch_wait_steps
from plena_opt.validate.serving_rows import ServingRow, resolve
from tests.serving.test_serving import LinearCosts

ROW = {"backend": "trtllm", "model_path": "meta-llama/Llama-3.1-70B", "system": "b200_sxm",
       "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "4", "concurrency": "8",
       "gemm_quant_mode": "fp8", "measured_on": "2026-04-06"}  # fmt: skip
IX_ID = "2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x1024_c8_tp4_ep1_706"


def test_engine_refuses_bad_batch_wait_settings():
    with pytest.raises(PlenaInputError) as exc:
        EngineModel("t", 8192, None, None, batch_wait_iters=-1)
    assert exc.value.field == "batch_wait_iters"
    with pytest.raises(PlenaInputError) as exc:
        EngineModel("t", 8192, None, None, batch_wait_tokens_ratio=1.5)
    assert exc.value.field == "batch_wait_tokens_ratio"


def test_wait_is_the_timeout_when_prompts_arrive_alone_and_shrinks_as_they_crowd():
    eng = EngineModel("t", 16384, None, None, batch_wait_iters=20, batch_wait_tokens_ratio=0.9)
    wl = ServingWorkload(4, 1024, 1024)
    assert batch_wait_steps(eng, wl, 4, 0.0) == pytest.approx(20.0)
    sparse = batch_wait_steps(eng, wl, 4, 0.95)
    crowded = batch_wait_steps(eng, replace(wl, concurrency=256), 256, 0.95)
    assert 17 < sparse < 20 and crowded < sparse
    # the token threshold: prompts of 16k tokens fill 0.9 × 16384 alone, nobody waits
    assert batch_wait_steps(eng, ServingWorkload(4, 16384, 1024), 4, 0.9) == 0.0


def test_closed_loop_ttft_grows_by_the_waited_steps_and_tpot_does_not_change():
    base = EngineModel("t", 8192, None, None)
    waits = replace(base, batch_wait_iters=20, batch_wait_tokens_ratio=0.9)
    wl = ServingWorkload(4, 1024, 1024, 0.8)
    off = closed_loop(StepModel(LinearCosts(), base, gpus=1), wl)  # type: ignore[arg-type]
    on = closed_loop(StepModel(LinearCosts(), waits, gpus=1), wl)  # type: ignore[arg-type]
    # the waiting prompts are out of the decode batch a little longer: TPOT a hair lower
    assert on.tpot_seconds <= off.tpot_seconds
    assert on.tpot_seconds == pytest.approx(off.tpot_seconds, rel=5e-3)
    extra = (on.ttft_seconds - off.ttft_seconds) / on.tpot_seconds
    assert 18 < extra < 20  # ~20 steps: at C = 4 few prompts arrive within one wait


def test_the_recipe_sets_batch_waiting_only_where_it_writes_it():
    assert resolve(ServingRow(IX_ID, ROW)).batch_wait == (20, 0.9)
    tp8 = IX_ID.replace("tp4", "tp8")
    assert resolve(ServingRow(tp8, {**ROW, "tp_size": "8"})).batch_wait is None
    assert resolve(ServingRow(IX_ID, {**ROW, "osl": "8192"})).batch_wait is None
    vllm = {**ROW, "backend": "vllm", "backend_version": "0.15.1"}
    assert resolve(ServingRow(IX_ID, vllm)).batch_wait is None
    # an undated row (not an InferenceX run) keeps the engine default
    assert resolve(ServingRow("grid_row_1", ROW)).batch_wait is None


R1_SGLANG = {"backend": "sglang", "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
             "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "8", "concurrency": "16",
             "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8_block", "moe_tp_size": "8",
             "moe_ep_size": "1", "measured_on": "2026-04-06"}  # fmt: skip
R1_ID = "2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c16_tp8_ep1_286"


def test_receive_interval_adds_half_an_interval_less_one_of_decode_steps():
    with pytest.raises(PlenaInputError) as exc:
        EngineModel("t", 8192, None, None, recv_interval_steps=0)
    assert exc.value.field == "recv_interval_steps"
    base = EngineModel("t", 8192, None, None, mixed_prefill=False, overlap_schedule=True)
    wl = ServingWorkload(16, 1024, 1024, 0.8)
    off = closed_loop(StepModel(LinearCosts(), base, gpus=1), wl)  # type: ignore[arg-type]
    step = StepModel(LinearCosts(), replace(base, recv_interval_steps=30), gpus=1)  # type: ignore[arg-type]
    on = closed_loop(step, wl)
    decode = step.step_seconds(0, 15)  # the others decoding, about all of the 15
    # read every 30 steps at a uniform phase: 0…29 steps after the one it missed, 14.5 on average
    assert on.ttft_seconds - off.ttft_seconds == pytest.approx(14.5 * decode, rel=0.05)
    assert on.tpot_seconds == pytest.approx(off.tpot_seconds, rel=0.01)  # φ moves a little


def test_receive_interval_of_two_waits_half_a_step():
    """Every other step: half the arrivals are read at once, half a step later (N/2 would say a
    whole step). Fails without the (N − 1) / 2 of steady._admitted."""
    base = EngineModel("t", 8192, None, None, mixed_prefill=False, overlap_schedule=True)
    wl = ServingWorkload(16, 1024, 1024, 0.8)
    off = closed_loop(StepModel(LinearCosts(), base, gpus=1), wl)  # type: ignore[arg-type]
    step = StepModel(LinearCosts(), replace(base, recv_interval_steps=2), gpus=1)  # type: ignore[arg-type]
    two = closed_loop(step, wl)
    decode = step.step_seconds(0, 15)
    assert two.ttft_seconds - off.ttft_seconds == pytest.approx(0.5 * decode, rel=0.1)


def test_the_recipe_sets_the_receive_interval_by_concurrency():
    assert resolve(ServingRow(R1_ID, R1_SGLANG)).recv_interval == 30
    c8 = R1_ID.replace("_c16_", "_c8_")
    assert resolve(ServingRow(c8, {**R1_SGLANG, "concurrency": "8"})).recv_interval == 10
    assert resolve(ServingRow(R1_ID, {**R1_SGLANG, "system": "h100_sxm"})).recv_interval == 1
    assert resolve(ServingRow("grid_row_1", R1_SGLANG)).recv_interval == 1
