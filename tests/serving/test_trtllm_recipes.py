"""TensorRT-LLM settings of the InferenceX recipes: attention-DP balancing (prompts held until
every attention-DP rank has one or a timeout passes, ``steady.adp_balance_steps``;
``validate.serving_recipes.trtllm_adp_balance``) and the step budget ``max_num_tokens``
(``validate.serving_recipes.trtllm_max_num_tokens``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.serving import EngineModel, ServingWorkload, StepModel, closed_loop
from plena_opt.serving.steady import adp_balance_steps
from plena_opt.validate.serving_rows import ServingRow, resolve
from tests.serving.test_serving import LinearCosts

R1 = {"backend": "trtllm", "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
      "precision": "fp4", "mode": "agg", "isl": "1024", "osl": "1024",
      "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "batch_size": "16", "tp_size": "1",
      "pp_size": "1", "attention_dp_size": "8", "moe_tp_size": "1", "moe_ep_size": "8",
      "concurrency": "128", "measured_on": "2026-02-03"}  # fmt: skip
R1_ID = "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp8_0_ep8_0_1085"
OSS = {**R1, "model_path": "openai/gpt-oss-120b", "attention_dp_size": "4", "moe_ep_size": "4",
       "batch_size": "16", "concurrency": "64"}  # fmt: skip
OSS_ID = "2026_03_25_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp4_0_ep4_0_1007"


def test_engine_refuses_bad_balance_settings():
    for field, value in (("adp_ranks", 0), ("adp_timeout_iters", -1),
                         ("adp_batching_wait_iters", 10_001)):  # fmt: skip
        with pytest.raises(PlenaInputError) as exc:
            EngineModel("t", 8192, None, None, **{field: value})  # type: ignore[arg-type]
        assert exc.value.field == field


def test_wait_is_half_the_timeout_when_arrivals_are_sparse_and_shrinks_when_they_crowd():
    eng = EngineModel("t", 8192, None, None, adp_ranks=8, adp_timeout_iters=60)
    wl = ServingWorkload(128, 1024, 1024)
    # 128 clients finishing 1k outputs: 0.125 arrivals a step; 8 ranks need 21.7 (8·H(8)) of them,
    # 174 steps > 60: the counter's timeout releases them, a prompt waits 30 steps on average
    assert adp_balance_steps(eng, wl, 128, 1.0) == pytest.approx(30.0)
    assert adp_balance_steps(eng, wl, 128, 0.0) == pytest.approx(30.0)  # nobody decodes
    # 2,048 clients: 2 arrivals a step cover the 8 ranks in 10.9 steps, half of it waited
    crowded = adp_balance_steps(eng, wl, 2048, 1.0)
    assert crowded == pytest.approx(8 * sum(1 / i for i in range(1, 9)) / (2048 / 1023) / 2)
    # TensorRT-LLM's default batching wait (10 steps) follows when the ranks fill first
    waits = replace(eng, adp_batching_wait_iters=10)
    assert adp_balance_steps(waits, wl, 2048, 1.0) == pytest.approx(crowded + 10)
    assert adp_balance_steps(waits, wl, 128, 1.0) == pytest.approx(30.0)  # timeout: no extra


def test_closed_loop_ttft_grows_by_the_held_decode_steps_and_tpot_does_not_change():
    base = EngineModel("t", 8192, None, None, overlap_schedule=True)
    wl = ServingWorkload(64, 1024, 1024, 0.8)
    off = closed_loop(StepModel(LinearCosts(), base, gpus=1), wl)  # type: ignore[arg-type]
    step = StepModel(LinearCosts(), replace(base, adp_ranks=8, adp_timeout_iters=60), gpus=1)  # type: ignore[arg-type]
    on = closed_loop(step, wl)
    decode = step.step_seconds(0, 63)  # a decode step of the others, about all of the 63
    assert on.ttft_seconds - off.ttft_seconds == pytest.approx(30 * decode, rel=0.05)
    # the held prompts are out of the decode batch a little longer: TPOT a little lower
    assert off.tpot_seconds * 0.97 < on.tpot_seconds <= off.tpot_seconds
    # one rank: nothing to balance, no wait
    one = StepModel(LinearCosts(), replace(base, adp_ranks=1, adp_timeout_iters=60), gpus=1)  # type: ignore[arg-type]
    assert closed_loop(one, wl).ttft_seconds == pytest.approx(off.ttft_seconds)


def test_the_recipes_set_balancing_only_with_attention_dp():
    assert resolve(ServingRow(R1_ID, R1)).adp_balance == (60, 0)  # dsr1_fp4_b200_trt.sh
    assert resolve(ServingRow(OSS_ID, OSS)).adp_balance == (50, 10)  # the engine's defaults
    tp8 = {**R1, "tp_size": "8", "attention_dp_size": "1", "batch_size": "128"}
    assert resolve(ServingRow(R1_ID.replace("ep8", "ep1"), tp8)).adp_balance is None
    assert resolve(ServingRow("grid_row_1", R1)).adp_balance is None  # not an InferenceX run


def test_the_recipes_step_budget_is_the_one_they_pass_to_trtllm_serve():
    from plena_opt.validate.serving_score import step_model

    # dsr1_fp4_b200_trt.sh: (CONC + ISL + 127) rounded down to 64, at least 8192 from 2026-01-21
    assert resolve(ServingRow(R1_ID, R1)).max_num_tokens == 8192
    early = resolve(ServingRow(R1_ID, {**R1, "measured_on": "2025-11-02"}))
    assert early.max_num_tokens == (128 + 1024 + 127) // 64 * 64 == 1216
    assert step_model(early).engine.budget_tokens == 1216  # the engine the row is priced under
    assert resolve(ServingRow(OSS_ID, OSS)).max_num_tokens == 20000  # gptoss_fp4_b200_trt.sh
    from tests.serving.test_batch_wait import IX_ID, ROW

    assert resolve(ServingRow(IX_ID, ROW)).max_num_tokens == 16384  # 70b_fp8_b200_trt_*.sh
    vllm = {**ROW, "backend": "vllm", "backend_version": "0.15.1"}
    assert resolve(ServingRow(IX_ID, vllm)).max_num_tokens is None
    assert resolve(ServingRow("grid_row_1", R1)).max_num_tokens is None  # not an InferenceX run


def test_the_recipes_kv_memory_caps_tensorrt_llm_where_it_is_known():
    from plena_opt.validate.serving_score import step_model
    from tests.serving.test_batch_wait import IX_ID, ROW

    assert resolve(ServingRow(R1_ID, R1)).trt_kv_fraction == 0.8  # dsr1_fp4_b200_trt.sh
    # runs up to 2025-11-02 chose their own EP / attention DP: their KV admission is unknown
    early = resolve(ServingRow(R1_ID, {**R1, "measured_on": "2025-11-02"}))
    assert early.trt_kv_fraction is False
    assert resolve(ServingRow(OSS_ID, OSS)).trt_kv_fraction == 0.85
    # Llama-3.1-70B's recipe sets none: TensorRT-LLM's default; TP 1 fp8 1k/8k at 128 clients
    # (measured TTFT 137 s): whole sequences of 9,216 tokens, 71 of the 128 fit (the rest queue)
    tp1 = {**ROW, "tp_size": "1", "osl": "8192", "concurrency": "128"}
    d = resolve(ServingRow(IX_ID.replace("tp4", "tp1"), tp1))
    assert d.trt_kv_fraction is None
    assert step_model(d).engine.max_running == 71
    assert resolve(ServingRow("grid_row_1", ROW)).trt_kv_fraction is False  # not InferenceX


def test_the_kv_pool_is_sized_from_the_memory_cuda_reports():
    from plena_opt.serving.kv_admission import REPORTED_DEVICE_MEMORY_BYTES, pool_bytes

    assert REPORTED_DEVICE_MEMORY_BYTES["h100-sxm"] == pytest.approx(85.52e9, rel=1e-3)
    assert REPORTED_DEVICE_MEMORY_BYTES["b200"] == pytest.approx(192.27e9, rel=1e-3)
    # vLLM at 0.9: 5.0 GB more pool per H100 than the datasheet's 80e9 gave
    more = pool_bytes("vllm", REPORTED_DEVICE_MEMORY_BYTES["h100-sxm"], 40e9, 1e9, 4)
    assert more - pool_bytes("vllm", 80e9, 40e9, 1e9, 4) == pytest.approx(0.9 * 5.52e9, rel=1e-2)
