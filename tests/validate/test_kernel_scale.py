"""TensorRT-LLM's decode-kernel constants (``serving.kernel_scale``): what the shipped rows
give, and where they apply."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plena_opt.serving.kernel_scale import TRTLLM_DECODE_SCALE, decode_scale
from plena_opt.validate.fit_kernel_scale import FIT_SET, fit_rows, geometric_ratio, mape


def test_the_shipped_constants_are_what_the_shipped_rows_give():
    """Each architecture's constant is the geometric mean of measured / predicted TPOT over its
    fit rows with the constants off (to the 3 digits shipped), and holding out either model the
    constant fitted on the other improves the held-out model's TPOT MAPE."""
    rows = fit_rows()
    assert set(rows) == set(FIT_SET)
    for arch, by_model in rows.items():
        pairs = [p for v in by_model.values() for p in v]
        assert len(pairs) > 200
        assert round(geometric_ratio(pairs), 3) == TRTLLM_DECODE_SCALE[arch]
        for model, held in by_model.items():
            rest = [p for m, v in by_model.items() if m != model for p in v]
            assert mape(held, geometric_ratio(rest)) < mape(held)


def test_the_constant_scales_only_trtllm_decode_device_time_on_its_architecture():
    from plena_opt import api
    from plena_opt.estimate.plan import Plan
    from plena_opt.serving import StepModel, engine_model
    from plena_opt.serving.calibration import calibrated

    assert decode_scale("trtllm", "gb300") == TRTLLM_DECODE_SCALE["blackwell"]
    assert decode_scale("trtllm", "h200-sxm") == TRTLLM_DECODE_SCALE["hopper"]
    assert decode_scale("vllm", "b200") == decode_scale("trtllm", "mi325x") == 1.0
    p = api.load_problem(model="llama-3.1-8b", noc="hgx-b200x8", chip="b200", input_seq=1024,
                         output_seq=256)  # fmt: skip
    hbm = float(p.chip.hbm.capacity_bytes.value)
    eng = calibrated(engine_model("trtllm", hbm), "b200")
    assert eng.decode_kernel_scale == TRTLLM_DECODE_SCALE["blackwell"]
    assert calibrated(engine_model("vllm", hbm), "b200").decode_kernel_scale == 1.0
    args = (p.model, p.noc, p.memory, p.chip, p.workload, Plan(tp=8))
    on = StepModel.from_problem(*args, eng)
    off = StepModel.from_problem(*args, replace(eng, decode_kernel_scale=1.0))
    for n in (1, 16, 64):
        assert on.decode_seconds(n) == pytest.approx(
            eng.decode_kernel_scale * off.decode_seconds(n)
        )
    assert on.prefill_seconds(4096) == off.prefill_seconds(4096)  # prefill as the tables price it


def test_estimate_says_when_the_constant_is_in_force(capsys):
    """A fitted constant is named where its figure is printed: the under-load block of
    ``estimate`` (text and the engine's ``source`` in JSON) on TensorRT-LLM, not on vLLM."""
    from plena_opt.cli.main import main

    argv = ["estimate", "--model", "llama-3.1-8b", "--chip", "b200", "--noc", "hgx-b200x8",
            "--tp", "8", "--input-seq", "1024", "--output-seq", "256",
            "--concurrency", "8"]  # fmt: skip
    assert main([*argv, "--engine", "trtllm"]) == 0
    assert "decode kernels x 0.92 (trtllm on blackwell" in capsys.readouterr().out
    assert main([*argv, "--engine", "vllm"]) == 0
    assert "decode kernels x" not in capsys.readouterr().out
