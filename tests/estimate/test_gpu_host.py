"""Eager host time of GPU prefill steps (``estimate.gpu_host``, chip ``eager_host``) and the
full burst replay's time per output token."""

from __future__ import annotations

import csv
import json

import pytest

from plena_opt.chip import load_chip
from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.estimate import Evaluator
from plena_opt.estimate.gpu_host import EXTRA_OPS, EagerOps, layer_ops, model_ops
from plena_opt.estimate.gpu_queue import burst_ttft
from plena_opt.models import load_model
from plena_opt.validate.scorecard import FIG09_FILES, _fig09_setup, data_dir
from tests.conftest import require_shared

FIG09 = tuple(FIG09_FILES)


def _eager_row(model: str, column: str) -> float:
    """fig09's Eager_Mode=True value at BS 1 (not a scored point)."""
    with open(data_dir() / "fig09" / FIG09_FILES[model], newline="") as fh:
        for r in csv.DictReader(fh):
            if r["Eager_Mode"].strip() == "True" and int(r["BS"]) == 1:
                return float(r[column])
    raise AssertionError(model)


def _prefill_seconds(model: str, chip=None) -> float:
    m, noc, memory, wl, chip, plan = _fig09_setup(model, 1, chip)
    return Evaluator(m, noc, memory, wl, chip).estimate(plan).prefill["latency_seconds"]


@pytest.mark.parametrize("model", FIG09)
def test_batch1_prefill_is_the_measured_eager_ttft(model):
    """An eager forward's TTFT at batch 1 (1,024 / ``User Prefill Speed`` of the eager row,
    a measurement no constant is fitted on) is kernels + host time: the prefill pass is within
    15 % of it for every fig09 model, MoE and MLA included (kernels alone: 27-72 % short for
    the MoE models and Llama-70B)."""
    measured = 1024 / _eager_row(model, "User Prefill Speed")
    assert _prefill_seconds(model) == pytest.approx(measured, rel=0.15)


def test_a_chip_without_eager_host_prices_no_host_time():
    chip = load_chip("b200")
    bare = chip.model_copy(update={"eager_host": None})
    m = load_model("qwen3-235b-a22b")
    host = model_ops(m, 8, False)
    expect = host.ops * chip.eager_host.seconds_per_op.value
    expect += host.triton * chip.eager_host.seconds_per_triton_op.value
    gap = _prefill_seconds("qwen3-235b-a22b") - _prefill_seconds("qwen3-235b-a22b", bare)
    assert gap == pytest.approx(expect, rel=1e-6)
    assert expect > 0.05  # 94 MoE layers: tens of ms


def test_decode_pays_host_time_only_above_the_graph_size():
    """Decode steps up to ``cuda_graph_max_tokens`` replay a CUDA graph (no host time);
    larger ones run eagerly."""
    chip = load_chip("b200")
    small = chip.model_copy(
        update={
            "eager_host": chip.eager_host.model_copy(
                update={
                    "cuda_graph_max_tokens": chip.eager_host.cuda_graph_max_tokens.model_copy(
                        update={"value": 4}
                    )
                }
            )
        }
    )
    for batch, pays in ((4, False), (8, True)):
        m, noc, memory, wl, _, plan = _fig09_setup("llama-3.1-70b", batch)
        step = {}
        for name, c in (("graph", chip), ("small", small)):
            est = Evaluator(m, noc, memory, wl, c).estimate(plan)
            step[name] = est.first_token_decode["latency_seconds"]
        host = model_ops(m, 8, False).ops * chip.eager_host.seconds_per_op.value
        assert (step["small"] - step["graph"]) == pytest.approx(host if pays else 0.0, abs=1e-9)


def test_layer_ops_follow_the_layer_kind():
    llama = load_model("llama-3.1-70b")
    qwen = load_model("qwen3-235b-a22b")
    dsv3 = load_model("deepseek-v3")
    # norm, QKV, RoPE, cache write, attention, O, norm, gate_up, act, down + 2 all-reduces
    assert layer_ops(llama, False, 8, False) == EagerOps(12, 0)
    assert layer_ops(llama, False, 1, False) == EagerOps(10, 0)  # no TP all-reduce
    moe = layer_ops(qwen, True, 8, False)
    assert moe.triton == 2  # the two fused_moe_kernel calls
    assert moe.ops > layer_ops(qwen, False, 8, False).ops
    block, plain = layer_ops(dsv3, True, 8, True), layer_ops(dsv3, True, 8, False)
    assert block.ops == plain.ops and block.triton > plain.triton  # activation quantisation
    assert model_ops(llama, 8, False) == EagerOps(12 * llama.num_layers, 0) + EXTRA_OPS


def _profile() -> dict:
    return load_chip("b200").describe()


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("seconds_per_op", -1e-6, PlenaInputError),
        ("seconds_per_triton_op", float("nan"), PlenaInputError),
        ("cuda_graph_max_tokens", -1, PlenaInputError),
        ("cuda_graph_max_tokens", 1.5, PlenaInputError),
        ("seconds_per_op", "fast", PlenaTypeError),
    ],
)
def test_bad_eager_host_values_are_refused_naming_the_field(key, value, error):
    data = _profile()
    data["eager_host"][key]["value"] = value
    with pytest.raises(error) as err:
        load_chip(data)
    assert f"eager_host.{key}" in err.value.field


