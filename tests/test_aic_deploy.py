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
