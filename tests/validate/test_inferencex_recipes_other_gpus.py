"""InferenceX rows (ids with a dump date) of the GPUs and models the shipped file lacks resolve to
what their launch recipes set (``validate.serving_kv.INFERENCEX_BF16_KV``,
``validate.serving_recipes``; README_serving r17ixrec cites each recipe file and commit)."""

from __future__ import annotations

import pytest

from plena_opt.validate.serving_rows import Deployment, ServingRow, resolve

BASE = {"mode": "agg", "isl": "1024", "osl": "1024", "pp_size": "1", "concurrency": "32"}
OSS = {**BASE, "model_path": "openai/gpt-oss-120b", "precision": "fp4", "tp_size": "2",
       "moe_tp_size": "2", "moe_ep_size": "1", "gemm_quant_mode": "nvfp4",
       "moe_quant_mode": "nvfp4"}  # fmt: skip
R1 = {**BASE, "model_path": "deepseek-ai/DeepSeek-R1-0528", "precision": "fp8", "tp_size": "8",
      "moe_tp_size": "1", "moe_ep_size": "8", "gemm_quant_mode": "fp8_block",
      "moe_quant_mode": "fp8_block"}  # fmt: skip
R1_DP = {**R1, "tp_size": "1", "attention_dp_size": "8"}
LLAMA = {**BASE, "model_path": "meta-llama/Llama-3.1-70B", "precision": "fp8", "tp_size": "4"}
QWEN35 = {**BASE, "model_path": "Qwen/Qwen3.5-397B-A17B", "precision": "bf16", "tp_size": "8",
          "moe_tp_size": "1", "moe_ep_size": "8"}  # fmt: skip
KIMI = {**BASE, "model_path": "moonshotai/Kimi-K2.5", "precision": "int4", "tp_size": "8",
        "moe_tp_size": "8", "moe_ep_size": "1"}  # fmt: skip
MINIMAX = {**BASE, "model_path": "MiniMaxAI/MiniMax-M2.5", "precision": "fp8", "tp_size": "4",
           "moe_tp_size": "4", "moe_ep_size": "1"}  # fmt: skip


def _ix(fields: dict, system: str, engine: str, day: str, rid: str = "2026_04_06_x") -> Deployment:
    return resolve(ServingRow(rid, {**fields, "system": system, "backend": engine,
                                    "measured_on": day}))  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "system", "engine", "day", "kv"),
    [  # gptoss_fp4_h200.sh / gptoss_fp4_h200_trt.sh (dtype auto) / gptoss_fp4_mi3x.sh: none
     (OSS, "h200_sxm", "vllm", "2026-03-27", None),
     (OSS, "h200_sxm", "trtllm", "2026-01-14", None),
     (OSS, "mi300x", "vllm", "2026-01-14", None),
     (OSS, "mi325x", "vllm", "2026-03-09", None),
     (OSS, "b200_sxm", "vllm", "2026-02-25", "fp8"),  # gptoss_fp4_b200.sh: fp8 (unchanged)
     # dsr1_fp8_h200.sh (SGLang) passes none; dsr1_fp8_h200_trt.sh dtype fp8
     (R1, "h200_sxm", "sglang", "2026-03-25", None),
     (R1_DP, "h200_sxm", "trtllm", "2026-01-24", "fp8"),
     # dsr1_fp8_mi3x.sh: fp8_e4m3 only from 2026-01-23
     (R1, "mi325x", "sglang", "2026-01-22", None),
     (R1, "mi325x", "sglang", "2026-01-23", "fp8"),
     (R1, "mi300x", "sglang", "2025-11-20", None),
     # 70b_fp8_h200_slurm.sh fp8 from 2025-09-15; 70b_fp8_mi3x: fp8
     (LLAMA, "h200_sxm", "vllm", "2025-09-12", None),
     (LLAMA, "h200_sxm", "vllm", "2025-10-29", "fp8"),
     (LLAMA, "mi325x", "vllm", "2025-10-29", "fp8"),
     # the newer models: qwen3.5 bf16 on B200 none, fp8 B200 fp8_e4m3; Kimi none; MiniMax B200
     # fp8 from 2026-04-03, H200 none
     (QWEN35, "b200_sxm", "sglang", "2026-03-27", None),
     ({**QWEN35, "model_path": "Qwen/Qwen3.5-397B-A17B-FP8", "precision": "fp8"}, "b200_sxm",
      "sglang", "2026-03-27", "fp8"),
     (QWEN35, "mi325x", "sglang", "2026-03-28", None),
     (KIMI, "h200_sxm", "vllm", "2026-03-27", None),
     (MINIMAX, "b200_sxm", "vllm", "2026-03-27", None),
     (MINIMAX, "b200_sxm", "vllm", "2026-04-03", "fp8"),
     (MINIMAX, "h200_sxm", "vllm", "2026-04-03", None)],
)  # fmt: skip
def test_the_kv_format_is_the_recipes(fields: dict, system: str, engine: str, day: str,
                                      kv: str | None) -> None:  # fmt: skip
    assert _ix(fields, system, engine, day).kv_precision == kv