def test_eager_host_needs_sources_and_known_keys(tmp_path):
    data = _profile()
    del data["eager_host"]["seconds_per_op"]["source"]
    with pytest.raises(PlenaInputError) as err:
        load_chip(data)
    assert "eager_host.seconds_per_op.source" in err.value.field
    data = _profile()
    data["eager_host"]["seconds_per_kernel"] = {"value": 1e-6, "source": "typo"}
    with pytest.raises(PlenaInputError) as err:
        load_chip(data)
    assert "eager_host.seconds_per_kernel" in err.value.field
    data = _profile()
    del data["eager_host"]  # optional: a user profile without it prices no host time
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    assert load_chip(str(path)).eager_host is None


def test_shipped_eager_host_per_op_is_the_kernel_measurement_and_triton_the_fit():
    """``seconds_per_op`` is each server's eager custom-op call time from the kernel table (no
    end-to-end fit); ``seconds_per_triton_op`` the one-parameter fit on the eager rows."""
    from plena_opt.validate.calibrate_host import (
        HOST_SYSTEM,
        fit_eager_host,
        kernel_seconds_per_op,
    )

    kernels = require_shared() / "data" / "kernels"
    fit = fit_eager_host(kernel_seconds_per_op(kernels))
    for name, system in HOST_SYSTEM.items():
        eh = load_chip(name).eager_host
        a = kernel_seconds_per_op(kernels, system)
        assert eh.seconds_per_op.value == pytest.approx(a, rel=2e-3), name
        assert eh.seconds_per_triton_op.value == pytest.approx(
            fit.seconds_per_triton_op, rel=2e-3
        ), name
        assert eh.cuda_graph_max_tokens.value == 512
    assert all(abs(e) < 0.15 for e in fit.errors.values())
    # the dense models launch no Triton kernel: kernel data alone predicts their eager steps
    for dense in ("llama-3.1-70b", "llama-3.1-405b"):
        assert abs(fit.errors[dense]) < 0.03
        assert fit.held_out[dense] == fit.errors[dense]
    assert set(fit.held_out) == set(FIG09)


def test_eager_custom_op_calls_are_host_bound_on_every_server():
    """The eager all-reduce call takes 20-24 us on H100, H200 and B200 at every small size while
    the same kernel in a graph takes 4-9 us: the per-call time is the host's, not the GPU's."""
    from plena_opt.validate.calibrate import read_rows
    from plena_opt.validate.calibrate_host import HOST_BOUND_MAX_BYTES, kernel_seconds_per_op

    kernels = require_shared() / "data" / "kernels"
    for system in ("h100_sxm", "h200_sxm", "b200_sxm"):
        a = kernel_seconds_per_op(kernels, system)
        assert 18e-6 < a < 26e-6, system
        rows = read_rows(kernels / f"{system}_custom_allreduce_vllm-0.19.0.csv.gz")
        eager = [
            float(r["latency"]) * 1e-3
            for r in rows
            if r["backend"] == "vllm_eager"
            and r["num_gpus"] == "8"
            and int(r["message_size"]) * 2 <= HOST_BOUND_MAX_BYTES
        ]
        assert max(eager) < 1.1 * a and min(eager) > 0.9 * a, system  # flat in message size
    with pytest.raises(ValueError, match="host bound"):
        import plena_opt.validate.calibrate_host as ch

        old = ch.HOST_BOUND_MAX_BYTES
        ch.HOST_BOUND_MAX_BYTES = 1 << 30  # the GB-size rows are GPU bound
        try:
            kernel_seconds_per_op(kernels, "b200_sxm")
        finally:
            ch.HOST_BOUND_MAX_BYTES = old


def _prefill(tokens: int) -> float:
    return 1.0 + tokens / 100  # 1 s host + 10 ms per token


def _decode(n: int) -> float:
    return 0.5 + 0.01 * n


def test_full_replay_tpot_hand_computed():
    """Two 100-token prompts, 150-token budget, 3 output tokens each. Step 1: request 0's
    prompt + 50 of request 1's (1.5 + 1 = 2.5 s; first token of 0). Step 2: 50 tokens + one
    decode (1.5 + 0.51 = 2.01 s → 4.51; first token of 1, token 2 of 0). Steps 3, 4: decode
    only at ``decode_mean`` (n = 2: 0.6 s → 5.11 finishes 0; n = 1: 0.3 s → 5.41 finishes 1)."""
    q = burst_ttft(2, 100, 150, _prefill, _decode, output_len=3,
                   decode_mean_seconds=lambda n: 0.3 * n)  # fmt: skip
    assert q.ttft_seconds == pytest.approx((2.5, 4.51))
    assert q.tpot_seconds == pytest.approx(((5.11 - 2.5) / 2, (5.41 - 4.51) / 2))
    assert q.steps == 4
    assert q.user_decode_speed == pytest.approx((2 / 2.61 + 2 / 0.9) / 2)
    # the TTFT-only replay is unchanged by the decode tail
    short = burst_ttft(2, 100, 150, _prefill, _decode)
    assert short.ttft_seconds == q.ttft_seconds and short.tpot_seconds == ()
    with pytest.raises(PlenaInputError) as err:
        _ = short.user_decode_speed
    assert err.value.field == "output_seq_len"


def test_full_replay_refuses_a_bad_output_length():
    with pytest.raises(PlenaInputError) as err:
        burst_ttft(2, 100, 150, _prefill, _decode, output_len=0)
    assert err.value.field == "output_seq_len"


def test_prefill_interleaving_slows_the_early_requests_decode():
    """Under a burst the requests served first decode through the steps that carry the others'
    prompts, so their time per output token is longer than the last request's."""
    from plena_opt.validate.scorecard import fig09_prefill_predict

    q = fig09_prefill_predict("llama-3.1-70b", [256])[256]
    assert q.tpot_seconds[0] > 1.2 * q.tpot_seconds[-1]
