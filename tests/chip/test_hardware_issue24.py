"""Issue 24, hardware: weight-only 4-bit (W4A16) on Hopper, the checkpoint's precision, and the
Grace-Blackwell NVL72 racks (gb200/gb300 chips, 72-GPU NVLink domains, racks over InfiniBand)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from deepstack import load_noc_profile

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.chip.precision import W4A16_DEQUANT_SLOWDOWN
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan, Workload
from plena_opt.estimate.context import EstimateContext
from plena_opt.estimate.evaluator import Evaluator
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.models import load_model
from plena_opt.models.catalog import builtin_config
from plena_opt.models.checkpoint import checkpoint_precision
from plena_opt.validate.serving_rows import Refused, ServingRow, resolve

# -- W4A16 -----------------------------------------------------------------------------------


def test_w4a16_gemm_reads_4_bit_weights_and_computes_at_the_bf16_rate():
    h100 = load_chip("h100-sxm")
    p = GpuPerfModel(h100, "mxfp4", 4.25 / 8, 2.0, 2.0)
    assert p.weight_only and p.compute_format == "bf16"
    assert p.peak == pytest.approx(989e12 / W4A16_DEQUANT_SLOWDOWN)
    m, n, k = 8, 5120, 2880  # a decode step of 8 sequences through one 2880 x 5120 projection
    g = p.gemm(m, n, k)
    weights = n * k * 4.25 / 8  # MXFP4: 4-bit values + one e8m0 scale per 32 = 4.25 bits
    assert g.read_bytes == pytest.approx(weights + m * k * 2)  # bf16 activations in
    assert g.write_bytes == pytest.approx(m * n * 2)  # bf16 out
    c = h100.gemm_decode["bf16"] if "bf16" in h100.gemm_decode else h100.gemm["bf16"]
    tm = (g.read_bytes + g.write_bytes) / (3.35e12 * c.bandwidth_efficiency.value)
    tc = 2 * m * n * k / (989e12 / 1.10 * c.compute_efficiency.value)
    b = c.blend.value
    assert g.seconds == pytest.approx(c.fixed_seconds.value + (tc**b + tm**b) ** (1 / b))
    assert not g.compute_bound  # decode: the 4-bit weight stream dominates
    bf16 = GpuPerfModel(h100, "bf16", 2.0, 2.0, 2.0).gemm(m, n, k)
    assert bf16.read_bytes - g.read_bytes == pytest.approx(n * k * (2 - 4.25 / 8))
    assert g.seconds < 0.5 * bf16.seconds  # memory-bound: the smaller format is faster


def test_w4a16_decode_step_of_gpt_oss_on_h100_reads_the_4_bit_weights():
    c = load_chip("h100-sxm")
    noc = load_noc_profile("hgx-h100x8")
    wl = Workload(batch_size=8, input_seq_len=1024, output_seq_len=128)
    model = load_model("gpt-oss-120b")
    ctx = EstimateContext(model, noc, gpu_memory(c), wl, c)
    assert ctx.workload.precision == "mxfp4"  # the checkpoint's format, not bf16
    assert ctx.precision.weight_bytes == pytest.approx(4.25 / 8)
    assert ctx.precision.activation_bytes == 2.0
    d = ctx.pricer.describe()
    assert d["weight_only"] and d["compute_format"] == "bf16"
    assert d["checkpoint_precision"] == "mxfp4" and not d["quantised_from_checkpoint"]
    q = Evaluator(model, noc, gpu_memory(c), wl, c).evaluate(Plan(tp=8))
    b = Evaluator(model, noc, gpu_memory(c), Workload(**{**wl.__dict__, "precision": "bf16"}),
                  c).evaluate(Plan(tp=8))  # fmt: skip
    # memory-bound decode: 4-bit weights are faster than bf16
    assert q.decode_step_seconds < b.decode_step_seconds


def test_default_gpu_precision_of_a_bf16_checkpoint_stays_bf16():
    c = load_chip("h100-sxm")
    ctx = EstimateContext(load_model("llama-3.1-8b"), load_noc_profile("hgx-h100x8"),
                          gpu_memory(c), Workload(), c)  # fmt: skip
    assert ctx.pricer.perf.precision == "bf16" and not ctx.pricer.perf.weight_only


# -- the checkpoint's precision --------------------------------------------------------------


@pytest.mark.parametrize(
    "q, fmt",
    [
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),  # fmt: skip
        ({"quant_method": "awq", "bits": 4}, "int4"),
    ],
)
def test_checkpoint_precision_is_read_from_quantization_config(q, fmt):
    assert checkpoint_precision({"quantization_config": q})[0] == fmt


def test_unknown_quantization_is_refused_naming_the_field():
    with pytest.raises(PlenaInputError) as err:
        checkpoint_precision({"quantization_config": {"quant_method": "bitsandbytes"}})
    assert err.value.field == "quantization_config" and "bitsandbytes" in str(err.value)


def _fp4_config(tmp_path):
    cfg = builtin_config("llama-3.1-8b")
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_cli_refuses_a_checkpoint_format_the_chip_cannot_run(tmp_path, capsys):
    argv = ["estimate", "--model-path", str(_fp4_config(tmp_path)), "--chip", "h100-sxm",
            "--noc", "hgx-h100x8", "--tp", "8"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert "quantization_config" in err and "fp4" in err and "--precision" in err


def test_cli_estimate_says_whether_the_precision_is_the_checkpoints(capsys):
    base = ["estimate", "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--tp", "8"]  # fmt: skip
    assert main(base) == 0
    assert "the plan runs the checkpoint's format" in capsys.readouterr().out
    assert main([*base, "--precision", "fp8"]) == 0
    assert "fp8 is NOT the checkpoint's format" in capsys.readouterr().out


def _search(capsys, *flags: str) -> str:
    argv = ["search", "--model", "llama-3.1-8b", "--chip", "b200", "--noc", "hgx-b200x8",
            "--trials", "8", "--storage", ":memory:", *flags]  # fmt: skip
    assert main(argv) == 0
    return capsys.readouterr().out


def test_a_search_of_a_bf16_checkpoint_never_picks_fp4_silently(capsys):
    plain = _search(capsys)  # no format asked for: the checkpoint's bf16, and nothing else
    assert "precision: bf16 (checkpoint bf16" in plain and "not the checkpoint's" not in plain
    assert " fp4 " not in plain
    out = _search(capsys, "--precisions", "bf16,fp4")
    assert "precision fp4 is not the checkpoint's: llama-3.1-8b ships bf16" in out
    assert "precision bf16 is not" not in out


# -- Grace-Blackwell NVL72 -------------------------------------------------------------------


def test_gb200_nvl72_is_one_72_gpu_nvlink_domain_and_racks_join_over_infiniband():
    rack = load_noc_profile("gb200-nvl72")
    l3, l2, l1 = rack.levels
    assert rack.num_devices == 72 and l1.size == 72 and l2.size == 1
    assert rack.nic_bandwidth_bps == pytest.approx(400e9 / 8 * 0.9)  # ConnectX-7, assumed 0.9
    two = load_noc_profile("gb200-nvl72@2")
    assert two.num_devices == 144 and two.levels[1].size == 2 and two.levels[2].size == 72
    assert two.levels[1].link_bandwidth_bps == pytest.approx(72 * 45e9)  # rack uplink: 72 NICs
    gb300 = load_noc_profile("gb300-nvl72@2")
    assert gb300.nic_bandwidth_bps == pytest.approx(800e9 / 8 * 0.9)  # ConnectX-8
    assert "811 GB/s" in rack.provenance["measured_tables"]  # the published NVL72 check


def test_gb200_is_not_priced_as_b200():
    gb, b = load_chip("gb200"), load_chip("b200")
    assert gb.peak_flops["bf16"].value == 2.5e15 > b.peak_flops["bf16"].value
    assert gb.peak_flops["fp4"].value == 10e15 and gb.power.busy_watts.value == 1200
    assert gb.hbm.capacity_bytes.value == 186e9 != b.hbm.capacity_bytes.value
    gb3 = load_chip("gb300")
    assert gb3.peak_flops["fp4"].value == 15e15 and gb3.power.busy_watts.value == 1400
    for chip in (gb, gb3):
        for v in (chip.peak_flops["bf16"], chip.hbm.capacity_bytes, chip.power.busy_watts):
            assert "http" in v.source and "2026" in v.source  # cited, with the date read
        assert chip.gemm["bf16"].compute_efficiency.source.startswith("no public kernel table")


def test_144_gb200_gpus_across_two_racks_price(capsys):
    argv = ["estimate", "--model", "llama-3.1-70b", "--chip", "gb200", "--noc", "gb200-nvl72@2",
            "--tp", "8", "--dp", "18", "--batch-size", "144", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    text = json.dumps(doc)
    assert "gb200-nvl72@2" in text and '"name": "gb200"' in text
    c = load_chip("gb200")
    one = Evaluator(load_model("llama-3.1-70b"), load_noc_profile("gb200-nvl72"), gpu_memory(c),
                    Workload(batch_size=72), c).evaluate(Plan(tp=8, dp=9))  # fmt: skip
    assert np.isfinite(one.decode_step_seconds) and one.decode_step_seconds > 0


def test_validate_rows_name_gb200_and_gb300_systems():
    row = {"backend": "trtllm", "model_path": "meta-llama/Llama-3.1-70B", "system": "gb200",
           "mode": "agg", "isl": "1024", "osl": "256", "tp_size": "8", "concurrency": "8",
           "batch_size": "8", "gemm_quant_mode": "nvfp4"}  # fmt: skip
    d = resolve(ServingRow("x", row))
    assert (d.chip, d.noc, d.gpus, d.precision) == ("gb200", "gb200-nvl72", 8, "fp4")
    d3 = resolve(ServingRow("x", {**row, "system": "gb300", "tp_size": "144",
                                  "batch_size": "8"}))  # fmt: skip
    assert (d3.chip, d3.noc, d3.gpus) == ("gb300", "gb300-nvl72@2", 144)
    with pytest.raises(Refused, match="whole number of 72-GPU"):
        resolve(ServingRow("x", {**row, "tp_size": "80"}))


def test_h100_gpt_oss_nvfp4_rows_price_as_the_checkpoints_mxfp4_weight_only():
    row = {"backend": "vllm", "model_path": "openai/gpt-oss-120b", "system": "h100_sxm",
           "mode": "agg", "isl": "1024", "osl": "1024", "tp_size": "4", "moe_tp_size": "4",
           "moe_ep_size": "1", "concurrency": "8", "batch_size": "8",
           "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}  # fmt: skip
    assert resolve(ServingRow("x", row)).precision == "mxfp4"
    llama = {**row, "model_path": "meta-llama/Llama-3.1-70B", "moe_quant_mode": ""}
    with pytest.raises(Refused, match="on h100-sxm: the chip has no fp4 tensor cores.*ships bf16"):
        resolve(ServingRow("x", llama))


def test_an_experts_only_checkpoint_keeps_attention_and_lm_head_in_bf16():
    """gpt-oss's MXFP4 checkpoint quantises only the experts (``modules_to_not_convert``:
    self_attn, router, embeddings, lm_head): those GEMMs read bf16 weights."""
    model = load_model("gpt-oss-120b")
    assert model.checkpoint_experts_only
    c = load_chip("h100-sxm")
    ctx = EstimateContext(model, load_noc_profile("hgx-h100x8"), gpu_memory(c), Workload(), c)
    g = ctx.pricer
    assert g.perf.wb == pytest.approx(4.25 / 8) and g.dense.wb == 2.0
    assert g.dense.precision == "bf16" and not g.dense.weight_only
    # a re-quantised plan (fp8 for all weights) prices every GEMM at its own format
    fp8 = EstimateContext(model, load_noc_profile("hgx-h100x8"), gpu_memory(c),
                          Workload(precision="fp8"), c).pricer  # fmt: skip
    assert fp8.dense is fp8.perf
    assert not load_model("llama-3.1-8b").checkpoint_experts_only


def test_gpt_oss_120b_weights_on_h100_are_the_checkpoints_size():
    """8 x the per-device weights of TP 8 = the MXFP4 checkpoint, 60.8 GiB (OpenAI gpt-oss model
    card, as quoted at https://fitmygpu.com/models/gpt-oss-120b, read 2026-12-06): experts at 4.25
    bits, attention, embeddings and LM head at bf16."""
    c = load_chip("h100-sxm")
    ev = Evaluator(load_model("gpt-oss-120b"), load_noc_profile("hgx-h100x8"), gpu_memory(c),
                   Workload(batch_size=8), c)  # fmt: skip
    total = 8 * ev.evaluate(Plan(tp=8)).weight_bytes_per_device / 2**30
    assert total == pytest.approx(60.8, rel=0.02)


def test_kimi_k2_int4_checkpoint_prices_weight_only_on_hopper(tmp_path, capsys):
    """A Kimi-K2 config with the compressed-tensors INT4 quantization of Kimi-K2-Thinking (routed
    experts only; attention and shared experts ignored) prices on 8 x H200 as W4A16."""
    cfg = builtin_config("kimi-k2")
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    argv = ["estimate", "--model-path", str(path), "--chip", "h200-sxm", "--noc", "hgx-h200x8",
            "--tp", "8", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    chip = doc["chip"]
    assert chip["precision"] == "int4" and chip["weight_only"] and chip["compute_format"] == "bf16"
    assert chip["checkpoint_precision"] == "int4" and not chip["quantised_from_checkpoint"]


def test_wide_ep_inside_one_nvl72_rack_dispatches_faster_than_over_infiniband():
    """DeepSeek-V3 EP 64 on one chip kind: inside the NVLink domain of one rack the token
    dispatch and combine cost less than across eight 8-GPU nodes joined by InfiniBand."""
    from deepstack.gpu_nodes import first_devices

    c = load_chip("gb200")
    wl = Workload(batch_size=512, input_seq_len=1024, output_seq_len=64, precision="fp8")
    model = load_model("deepseek-v3")
    rack = first_devices(load_noc_profile("gb200-nvl72"), 64)
    nodes = load_noc_profile("hgx-b200x8@8")
    plan = Plan(tp=1, ep=64)
    a = Evaluator(model, rack, gpu_memory(c), wl, c).evaluate(plan).attribution
    b = Evaluator(model, nodes, gpu_memory(c), wl, c).evaluate(plan).attribution
    assert a["ep_dispatch"] < 0.6 * b["ep_dispatch"] and a["ep_combine"] < 0.6 * b["ep_combine"]


def test_w4a16_moe_curves_are_the_fit_of_the_measured_h200_kernels():
    """The H200 (and, borrowed, H100) ``moe.mxfp4`` / ``moe.int4`` curves are the fit of vLLM's
    measured W4A16 expert kernels (gpt-oss-120b's and Kimi-K2's layers); a weight-only plan
    prices its experts on them, a bf16 plan on the bf16 curve."""
    from plena_opt.validate.calibrate_w4a16 import hopper_w4a16_fits
    from tests.conftest import require_shared

    kernels = require_shared() / "data" / "kernels"
    mo, mp = hopper_w4a16_fits(kernels, "h200_sxm", {"h200_sxm": (989e12, 4.8e12)})
    assert mo["mxfp4"].mape < 0.06 and mo["mxfp4"].rows >= 100  # gpt-oss layer: 4.8 %
    assert mo["int4"].mape < 0.25 and mp["int4"].mape < 0.10
    for chip in ("h200-sxm", "h100-sxm"):
        c = load_chip(chip)
        for fmt in ("mxfp4", "int4"):
            got = c.moe[fmt].model_dump()
            assert {k: v["value"] for k, v in got.items() if v} == mo[fmt].values
            assert "calibrate_w4a16" in c.moe[fmt].compute_efficiency.source
    h100 = load_chip("h100-sxm")
    w4 = GpuPerfModel(h100, "mxfp4", 4.25 / 8, 2.0, 2.0).fused_moe(8, 32, 32, 2880, 2880)
    bf = GpuPerfModel(h100, "bf16", 2.0, 2.0, 2.0).fused_moe(8, 32, 32, 2880, 2880)
    cm = h100.moe["mxfp4"]
    tm = w4.read_bytes + w4.write_bytes
    tm /= 3.35e12 * cm.bandwidth_efficiency.value
    tc = w4.flops / (989e12 / W4A16_DEQUANT_SLOWDOWN * cm.compute_efficiency.value)
    b = cm.blend.value
    want = cm.fixed_seconds.value + (tc**b + tm**b) ** (1 / b)
    assert w4.seconds == pytest.approx(want + 32 * cm.seconds_per_active_expert.value)
    assert w4.read_bytes < 0.3 * bf.read_bytes  # 4.25-bit expert weights
