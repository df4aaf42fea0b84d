"""Undated (gap-analysis) rows run the step budget AIConfigurator's generator writes."""

from __future__ import annotations

from plena_opt.serving import engine_model
from plena_opt.validate.aic_deploy import generated_batch, generated_engine
from plena_opt.validate.serving_rows import ServingRow

GIB = 1 << 30


def _row(**fields: str) -> ServingRow:
    base = {"mode": "agg", "batch_size": "8", "measured_on": ""}
    return ServingRow("r", {**base, **fields})


def test_only_undated_aggregated_rows_with_a_batch_are_generated_deployments() -> None:
    assert generated_batch(_row()) == 8
    assert generated_batch(_row(measured_on="2025-10-01")) is None  # InferenceX: own recipes
    assert generated_batch(_row(mode="disagg")) is None
    assert generated_batch(_row(batch_size="")) is None


def test_budget_is_the_generators_formula_per_engine() -> None:
    vllm = generated_engine(engine_model("vllm", 80 * GIB), 8, 1024)
    assert vllm.budget_tokens == 8 + 1024 + 1500  # max_num_tokens = max_batch_size + isl + 1500
    trt = generated_engine(engine_model("trtllm", 80 * GIB), 8, 1024)
    assert trt.budget_tokens == 2560  # 2532 rounded up to tokens_per_block 32
    sgl = generated_engine(engine_model("sglang", 80 * GIB), 8, 1024)
    assert sgl.budget_tokens == 1024 + 1500 + 1023  # max_prefill_tokens, last prompt overruns
    long = generated_engine(engine_model("sglang", 80 * GIB), 8, 8192)
    assert long.budget_tokens == 8192  # chunked_prefill_size still caps a prefill batch
    assert vllm.max_running == engine_model("vllm", 80 * GIB).max_running  # only the budget


def test_a_fixed_length_run_is_the_replay_from_its_start_burst() -> None:
    from dataclasses import replace

    from plena_opt.serving import ServingWorkload, benchmark_run
    from plena_opt.serving.benchmark import fixed_length_run
    from plena_opt.serving.replay import replay_closed_loop
    from plena_opt.validate.serving_rows import resolve
    from plena_opt.validate.serving_score import step_model

    row = _row(backend="trtllm", model_path="Qwen/Qwen3-32B", system="h100_sxm", isl="4096",
               osl="64", tp_size="1", pp_size="1", moe_tp_size="1", moe_ep_size="1",
               gemm_quant_mode="fp8", concurrency="8")  # fmt: skip
    d = replace(resolve(row), generated_batch=generated_batch(row))
    step = step_model(d)
    fixed = ServingWorkload(8, 4096, 64)
    run = fixed_length_run(step, fixed)
    replay = replay_closed_loop(step, fixed, 80, warmup_waves=0)
    assert run.ttft_seconds == replay.ttft_seconds  # additive steps at fixed lengths
    # one 4096-token prompt per step (budget 5632): the burst's eight prompts queue behind each
    # other and, fixed lengths keeping the clients together, keep doing so; the steady lock-step
    # form prices the settled groups of one and misses that queue
    assert run.ttft_seconds > 1.3 * benchmark_run(step, fixed).ttft_seconds  # 675 vs 445 ms
    drawn = replace(fixed, range_ratio=0.8)  # drawn lengths: the closed form, unchanged
    assert fixed_length_run(step, drawn) == benchmark_run(step, drawn)
