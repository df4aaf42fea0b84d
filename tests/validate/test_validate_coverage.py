"""Rows on GPUs and models outside the calibration file: resolved, priced sanely, or refused by
name (systems, aliases, AMD, checkpoints, disaggregated MoE pools, the synthetic coverage file)."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from plena_opt.models.catalog import resolve_model_id
from plena_opt.validate.serving_rows import Refused, ServingRow, resolve
from plena_opt.validate.serving_score import _price_row, score_serving

DATA = Path(__file__).parent / "data"
COVERAGE = DATA / "coverage_rows.csv"
LLAMA_FP8 = {"backend": "vllm", "model_path": "nvidia/Llama-3.3-70B-Instruct-FP8",
             "system": "h100_sxm", "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "8",
             "pp_size": "1", "batch_size": "4", "concurrency": "4", "gemm_quant_mode": "fp8",
             "measured_on": "2026-01-01"}  # fmt: skip
OSS = {**LLAMA_FP8, "model_path": "openai/gpt-oss-120b", "gemm_quant_mode": "nvfp4",
       "moe_quant_mode": "nvfp4", "tp_size": "4", "moe_tp_size": "4",
       "moe_ep_size": "1"}  # fmt: skip
R1 = {**LLAMA_FP8, "backend": "sglang", "model_path": "deepseek-ai/DeepSeek-R1-0528",
      "moe_quant_mode": "fp8_block", "moe_tp_size": "1", "moe_ep_size": "8"}  # fmt: skip


def tpot(**fields: str) -> float:
    """Predicted TPOT (ms) of one predict-only row; fails the test if the row is refused."""
    r = _price_row(ServingRow("x", {**LLAMA_FP8, **fields}), {}, {})
    assert r.status == "priced", r.reason
    return r.tpot_ms  # type: ignore[return-value]


def test_system_aliases_are_the_same_system():
    for alias, name in (("gb200_sxm", "gb200"), ("gb300_sxm", "gb300"), ("mi325x_sxm", "mi325x")):
        a = resolve(ServingRow("a", {**LLAMA_FP8, "system": alias}))
        b = resolve(ServingRow("b", {**LLAMA_FP8, "system": name}))
        assert a == b
    with pytest.raises(Refused, match="system 'b200' is not modelled"):
        resolve(ServingRow("x", {**LLAMA_FP8, "system": "b200"}))


def test_mi325x_node_prices_vllm_and_sglang_and_refuses_trtllm_by_name():
    d = resolve(ServingRow("x", {**LLAMA_FP8, "system": "mi325x"}))
    assert (d.chip, d.noc, d.gpus, d.precision) == ("mi325x", "mi325x-x8", 8, "fp8")
    assert tpot(system="mi325x", backend="sglang") > 0
    two = resolve(ServingRow("x", {**R1, "system": "mi325x", "tp_size": "16", "moe_ep_size": "16",
                                   "batch_size": "4"}))  # fmt: skip
    assert two.noc == "mi325x-x8@2"
    with pytest.raises(Refused, match="backend 'trtllm' on system 'mi325x'.*NVIDIA GPUs only"):
        resolve(ServingRow("x", {**LLAMA_FP8, "system": "mi325x", "backend": "trtllm"}))


@pytest.mark.parametrize(
    "hf_id, name, fmt",
    [
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", "fp8"),
        ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek-r1", "fp4"),
        ("nvidia/DeepSeek-V3-0324-FP4", "deepseek-v3", "fp4"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-v3.1", "fp8"),
        ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2", "fp8"),
        ("moonshotai/Kimi-K2-Thinking", "kimi-k2", "int4"),
        ("nvidia/Kimi-K2-Thinking-NVFP4", "kimi-k2", "fp4"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b", "fp8"),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-30b-a3b", "bf16"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b", "bf16"),
        ("amd/Llama-3.3-70B-Instruct-FP8-KV", "llama-3.3-70b", "fp8"),
        ("MiniMaxAI/MiniMax-M2.1", "minimax-m2", "fp8"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "qwen3-next-80b-a3b", "fp8"),
        ("amd/DeepSeek-R1-0528-MXFP4-Preview", "deepseek-r1", "mxfp4"),
        # the published config, not the entry of estimated fields sharing its id
        ("meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b", "bf16"),
    ],
)
def test_checkpoint_variants_resolve_through_the_catalog(hf_id, name, fmt):
    found = resolve_model_id(hf_id)
    assert found is not None and (found.name, found.checkpoint_precision) == (name, fmt)


def test_unknown_revisions_are_not_guessed():
    assert resolve_model_id("deepseek-ai/DeepSeek-R1-v2") is None  # "-v2" only after a format
    assert resolve_model_id("zai-org/GLM-4.6-FP8") is None


def test_formats_on_each_chip():
    # gpt-oss's own layout (bf16 attention, MXFP4 experts): W4A16 MXFP4 on Hopper / AMD
    layout = {**OSS, "gemm_quant_mode": "", "moe_quant_mode": "w4a16_mxfp4"}
    for system in ("h200_sxm", "mi325x"):
        assert resolve(ServingRow("x", {**layout, "system": system})).precision == "mxfp4"
    with pytest.raises(Refused, match="w4a16_mxfp4 on b200"):
        resolve(ServingRow("x", {**layout, "system": "b200_sxm"}))
    # Kimi-K2.5's INT4 checkpoint quantises only its experts: bf16 GEMMs + int4 experts is it
    k25 = {**R1, "system": "h200_sxm", "model_path": "moonshotai/Kimi-K2.5",
           "gemm_quant_mode": "", "moe_quant_mode": "int4_wo"}  # fmt: skip
    assert resolve(ServingRow("x", k25)).precision == "int4"
    with pytest.raises(Refused, match="GEMM and MoE formats differ"):  # Kimi-K2's is FP8
        resolve(ServingRow("x", {**k25, "model_path": "moonshotai/Kimi-K2-Instruct"}))
    # an NVFP4 checkpoint on a GPU without FP4 tensor cores: refused naming the field
    fp4 = {
        **LLAMA_FP8,
        "model_path": "nvidia/Llama-3.3-70B-Instruct-FP4",
        "gemm_quant_mode": "nvfp4",
    }
    with pytest.raises(Refused, match="gemm_quant_mode 'nvfp4' .*h200-sxm.*ships fp4"):
        resolve(ServingRow("x", {**fp4, "system": "h200_sxm"}))
    assert resolve(ServingRow("x", {**fp4, "system": "b300_sxm"})).precision == "fp4"
    assert resolve(ServingRow("x", {**LLAMA_FP8, "gemm_quant_mode": "float16"})).precision == "bf16"
    with pytest.raises(Refused, match="moe_quant_mode 'w4afp8' is not modelled"):
        resolve(ServingRow("x", {**R1, "moe_quant_mode": "w4afp8"}))


def test_disaggregated_moe_pools_resolve_to_per_worker_plans():
    row = {**R1, "system": "gb200", "mode": "disagg", "tp_size": "", "batch_size": "",
           "concurrency": "256"}  # fmt: skip
    for role, (w, tp, dp, mtp, mep) in (
        ("prefill", (3, 1, 8, 1, 8)),
        ("decode", (1, 1, 32, 1, 32)),
    ):
        row.update({f"{role}_num_workers": str(w), f"{role}_tp_size": str(tp),
                    f"{role}_attention_dp_size": str(dp), f"{role}_moe_tp_size": str(mtp),
                    f"{role}_moe_ep_size": str(mep)})  # fmt: skip
    d = resolve(ServingRow("x", row))
    assert d.pools == (3, 8, 1, 32) and d.noc == "gb200-nvl72" and d.gpus == 56
    assert d.pool_plans == ((1, 8, "keep", 0, 0), (1, 32, "keep", 0, 0))  # TP 1: keep = replace
    r = _price_row(ServingRow("x", row), {}, {})
    assert r.status == "priced" and 0 < r.tpot_ms < 1e3 and r.ttft_ms > 0  # type: ignore[operator]
    # 3 x 8 + 64 = 88 GPUs: the pools fill one rack and part of a second
    wide = {**row, "decode_attention_dp_size": "64", "decode_moe_ep_size": "64"}
    assert resolve(ServingRow("x", wide)).noc == "gb200-nvl72@2"
    assert _price_row(ServingRow("x", wide), {}, {}).status == "priced"
    # DEP48 decode (LMSYS's GB200 layout): 256 experts + 32 EPLB replicas, 6 per rank
    dep48 = {**row, "decode_attention_dp_size": "48", "decode_moe_ep_size": "48"}
    assert resolve(ServingRow("x", dep48)).pool_plans[1] == (1, 48, "keep", 0, 32)  # type: ignore[index]
    assert _price_row(ServingRow("x", dep48), {}, {}).status == "priced"
    bad = {**row, "decode_moe_ep_size": "16"}
    with pytest.raises(Refused, match="size fields disagree: decode_moe 1x16"):
        resolve(ServingRow("x", bad))


def test_an_ep_size_that_does_not_divide_the_experts_runs_the_fewest_eplb_replicas():
    dep = {**R1, "system": "gb200", "tp_size": "1", "attention_dp_size": "72",
           "moe_ep_size": "72", "batch_size": "2", "concurrency": "144"}  # fmt: skip
    d = resolve(ServingRow("x", dep))
    assert (d.eplb_redundant, d.gpus) == (32, 72)  # 288 slots, 4 per rank (TRT-LLM's layout)
    assert resolve(ServingRow("x", {**dep, "attention_dp_size": "64", "moe_ep_size": "64",
                                    "concurrency": "128"})).eplb_redundant == 0  # fmt: skip
    assert _price_row(ServingRow("x", dep), {}, {}).status == "priced"
    mixtral = {**dep, "model_path": "mistralai/Mixtral-8x7B-Instruct-v0.1", "moe_quant_mode": "",
               "gemm_quant_mode": "", "attention_dp_size": "16", "moe_ep_size": "16",
               "concurrency": "32"}  # fmt: skip
    with pytest.raises(Refused, match="moe_ep_size 16 is more than the model's 8 experts"):
        resolve(ServingRow("x", mixtral))


def test_pipeline_stages_of_an_aggregated_worker_are_priced():
    row = {**LLAMA_FP8, "system": "h200_sxm", "tp_size": "4", "pp_size": "2", "batch_size": "16",
           "concurrency": "16"}  # fmt: skip
    d = resolve(ServingRow("x_tp4_epnone_1", row))
    assert (d.tp, d.pp, d.gpus) == (4, 2, 8)
    assert resolve(ServingRow("x_tp8_epnone_1", row)).gpus == 8  # an id may count the stages
    with pytest.raises(Refused, match="id tp2"):
        resolve(ServingRow("x_tp2_epnone_1", row))
    # each token rides both stages (serving.pipeline): TP8 on the same 8 GPUs is faster per token
    assert tpot(**{**row, "tp_size": "8", "pp_size": "1"}) < tpot(**row)
    disagg = {**row, "mode": "disagg", "prefill_num_workers": "1", "prefill_tp_size": "4",
              "prefill_pp_size": "2", "decode_num_workers": "1", "decode_tp_size": "4"}  # fmt: skip
    with pytest.raises(Refused, match="prefill_pp_size 2: pipeline-parallel workers"):
        resolve(ServingRow("x", disagg))


def test_a_newer_part_is_not_slower_at_memory_bound_decode():
    for row in (LLAMA_FP8, OSS):
        t = {s: tpot(**{**row, "system": s}) for s in
             ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300")}  # fmt: skip
        assert t["b300_sxm"] <= t["b200_sxm"] <= t["h200_sxm"] <= t["h100_sxm"], t
        assert t["gb300"] <= t["gb200"]
        # GB200 and B200 carry the same Blackwell GPU (8 TB/s HBM3E, NVLink 5): same TPOT
        assert t["gb200"] == pytest.approx(t["b200_sxm"], rel=0.02)


def test_a_smaller_format_is_not_slower_at_memory_bound_decode():
    bf16 = {"model_path": "meta-llama/Llama-3.3-70B-Instruct", "gemm_quant_mode": ""}
    fp4 = {"model_path": "nvidia/Llama-3.3-70B-Instruct-FP4", "gemm_quant_mode": "nvfp4"}
    for system in ("h200_sxm", "b200_sxm", "gb300", "mi325x"):
        assert tpot(system=system) <= tpot(system=system, **bf16)
    for system in ("b200_sxm", "b300_sxm", "gb200"):
        assert tpot(system=system, **fp4) <= tpot(system=system)
    r1_fp4 = {**R1, "model_path": "nvidia/DeepSeek-R1-0528-FP4", "gemm_quant_mode": "nvfp4",
              "moe_quant_mode": "nvfp4"}  # fmt: skip
    assert tpot(**{**r1_fp4, "system": "b200_sxm"}) <= tpot(**{**R1, "system": "b200_sxm"})


def test_coverage_file_is_what_its_script_writes():
    spec = importlib.util.spec_from_file_location(
        "make_coverage_rows", DATA / "make_coverage_rows.py"
    )
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    with open(COVERAGE, newline="") as fh:
        assert list(csv.DictReader(fh)) == mod.rows()


def test_coverage_file_is_priced_or_refused_about_the_row():
    """The synthetic rows (every system and alias, MI325X, the catalog's models and checkpoints,
    three engines, agg and disaggregated with wide EP): each deployable row priced with a sane
    TPOT / TTFT; each row no engine can run (``expect_refused_…``) refused naming why."""
    report = score_serving(COVERAGE)
    runnable = [r for r in report.rows if not r.id.startswith("expect_refused")]
    priced = [r for r in runnable if r.status == "priced"]
    assert len(report.rows) >= 300 and len(priced) / len(runnable) >= 0.95
    assert len(priced) / len(report.rows) >= 0.95  # the whole file, deliberate refusals too
    assert sum(r.id.startswith("cov_") and "_agg_" in r.id for r in priced) >= 250
    assert {r.system for r in priced} >= {"h200_sxm", "b300_sxm", "gb200", "gb300", "mi325x",
                                          "gb200_sxm", "mi325x_sxm"}  # fmt: skip
    assert sum(r.mode == "disagg" for r in priced) >= 50
    # TTFT has no fixed ceiling: where the KV pool admits fewer requests than the concurrency the
    # rest queue (serving.kv_admission; the shipped file measures such TTFTs up to 462 s, and
    # Kimi-K2 on 16×H100 at C = 512, 1k/8k, holds ~70 of them: about an hour's queue)
    for r in priced:
        assert 0.5 < r.tpot_ms < 1000 and 1 < r.ttft_ms < r.e2e_ms, r  # type: ignore[operator]
    about_the_row = ("runs on NVIDIA GPUs only", "has no fp4 tensor cores")
    for r in report.rows:
        if r.status == "refused":
            assert r.id.startswith("expect_refused"), (r.id, r.reason)
            assert any(s in r.reason for s in about_the_row), r.reason
    assert sum(r.status == "refused" for r in report.rows) == len(report.rows) - len(runnable)