def test_only_inferencex_rows_take_a_recipe_format() -> None:
    row = {**R1, "system": "mi325x", "backend": "sglang", "measured_on": "2026-03-01"}
    assert resolve(ServingRow("2026_04_06_x", row)).kv_precision == "fp8"
    assert resolve(ServingRow("grid_row", row)).kv_precision is None  # the engine default


def test_h200_trtllm_recipes_set_budget_fraction_and_balance() -> None:
    # dsr1_fp8_h200_trt.sh: (CONC + ISL + 127) // 64 * 64, at least 8192 from 2026-01-21;
    # kv fraction 0.75 (sizes recorded from 2025-11-03); balance (60, 0) with attention DP
    early = _ix(R1_DP, "h200_sxm", "trtllm", "2026-01-14")
    late = _ix(R1_DP, "h200_sxm", "trtllm", "2026-01-24")
    assert early.max_num_tokens == (32 + 1024 + 127) // 64 * 64 == 1152
    assert late.max_num_tokens == 8192
    assert late.trt_kv_fraction == 0.75 and late.adp_balance == (60, 0)
    assert _ix(R1_DP, "h200_sxm", "trtllm", "2025-10-01").trt_kv_fraction is False  # not known
    assert _ix(R1, "h200_sxm", "trtllm", "2026-01-24").adp_balance is None  # no attention DP
    # gptoss_fp4_h200_trt.sh: 20000 tokens, 0.85, no balancing block
    oss = _ix({**OSS, "tp_size": "1", "attention_dp_size": "2", "moe_tp_size": "1",
               "moe_ep_size": "2"}, "h200_sxm", "trtllm", "2026-01-14")  # fmt: skip
    assert (oss.max_num_tokens, oss.trt_kv_fraction, oss.adp_balance) == (20000, 0.85, None)
    # 70b_fp8_h200_trt_slurm.sh: 16384 tokens, the default fraction, batch wait at TP < 8
    llama = _ix(LLAMA, "h200_sxm", "trtllm", "2025-10-29")
    assert (llama.max_num_tokens, llama.trt_kv_fraction) == (16384, None)
    assert llama.batch_wait == (20, 0.9)


def test_no_recipe_settings_where_none_is_read() -> None:
    for system in ("b300_sxm", "gb200", "gb300"):  # no aggregated InferenceX recipe to 2026-04
        d = _ix(OSS, system, "trtllm", "2026-03-01")
        assert (d.max_num_tokens, d.trt_kv_fraction, d.adp_balance) == (None, False, None)


@pytest.mark.parametrize(
    ("fields", "system", "day", "conc", "interval"),
    [(QWEN35, "b200_sxm", "2026-02-19", 32, 1),  # qwen3.5_bf16_b200.sh before 9dc87a68c
     (QWEN35, "b200_sxm", "2026-03-27", 8, 10),
     (QWEN35, "b200_sxm", "2026-03-27", 32, 30),
     (QWEN35, "mi325x", "2026-03-28", 32, 1),  # qwen3.5_bf16_mi325x.sh: none
     (R1, "h200_sxm", "2026-03-25", 32, 1)],  # dsr1_fp8_h200.sh: none
)  # fmt: skip
def test_sglang_receive_interval_is_the_recipes(fields: dict, system: str, day: str, conc: int,
                                                interval: int) -> None:  # fmt: skip
    d = _ix({**fields, "concurrency": str(conc)}, system, "sglang", day)
    assert d.recv_interval == interval


@pytest.mark.parametrize(
    ("system", "day", "marlin"),
    [("h200_sxm", "2025-12-05", False),  # VLLM_MXFP4_USE_MARLIN from 4e52ed4c6 (2026-01-02)
     ("h200_sxm", "2026-01-02", True),
     ("h100_sxm", "2025-12-08", False),
     ("h100_sxm", "2026-03-27", True),
     ("mi325x", "2026-03-27", False)],  # a CUDA kernel; the ROCm recipes run AITER
)  # fmt: skip
def test_marlin_moe_from_the_recipes_date(system: str, day: str, marlin: bool) -> None:
    assert _ix(OSS, system, "vllm", day).marlin_moe is marlin


def test_an_undated_row_is_dated_by_its_dump() -> None:
    row = {**OSS, "system": "h200_sxm", "backend": "vllm"}
    assert not resolve(ServingRow("2025_12_20_x", row)).marlin_moe
    assert resolve(ServingRow("2026_04_06_x", row)).marlin_moe
