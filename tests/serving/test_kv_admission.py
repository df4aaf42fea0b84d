"""The running cap an engine's KV pool sets (``serving.kv_admission``) and its use in validate."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.serving.kv_admission import (
    KV_CAPPED_ENGINES,
    kv_running_cap,
    pool_bytes,
    sglang_mem_fraction,
)
from plena_opt.validate.serving_rows import ServingRow, resolve
from plena_opt.validate.serving_score import _parts, step_model

GB = 1e9
QWEN_TP2 = {"id": "q", "backend": "vllm", "model_path": "Qwen/Qwen3-32B", "system": "h100_sxm",
            "mode": "agg", "isl": "4096", "osl": "128", "tp_size": "2",
            "concurrency": "128", "backend_version": "0.12.0"}  # fmt: skip


def test_pool_bytes_follow_each_engines_memory_setting():
    # vLLM: 0.9 of the device holds weights, activations and KV
    assert pool_bytes("vllm", 80 * GB, 30 * GB, 2 * GB, 1) == pytest.approx(40 * GB)
    # SGLang: mem_fraction_static of the device holds weights and KV (0.81 at TP 8)
    assert pool_bytes("sglang", 80 * GB, 30 * GB, 2 * GB, 8) == pytest.approx(
        0.81 * 80 * GB - 30 * GB
    )
    # TensorRT-LLM: 0.9 of what weights and activations leave
    assert pool_bytes("trtllm", 80 * GB, 30 * GB, 2 * GB, 1) == pytest.approx(0.9 * 48 * GB)
    assert [sglang_mem_fraction(t) for t in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]


def _cap(fields: dict, engine: str) -> int | None:
    from plena_opt.estimate import Plan

    d = resolve(ServingRow("q", {**fields, "backend": engine}))
    model, noc, memory, chip, wl, eng = _parts(d, 0.0)
    plan = Plan(tp=d.tp)
    return kv_running_cap(model, noc, memory, chip, wl, plan, engine, eng.budget_tokens)


def test_cap_shrinks_with_longer_sequences_and_grows_with_tp():
    short = _cap({**QWEN_TP2, "isl": "1024"}, "vllm")
    long = _cap(QWEN_TP2, "vllm")
    wide = _cap({**QWEN_TP2, "tp_size": "4"}, "vllm")
    assert long is not None and short is not None and wide is not None
    assert long < 128 < short  # Qwen3-32B bf16 on 2 H100s: ~70 requests of 4k tokens
    assert wide > 2 * long  # 4 GPUs: more HBM and half the weights per GPU
    # TensorRT-LLM reserves the whole sequence, vLLM holds the prompt and half the output on
    # average: with long outputs TensorRT-LLM admits fewer
    long_out = {**QWEN_TP2, "isl": "1024", "osl": "4096"}
    assert _cap(long_out, "trtllm") < 0.75 * _cap(long_out, "vllm")


def test_no_cap_when_the_default_pool_holds_no_request():
    # Llama-3.1-70B bf16 on one H100: the weights exceed 0.9 of the device (the deployment
    # could not start at the default setting), so memory sets no cap rather than a guess
    row = {**QWEN_TP2, "model_path": "meta-llama/Llama-3.1-70B", "tp_size": "1"}
    assert _cap(row, "vllm") is None


def test_validate_caps_vllm_and_sglang_only():
    d = resolve(ServingRow("q", QWEN_TP2))
    assert step_model(d).engine.max_running == _cap(QWEN_TP2, "vllm") < 128
    assert KV_CAPPED_ENGINES == {"vllm", "sglang"}
    trt = replace(d, engine="trtllm")
    assert step_model(trt).engine.max_running == 2048  # the engine default, not the KV pool


def test_pipeline_stages_do_not_multiply_the_requests_the_pool_holds():
    # Llama-3.1-70B fp8 8k/1k on one 8×H100 node: TP 4 × PP 2 holds the same weights and the same
    # KV per token on each GPU as TP 8 (half the layers, twice the KV heads), and every stage
    # holds the KV of every running request, so the pool admits as many requests, not twice as
    # many (the reference's static footprint counts one micro-batch; the engine's pool is not it)
    from plena_opt.estimate import Plan

    d = resolve(ServingRow("q", {**QWEN_TP2, "model_path": "meta-llama/Llama-3.1-70B",
                                 "isl": "8192", "osl": "1024", "tp_size": "8",
                                 "gemm_quant_mode": "fp8", "precision": "fp8"}))  # fmt: skip
    model, noc, memory, chip, wl, eng = _parts(d, 0.0)

    def cap(plan: Plan) -> int | None:
        return kv_running_cap(model, noc, memory, chip, wl, plan, "vllm", eng.budget_tokens)

    tp8, tp4pp2 = cap(Plan(tp=8)), cap(Plan(tp=4, pp=2))
    assert tp8 is not None and tp4pp2 is not None
    assert abs(tp4pp2 - tp8) <= 0.02 * tp8
