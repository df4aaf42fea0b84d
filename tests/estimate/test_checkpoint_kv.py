"""A ModelOpt checkpoint's declared KV-cache format (``kv_cache_quant_algo``), stored by an engine
whose default KV dtype inherits it (README_serving r17kvckpt).

``models.checkpoint.KV_FP8_CHECKPOINTS`` lists the ids whose value was read (cited there); an id
not listed keeps bf16. ``KV_INHERITS``: TensorRT-LLM (every version), vLLM from 0.14.0, SGLang
from 0.5.9.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from deepstack import load_noc_profile
from deepstack.gpu_nodes import first_devices

from plena_opt.api.estimates import estimate_plan
from plena_opt.chip import load_chip
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.estimate.problem import EvaluatorInputs
from plena_opt.models import ModelSpec, builtin_config, load_model
from plena_opt.models.catalog import resolve_model_id
from plena_opt.models.checkpoint import (
    KV_BF16_CHECKPOINTS,
    KV_FP8_CHECKPOINTS,
    checkpoint_kv_format,
    config_kv_format,
    engine_inherits_kv,
)
from plena_opt.serving.engines import VERSIONS
from plena_opt.validate.serving_rows import ServingRow, read_rows, resolve
from plena_opt.validate.serving_score import shipped_serving_csv

QWEN_NVFP4 = "nvidia/Qwen3-32B-NVFP4"


def test_the_table_resolves_cited_ids_to_fp8_and_others_to_bf16() -> None:
    for hf_id, source in KV_FP8_CHECKPOINTS.items():
        assert checkpoint_kv_format(hf_id) == "fp8" and "FP8" in source  # each entry cited
    assert checkpoint_kv_format(QWEN_NVFP4) == "fp8"
    assert checkpoint_kv_format("NVIDIA/Llama-3.3-70B-Instruct-NVFP4") == "fp8"  # any case
    for hf_id in ("Qwen/Qwen3-32B", "meta-llama/Llama-3.3-70B-Instruct", None, ""):
        assert checkpoint_kv_format(hf_id) is None  # a base (bf16) checkpoint
    for hf_id in KV_BF16_CHECKPOINTS:  # ModelOpt ids read with kv_cache_quant_algo null
        assert checkpoint_kv_format(hf_id) is None
    # not confirmed: an NVIDIA id whose hf_quant_config.json was not found stays bf16
    assert checkpoint_kv_format("nvidia/DeepSeek-R1-NVFP4") is None
    assert load_model(QWEN_NVFP4).checkpoint_kv_precision == "fp8"
    assert load_model("Qwen/Qwen3-32B").checkpoint_kv_precision is None
    assert load_model("qwen3-32b").checkpoint_kv_precision is None


# each listed id (README_serving r17kvckpt, r17kvids) → (catalog entry, weight format, KV format)
LISTED = {
    "nvidia/Qwen3-32B-NVFP4": ("qwen3-32b", "fp4", "fp8"),
    "nvidia/Llama-3.3-70B-Instruct-NVFP4": ("llama-3.3-70b", "fp4", "fp8"),
    "nvidia/Qwen3-30B-A3B-NVFP4": ("qwen3-30b-a3b", "fp4", "fp8"),
    "nvidia/Qwen3-235B-A22B-NVFP4": ("qwen3-235b-a22b", "fp4", "fp8"),
    "nvidia/Llama-3.3-70B-Instruct-FP4": ("llama-3.3-70b", "fp4", "fp8"),
    "nvidia/Llama-3.1-405B-Instruct-FP8": ("llama-3.1-405b", "fp8", None),
    "nvidia/Llama-3.1-8B-Instruct-FP8": ("llama-3.1-8b", "fp8", None),
    "nvidia/Llama-3.1-70B-Instruct-FP8": ("llama-3.1-70b", "fp8", None),
}


@pytest.mark.parametrize("hf_id", sorted(LISTED))
def test_each_listed_id_resolves_to_its_catalog_model_and_declared_kv(hf_id: str) -> None:
    name, weights, kv = LISTED[hf_id]
    found = resolve_model_id(hf_id)
    assert found is not None and (found.name, found.checkpoint_precision) == (name, weights)
    spec = load_model(hf_id)
    assert (spec.checkpoint_precision, spec.checkpoint_kv_precision) == (weights, kv)
    table = KV_FP8_CHECKPOINTS if kv == "fp8" else KV_BF16_CHECKPOINTS
    assert hf_id.lower() in table and hf_id.lower() not in (
        KV_BF16_CHECKPOINTS if kv == "fp8" else KV_FP8_CHECKPOINTS
    )


def test_the_tables_hold_only_the_listed_ids() -> None:
    assert set(KV_FP8_CHECKPOINTS) | set(KV_BF16_CHECKPOINTS) == {i.lower() for i in LISTED}


@pytest.mark.parametrize(
    "hf_id",
    [
        "nvidia/DeepSeek-R1-FP4",  # not confirmed either way (README_serving r17kvids)
        "nvidia/DeepSeek-R1-0528-FP4-v2",
        "nvidia/DeepSeek-V3.1-NVFP4",
        "nvidia/Llama-3.3-70B-Instruct-FP8",
        "nvidia/Llama-3.1-8B-Instruct-FP4",
        "nvidia/Qwen3-235B-A22B-FP4",  # a sibling repository of a listed id
        "nvidia/Kimi-K2-Thinking-NVFP4",
    ],
)
def test_an_unconfirmed_id_keeps_bf16_kv(hf_id: str) -> None:
    assert resolve_model_id(hf_id) is not None  # a catalog model, priced at bf16 KV
    assert checkpoint_kv_format(hf_id) is None
    assert load_model(hf_id).checkpoint_kv_precision is None


def test_a_config_declares_its_kv_format() -> None:
    q = {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}
    assert config_kv_format({"quantization_config": q}) == "fp8"
    assert config_kv_format({"quantization_config": {**q, "kv_cache_quant_algo": None}}) is None
    assert config_kv_format({"quantization_config": {**q, "quant_method": "fp8"}}) is None
    assert config_kv_format({}) is None
    cfg = {**builtin_config("qwen3-32b"), "quantization_config": q}
    assert ModelSpec.from_hf_config(cfg, "q").checkpoint_kv_precision == "fp8"


def test_which_engine_versions_inherit_the_checkpoint_kv() -> None:
    assert engine_inherits_kv("trtllm", "1.3.0rc5") and engine_inherits_kv("trtllm", None)
    assert not engine_inherits_kv("vllm", "0.12.0") and not engine_inherits_kv("vllm", "0.13.0")
    assert engine_inherits_kv("vllm", "0.14.0") and engine_inherits_kv("vllm", "v0.34.0")
    assert not engine_inherits_kv("vllm", "")  # a row without backend_version
    assert not engine_inherits_kv("sglang", "0.5.6.post2")
    assert engine_inherits_kv("sglang", "0.5.9") and engine_inherits_kv("sglang", "0.5.23")
    assert not engine_inherits_kv("", "1.0") and not engine_inherits_kv("tgi", "3.0")
    # None: the modelled version estimate prices (serving.engines.VERSIONS), past each minimum
    for engine, version in VERSIONS.items():
        assert engine_inherits_kv(engine, None)
        assert engine == "trtllm" or engine_inherits_kv(engine, version)


def _ctx(model: ModelSpec, wl: Workload) -> EstimateContext:
    c = load_chip("b200")
    return EstimateContext(model, load_noc_profile("hgx-b200x8"), gpu_memory(c), wl, c)


def _decode_step(model: ModelSpec, wl: Workload) -> float:
    c = load_chip("b200")
    noc = first_devices(load_noc_profile("hgx-b200x8"), 4)
    return estimate_plan(
        EvaluatorInputs(model, noc, gpu_memory(c), wl, c), Plan(tp=4)
    ).metrics.decode_step_seconds


def test_trtllm_prices_the_declared_kv_at_one_byte_and_tpot_falls_at_long_context() -> None:
    nv, base = load_model(QWEN_NVFP4), load_model("Qwen/Qwen3-32B")
    trt = Workload(batch_size=64, input_seq_len=15000, output_seq_len=500, engine="trtllm")
    assert _ctx(nv, trt).precision.kv_read_bytes == 1.0
    assert _ctx(nv, trt).pricer.describe()["checkpoint_kv_precision"] == "fp8"
    assert _ctx(base, replace(trt, precision="fp4")).precision.kv_read_bytes == 2.0
    # no engine named, a KV format given, or the weights re-quantised: the shipped KV not used
    assert _ctx(nv, replace(trt, engine="")).precision.kv_read_bytes == 2.0
    assert _ctx(nv, replace(trt, kv_precision="bf16")).precision.kv_read_bytes == 2.0
    assert _ctx(nv, replace(trt, precision="fp8")).precision.kv_read_bytes == 2.0
    fp8_kv, bf16_kv = _decode_step(nv, trt), _decode_step(base, replace(trt, precision="fp4"))
    assert fp8_kv < 0.8 * bf16_kv  # the 15k-token KV read dominates a decode step
    short = replace(trt, input_seq_len=128, output_seq_len=16)
    assert _decode_step(nv, short) == pytest.approx(
        _decode_step(base, replace(short, precision="fp4")), rel=0.1
    )  # at short context the weights dominate: the KV format matters little


def _row(**over: str) -> ServingRow:
    row = {"backend": "trtllm", "backend_version": "1.3.0rc5", "model_path": QWEN_NVFP4,
           "system": "b200_sxm", "mode": "agg", "isl": "15000", "osl": "500", "tp_size": "4",
           "moe_tp_size": "1", "moe_ep_size": "1", "concurrency": "8", "batch_size": "8",
           "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}  # fmt: skip
    return ServingRow("aic_x", {**row, **over})


def test_validation_rows_take_the_checkpoint_kv_where_the_engine_inherits_it() -> None:
    assert resolve(_row()).kv_precision == "fp8"
    assert resolve(_row(model_path="Qwen/Qwen3-32B")).kv_precision is None
    assert resolve(_row(backend="vllm", backend_version="0.12.0")).kv_precision is None
    assert resolve(_row(backend="vllm", backend_version="0.14.0")).kv_precision == "fp8"
    assert resolve(_row(backend="sglang", backend_version="0.5.6.post2")).kv_precision is None
    # a kv_cache_dtype column: a format wins; "auto" is the engine's default (vLLM's explicit
    # auto kept bf16, issue #34752)
    assert resolve(_row(kv_cache_dtype="bf16")).kv_precision is None
    assert resolve(_row(kv_cache_dtype="auto")).kv_precision == "fp8"
    assert resolve(_row(kv_cache_dtype="")).kv_precision == "fp8"
    vllm = {"backend": "vllm", "backend_version": "0.14.0"}
    assert resolve(_row(kv_cache_dtype="auto", **vllm)).kv_precision is None
    assert resolve(_row(kv_cache_dtype="", **vllm)).kv_precision == "fp8"


def test_the_shipped_disaggregated_row_runs_an_fp8_kv_cache() -> None:
    (row,) = [r for r in read_rows(shipped_serving_csv()) if "qwen3_32b_nvfp4" in r.id
              and r.get("mode") == "disagg"]  # fmt: skip
    assert resolve(row).kv_precision == "fp8"
    other = ServingRow(row.id, {**row.fields, "model_path": "Qwen/Qwen3-32B"})
    assert resolve(other).kv_precision is None
