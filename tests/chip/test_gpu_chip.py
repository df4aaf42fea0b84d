"""GPU chip kind: sourced profiles, precision rules, the kernel model and the estimate hook."""

from __future__ import annotations

import json

import pytest
from deepstack import load_noc_profile
from deepstack.gpu_nodes import first_devices

from plena_opt.chip import list_chip_profiles, load_chip
from plena_opt.chip.gpu import GpuChipProfile, gpu_profile_names
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.memory import HbmStoragePrecision
from plena_opt.models import list_models, load_model

GPUS = ("h100-sxm", "h200-sxm", "b200", "b300", "gb200", "gb300", "mi325x", "mi300x")
CATALOG = ("llama-3.3-70b", "llama-3.1-405b", "qwen3-235b-a22b", "qwen3-32b", "gpt-oss-120b",
           "llama-3.1-8b")  # fmt: skip


def _walk_sources(node, path=""):
    if isinstance(node, dict):
        if "value" in node:
            yield path, node
            return
        for k, v in node.items():
            yield from _walk_sources(v, f"{path}.{k}" if path else k)


@pytest.mark.parametrize("name", GPUS)
def test_every_constant_has_a_source(name):
    chip = load_chip(name)
    assert isinstance(chip, GpuChipProfile)
    values = list(_walk_sources(chip.describe()))
    assert len(values) > 20
    for path, v in values:
        assert isinstance(v["source"], str) and len(v["source"]) > 10, path


def test_builtin_names_and_plena_default_unchanged():
    assert set(GPUS) <= set(list_chip_profiles())
    assert set(gpu_profile_names()) == set(GPUS)
    assert load_chip().name == "plena-default"


def test_user_gpu_profile_json(tmp_path):
    data = load_chip("h200-sxm").describe()
    data["name"] = "my-h200"
    data["hbm"]["capacity_bytes"]["value"] = 96e9
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    chip = load_chip(str(path))
    assert chip.name == "my-h200" and chip.hbm.capacity_bytes.value == 96e9
    for bad in (-1, 1e300, float("nan")):
        data["hbm"]["bandwidth_bytes_per_s"]["value"] = bad
        with pytest.raises(PlenaInputError) as err:
            load_chip(data)
        assert "hbm.bandwidth_bytes_per_s" in err.value.field
    data["hbm"]["bandwidth_bytes_per_s"]["value"] = 4.8e12
    data["formats"]["fp4"] = "fp4"  # no fp4 peak on a Hopper part
    with pytest.raises(PlenaInputError) as err:
        load_chip(data)
    assert err.value.field == "formats.fp4"
    del data["formats"]["fp4"]
    del data["power"]["idle_watts"]["source"]
    with pytest.raises(PlenaInputError) as err:
        load_chip(data)
    assert "power.idle_watts.source" in err.value.field


def _ev(chip="b200", model="llama-3.1-70b", noc="hgx-b200x8", **wl):
    c = load_chip(chip)
    w = Workload(**{"batch_size": 8, "input_seq_len": 1024, "output_seq_len": 256, **wl})
    return Evaluator(load_model(model), load_noc_profile(noc), gpu_memory(c), w, c)


def test_precision_the_chip_lacks_is_refused():
    with pytest.raises(PlenaInputError) as err:
        _ev("h100-sxm", noc="hgx-h100x8", precision="fp4")
    assert err.value.field == "precision" and "fp4" in str(err.value)
    with pytest.raises(PlenaInputError) as err:
        _ev("h100-sxm", noc="hgx-h100x8", kv_precision="mxfp4")
    assert err.value.field == "kv_precision"
    with pytest.raises(PlenaInputError):
        Workload(precision="fp7")


def test_precision_sets_bytes_and_the_fitted_kernel_rate():
    w = {p: _ev(precision=p).evaluate(Plan(tp=8)).weight_bytes_per_device for p in ("bf16", "fp8")}
    assert w["fp8"] == pytest.approx(w["bf16"] / 2)
    # Large memory-bound GEMMs (TP 2): Hopper's measured fp8 kernels beat bf16 ...
    h = {p: _ev("h100-sxm", noc="hgx-h100x8", precision=p).evaluate(Plan(tp=2, dp=4)).tps
         for p in ("bf16", "fp8")}  # fmt: skip
    assert h["fp8"] > 1.3 * h["bf16"]
    # ... while B200's vLLM 0.19 fp8 GEMMs have a larger fixed time than bf16 (fitted, not
    # assumed), which the small TP-8 GEMMs of a 70B model at batch 8 expose.
    b200 = load_chip("b200")
    assert b200.gemm["fp8"].fixed_seconds.value > b200.gemm["bf16"].fixed_seconds.value


def test_plena_default_precision_is_unchanged_and_plena_formats_change_bytes():
    from plena_opt.estimate.distributed import EstimateContext
    from plena_opt.memory import load_memory

    mem, noc = load_memory("fictional_stacked_dram"), load_noc_profile("illustrative_gpu_node_8")
    model = load_model("llama-3.1-8b")
    ctx = EstimateContext(model, noc, mem, Workload())
    assert ctx.precision == HbmStoragePrecision.default()
    assert ctx.precision.weight_bytes == 1.125
    ctx4 = EstimateContext(model, noc, mem, Workload(precision="mxfp4"))
    assert ctx4.precision.weight_bytes == 0.625


