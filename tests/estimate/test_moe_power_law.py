"""Power-law MoE routing: the load generator, the busiest rank, the kernel-level check against the
measured power-law fused-MoE rows, and vLLM's single all-reduce of shared + routed experts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from deepstack import ProfileError
from deepstack import moe as ds_moe
from deepstack.power_law import busiest_block, power_law_counts, power_law_rows

from plena_opt.cli.main import main
from plena_opt.estimate.moe_load import busiest_rank_load, power_law_alpha
from plena_opt.models import load_model
from tests.conftest import require_shared


@pytest.mark.parametrize(("tokens", "experts", "k"), [(1, 128, 8), (8, 256, 8), (64, 128, 8),
                                                      (512, 256, 8), (3, 8, 2)])  # fmt: skip
def test_counts_hold_every_pair_and_no_expert_twice_per_token(tokens, experts, k) -> None:
    c = power_law_counts(tokens, experts, k, 1.2, seed=3)
    assert c.sum() == tokens * k and c.max() <= tokens and c.min() >= 0 and c.size == experts
    assert np.array_equal(c, power_law_counts(tokens, experts, k, 1.2, seed=3))
    rows = power_law_rows(c, tokens)
    assert rows.shape == (tokens, k)
    assert all(len(set(r)) == k for r in rows.tolist())
    assert np.array_equal(np.bincount(rows.ravel(), minlength=experts), c)


def test_skewed_loads_touch_fewer_experts_than_uniform_routing() -> None:
    for tokens in (16, 32, 64, 128):
        skew = np.count_nonzero(power_law_counts(tokens, 256, 8, 1.01))
        uniform = np.unique(ds_moe.random_rows(tokens, 256, 8, seed=0)).size
        assert skew < uniform, tokens
    # a steeper law concentrates more: the hottest expert holds more pairs
    flat = power_law_counts(512, 128, 8, 1.01).max()
    steep = power_law_counts(512, 128, 8, 3.0).max()
    assert steep > flat


def test_busiest_block_and_refusals() -> None:
    c = np.array([1, 2, 9, 0, 3, 3])
    assert busiest_block(c, 3).tolist() == [9, 0]
    with pytest.raises(ProfileError, match="divide"):
        busiest_block(c, 4)
    with pytest.raises(ProfileError, match="alpha"):
        power_law_counts(8, 16, 2, 1.0)
    with pytest.raises(ProfileError, match="top_k"):
        power_law_counts(8, 4, 8, 1.2)


def test_moe_load_of_power_law_routing() -> None:
    ds = load_model("deepseek-v3")
    assert power_law_alpha(ds) == 1.01 and power_law_alpha(load_model("qwen3-235b-a22b")) == 1.2
    one = busiest_rank_load(ds, micro=64, q=1, dp=1, tp_moe=8, ep_moe=1, routing="power_law",
                            rows=None)  # fmt: skip
    assert one.pairs == 64 * 8 and one.source == "power_law (alpha 1.01)"
    assert one.active_experts == np.count_nonzero(power_law_counts(64, 256, 8, 1.01))
    ep8 = busiest_rank_load(ds, micro=64, q=1, dp=1, tp_moe=1, ep_moe=8, routing="power_law",
                            rows=None)  # fmt: skip
    assert len(ep8.expert_counts) == 32 and ep8.imbalance >= 1.0


def test_power_law_kernel_rows_are_reproduced_by_the_balanced_fit() -> None:
    """Kernel level: the fused-MoE curve (fitted on balanced rows only) with the generator's
    experts-hit count reproduces the measured power-law rows (B200, vLLM 0.19.0, TP only)."""
    from plena_opt.chip import load_chip
    from plena_opt.chip.gpu.perf import GpuPerfModel
    from plena_opt.validate.calibrate import read_rows

    path = require_shared() / "data" / "kernels" / "b200_sxm_moe_vllm-0.19.0.csv.gz"
    chip = load_chip("b200")
    perf = {"bfloat16": GpuPerfModel(chip, "bf16", 2.0, 2.0, 2.0),
            "fp8": GpuPerfModel(chip, "fp8", 1.0, 2.0, 2.0)}  # fmt: skip
    errs: dict[str, list[float]] = {"bfloat16": [], "fp8": []}
    for r in read_rows(path):
        if (r["kernel_source"] != "vllm_fused_moe" or r["moe_ep_size"] != "1"
                or r["moe_dtype"] not in perf or not r["distribution"].startswith("power_law")
                or int(r["num_tokens"]) > 1024):  # fmt: skip
            continue
        keys = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size")
        T, h, f, k, E, tp = (int(r[x]) for x in keys)
        alpha = float(r["distribution"].rsplit("_", 1)[1])
        active = np.count_nonzero(power_law_counts(T, E, k, alpha))
        t = perf[r["moe_dtype"]].fused_moe(T, T * k, active, h, f // tp).seconds
        errs[r["moe_dtype"]].append(t / (float(r["latency"]) * 1e-3) - 1)
    for dtype, e in errs.items():
        e = np.array(e)
        assert e.size > 2800, dtype
        assert abs(e.mean()) < 0.05, dtype  # measured: bf16 -3 %, fp8 -1 % bias
        assert np.abs(e).mean() < 0.20, dtype  # measured: bf16 15 %, fp8 19 %


def test_gpu_reduces_shared_and_routed_experts_in_one_all_reduce(capsys) -> None:
    args = ["estimate", "--model", "deepseek-v3", "--chip", "b200", "--noc", "hgx-b200x8",
            "--tp", "8", "--batch-size", "8", "--input-seq", "128", "--output-seq", "4",
            "--precision", "fp8", "--moe-tp-mode", "keep", "--routing", "power_law",
            "--json"]  # fmt: skip
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    att = doc["decode_attribution_seconds"]
    m = load_model("deepseek-v3")
    moe_layers = sum(r.count for r in m.layer_runs if r.mlp == "moe")
    # attention (every layer) + dense MLPs, against one all-reduce per MoE layer, all one size
    expect = (m.num_layers + (m.num_layers - moe_layers)) / moe_layers
    assert att["tp_all_reduce"] / att["moe_tp_all_reduce"] == pytest.approx(expect, rel=1e-9)
    assert doc["routing"] == "power_law"
