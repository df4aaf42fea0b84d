"""NVIDIA's NVFP4 DeepSeek-R1 checkpoints keep the MLA projections in bf16 (r13dsr1).

Model cards: nvidia/DeepSeek-R1-FP4 (= nvidia/DeepSeek-R1-NVFP4) leaves the attention layers
unquantised; the -v2 checkpoints quantise o_proj ("wo") as well. ``Workload.bf16_attention``
prices those GEMMs on a bf16 perf model and holds their weights at 2 bytes.
"""

from __future__ import annotations

import pytest
from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.evaluator import Evaluator
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.models import load_model
from plena_opt.models.checkpoint import nvfp4_attention
from plena_opt.validate.serving_rows import ServingRow, resolve


def test_checkpoint_ids_name_their_attention_layout() -> None:
    assert nvfp4_attention("nvidia/DeepSeek-R1-NVFP4") == "all"
    assert nvfp4_attention("nvidia/DeepSeek-R1-FP4") == "all"
    assert nvfp4_attention("nvidia/DeepSeek-R1-0528-FP4-V2") == "all_but_o"
    assert nvfp4_attention("nvidia/DeepSeek-R1-FP4-v2") == "all_but_o"
    assert nvfp4_attention("deepseek-ai/DeepSeek-R1") == ""
    assert nvfp4_attention("nvidia/Llama-3.1-8B-Instruct-FP4") == ""
    with pytest.raises(PlenaInputError, match="bf16_attention"):
        Workload(precision="fp4", bf16_attention="some")


def _ctx(model: str, kept: str) -> EstimateContext:
    c = load_chip("b200")
    wl = Workload(batch_size=8, precision="fp4", bf16_attention=kept)
    return EstimateContext(load_model(model), load_noc_profile("hgx-b200x8"), gpu_memory(c), wl, c)


def test_mla_projections_run_at_bf16_and_o_proj_follows_the_revision() -> None:
    none, every, but_o = (_ctx("deepseek-v3", k).pricer for k in ("", "all", "all_but_o"))
    assert none.attn_proj is none.dense and none.attn_out is none.dense
    assert every.attn_proj.precision == "bf16" and every.attn_proj.wb == 2.0
    assert every.attn_out is every.attn_proj
    assert but_o.attn_proj.precision == "bf16" and but_o.attn_out is but_o.dense
    assert but_o.dense.precision == "fp4"  # dense MLPs and shared experts stay NVFP4
    llama = _ctx("llama-3.1-70b", "all").pricer  # no MLA: the flag prices nothing apart
    assert llama.attn_proj is llama.dense


def test_bf16_projection_weights_are_held_at_two_bytes() -> None:
    """DeepSeek-V3 at TP 8 (16 heads a GPU): q 7168x1536 + 1536x16x192, kv 7168x576 +
    512x16x256, o 16x128x7168 elements a layer, 61 layers, each 2 - 0.5625 bytes dearer."""
    c = load_chip("b200")
    m = load_model("deepseek-v3")

    def weights(kept: str) -> float:
        wl = Workload(batch_size=8, precision="fp4", bf16_attention=kept)
        ev = Evaluator(m, load_noc_profile("hgx-b200x8"), gpu_memory(c), wl, c)
        return ev.evaluate(Plan(tp=8)).weight_bytes_per_device

    q = 7168 * 1536 + 1536 * 16 * 192
    kv = 7168 * 576 + 512 * 16 * 256
    o = 16 * 128 * 7168
    extra = 2.0 - 0.5625
    base = weights("")
    assert weights("all") - base == pytest.approx(61 * (q + kv + o) * extra, rel=1e-9)
    assert weights("all_but_o") - base == pytest.approx(61 * (q + kv) * extra, rel=1e-9)


def test_validation_rows_resolve_the_checkpoint_they_ran() -> None:
    row = {"backend": "trtllm", "model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
           "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "8", "moe_tp_size": "8",
           "moe_ep_size": "1", "concurrency": "8", "batch_size": "8", "precision": "fp4",
           "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}  # fmt: skip
    ix = "2026_03_25_deepseek_r1_b200_x"
    assert resolve(ServingRow(ix, row)).bf16_attention == "all_but_o"  # InferenceX: -FP4-V2
    assert resolve(ServingRow("aic_x", row)).bf16_attention == ""  # checkpoint not known
    named = {**row, "model_path": "nvidia/DeepSeek-R1-NVFP4"}
    assert resolve(ServingRow("aic_x", named)).bf16_attention == "all"
    fp8 = {**row, "precision": "fp8", "gemm_quant_mode": "fp8_block",
           "moe_quant_mode": "fp8_block"}  # fmt: skip
    assert resolve(ServingRow(ix, fp8)).bf16_attention == ""


def test_an_nvidia_nvfp4_id_carries_its_layout_into_estimate() -> None:
    """``estimate --model nvidia/DeepSeek-R1-NVFP4`` prices the checkpoint as shipped (bf16 MLA
    projections) while it runs fp4; a plan re-quantised to fp8 prices every GEMM at fp8."""
    m = load_model("nvidia/DeepSeek-R1-NVFP4")
    assert m.checkpoint_precision == "fp4" and m.checkpoint_bf16_attention == "all"
    assert load_model("nvidia/DeepSeek-R1-0528-FP4-v2").checkpoint_bf16_attention == "all_but_o"
    assert load_model("deepseek-r1").checkpoint_bf16_attention == ""
    c = load_chip("b200")
    ctx = EstimateContext(m, load_noc_profile("hgx-b200x8"), gpu_memory(c), Workload(), c)
    assert ctx.pricer.attn_proj.precision == "bf16" and ctx.pricer.bf16_attention == "all"
    fp8 = EstimateContext(m, load_noc_profile("hgx-b200x8"), gpu_memory(c),
                          Workload(precision="fp8"), c).pricer  # fmt: skip
    assert fp8.attn_proj is fp8.dense and fp8.bf16_attention == ""