def test_breakdown_compute_hbm_nvlink_and_large_batch_turns_compute_bound():
    small = _ev(batch_size=1).evaluate(Plan(tp=8))
    assert small.attribution["dram"] > small.attribution["tp_all_reduce"] > 0
    assert small.attribution.get("compute", 0.0) < 0.05 * small.decode_step_seconds
    big = _ev(batch_size=1024, input_seq_len=128, output_seq_len=64).evaluate(Plan(tp=8))
    assert big.attribution["compute"] > 0.2 * big.decode_step_seconds
    assert sum(big.attribution.values()) == pytest.approx(big.decode_step_seconds)


def test_plena_only_options_are_reported_on_a_gpu():
    assert _ev().evaluate(Plan(tp=8)).warnings == ()
    w = _ev(frequency_hz=2e9, overlap_policy="serial").evaluate(Plan(tp=8)).warnings
    assert any("frequency_hz" in x for x in w) and any("overlap_policy" in x for x in w)


def test_energy_from_the_power_model():
    m1 = _ev(batch_size=1).evaluate(Plan(tp=8))
    m64 = _ev(batch_size=64).evaluate(Plan(tp=8))
    chip = load_chip("b200")
    # Between all-idle and all-busy board power over one decode step, per token.
    step = m1.decode_step_seconds
    assert 8 * chip.power.idle_watts.value * step < m1.energy_per_token_joules
    assert m1.energy_per_token_joules < 8 * chip.power.busy_watts.value * step
    assert m64.energy_per_token_joules < m1.energy_per_token_joules / 10


NODES = [("h100-sxm", "hgx-h100x8"), ("h200-sxm", "hgx-h200x8"), ("b200", "hgx-b200x8"),
         ("b300", "hgx-b300x8"), ("mi325x", "mi325x-x8"), ("mi300x", "mi300x-x8")]  # fmt: skip


@pytest.mark.parametrize("model", CATALOG)
@pytest.mark.parametrize("chip,noc", NODES)
def test_issue_models_price_on_every_gpu(model, chip, noc):
    ev = _ev(chip, model, noc, batch_size=4, input_seq_len=256, output_seq_len=16)
    plans = ev.legal_plans()
    assert plans
    m = ev.evaluate(Plan(tp=8) if Plan(tp=8) in plans else plans[0])
    assert m.tps > 0 and m.ttft_seconds > 0


@pytest.mark.parametrize("model", list_models())
def test_every_catalog_model_prices_on_b200(model):
    ev = _ev("b200", model, "hgx-b200x8", batch_size=4, input_seq_len=256, output_seq_len=16)
    plans = ev.legal_plans()
    assert plans, model
    m = ev.evaluate(plans[-1])
    assert m.tps > 0 and m.ttft_seconds > 0 and m.energy_per_token_joules > 0


def test_mla_prices_the_latent_cache_and_absorbed_decode():
    ev = _ev("b200", "deepseek-v3", "hgx-b200x8", batch_size=64, precision="fp8")
    m = ev.evaluate(Plan(tp=8, moe_tp_mode="keep"))
    spec = load_model("deepseek-v3")
    # One latent of kv_lora + rope per token per layer, replicated over TP, at bf16.
    held = 64 * (1024 + 256) * spec.kv_latent_dim * 2 * spec.num_layers
    assert m.kv_cache_bytes_per_device == pytest.approx(held, rel=0.01)
    longer = _ev("b200", "deepseek-v3", "hgx-b200x8", batch_size=64, precision="fp8",
                 input_seq_len=8192).evaluate(Plan(tp=8, moe_tp_mode="keep"))  # fmt: skip
    assert longer.decode_step_seconds > m.decode_step_seconds


def test_devices_and_multi_node_profiles():
    node = load_noc_profile("hgx-h200x8")
    assert first_devices(node, 4).num_devices == 4
    cluster = load_noc_profile("hgx-h200x8@4")
    assert cluster.num_devices == 32
    assert first_devices(cluster, 16).num_devices == 16
    with pytest.raises(ValueError):
        first_devices(node, 6 * 2)
    ev = _ev("h200-sxm", noc="hgx-h200x8@2", batch_size=16)
    # TP across the InfiniBand level is slower than TP inside a node with DP across nodes.
    inside = ev.evaluate(Plan(tp=8, dp=2)).tps
    across = ev.evaluate(Plan(tp=16)).tps
    assert inside > across


def test_cli_done_when_estimate_prints_breakdown(capsys):
    rc = main(["estimate", "--model", "llama-3.1-70b", "--chip", "b200", "--noc", "hgx-b200x8",
               "--tp", "8", "--batch-size", "64", "--input-seq", "1024", "--output-seq", "1024",
               "--precision", "bf16"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "dram" in out and "tp_all_reduce" in out and "b200-hbm" in out


def test_cli_devices_and_bad_precision(capsys):
    rc = main(["estimate", "--chip", "h200-sxm", "--noc", "hgx-h200x8", "--devices", "4",
               "--tp", "4", "--model", "llama-3.1-8b", "--json"])  # fmt: skip
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["plan"]["world_size"] == 4
    rc = main(["estimate", "--chip", "h100-sxm", "--noc", "hgx-h100x8", "--tp", "8",
               "--precision", "fp4"])  # fmt: skip
    assert rc == 2
    assert "error:" in capsys.readouterr().err
