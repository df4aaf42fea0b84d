"""A sliding-window decode past its window (``attention_decode.window_seconds``): the H100
kernel table's windowed FlashAttention decode rows cost a few microseconds more once the KV is
longer than the window, flat in the KV length (``validate.calibrate_window``)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np
import pytest

from plena_opt.chip import load_chip
from plena_opt.chip.gpu import GpuPerfModel
from plena_opt.validate import calibrate_window as cw

KERNELS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "kernels"
GEN = "generation_attention_vllm-0.19.0.csv.gz"


def test_past_window_adds_the_chips_window_seconds_only_there() -> None:
    h100, b200 = load_chip("h100-sxm"), load_chip("b200")
    p = GpuPerfModel(h100, "bf16", 2.0, 2.0, 2.0)
    kv = np.array([128.0, 128.0])
    t = p.attention_decode(4, 8, 1, 64, kv, past_window=np.array([False, True])).seconds
    assert t[1] - t[0] == pytest.approx(h100.attention_decode.window_seconds.value)
    assert 1e-6 < t[1] - t[0] < 1e-5  # microseconds, as the table's rows
    assert b200.attention_decode.window_seconds is None  # its table has no windowed rows past
    q = GpuPerfModel(b200, "bf16", 2.0, 2.0, 2.0)
    t = q.attention_decode(4, 8, 1, 64, kv, past_window=np.array([False, True])).seconds
    assert t[0] == t[1]


def _step_ms(chip, isl: int) -> float:
    from deepstack import load_noc_profile

    from plena_opt.estimate import Evaluator, Plan, Workload
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    wl = Workload(batch_size=4, input_seq_len=isl, output_seq_len=16, precision="mxfp4")
    ev = Evaluator(load_model("gpt-oss-120b"), load_noc_profile("hgx-h100x8"),
                   gpu_memory(chip), wl, chip)  # fmt: skip
    return 1e3 / ev.evaluate(Plan(tp=8)).tps_per_sequence


def test_gpt_oss_decode_pays_it_on_its_sliding_layers_past_the_window() -> None:
    """gpt-oss-120b alternates 18 sliding-window (128) and 18 full layers: with every decode
    KV past the window the step is 18 x window_seconds dearer; within the window unchanged."""
    chip = load_chip("h100-sxm")
    dec = chip.attention_decode
    off = dec.model_copy(update={"window_seconds": None})
    none = chip.model_copy(update={"attention_decode": off})
    past = _step_ms(chip, 1024) - _step_ms(none, 1024)
    assert past == pytest.approx(18 * dec.window_seconds.value * 1e3, rel=1e-6)
    assert _step_ms(chip, 64) == pytest.approx(_step_ms(none, 64), rel=1e-12)  # KV ≤ 80 < 128


def _write(path: Path, rows: list[dict]) -> None:
    keys = ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype",
            "step", "window_size", "latency")  # fmt: skip
    with gzip.open(path, "wt", newline="") as fh:
        w = csv.DictWriter(fh, keys)
        w.writeheader()
        w.writerows(rows)


def test_the_fit_reads_the_median_excess_and_refuses_full_reads(tmp_path) -> None:
    p = GpuPerfModel(load_chip("h100-sxm"), "bf16", 2.0, 2.0, 2.0)
    base = float(p.attention_decode(4, 8, 1, 64, np.array([128.0])).seconds[0])
    flat, grows = [], []
    for i, step in enumerate((255, 511, 1023, 8191, 16383, 65535)):
        row = {"batch_size": 4, "isl": 1, "num_heads": 8, "num_key_value_heads": 1, "head_dim": 64,
               "kv_cache_dtype": "bfloat16", "step": step, "window_size": 128}  # fmt: skip
        flat.append({**row, "latency": (base + (4 + i % 2) * 1e-6) * 1e3})  # 4 or 5 us over
        grows.append({**row, "latency": (base + 1e-9 * step) * 1e3})  # reads the whole KV
    within = {**flat[0], "step": 100, "latency": 1.0}  # inside the window: not counted
    _write(tmp_path / f"h100_sxm_{GEN}", flat + [within])
    fit = cw.fit_window_seconds(tmp_path, "h100_sxm")
    assert fit is not None and fit.rows == 6
    assert fit.seconds == pytest.approx(4.5e-6, rel=1e-3)
    _write(tmp_path / f"h200_sxm_{GEN}", grows)
    assert cw.fit_window_seconds(tmp_path, "h200_sxm") is None
    _write(tmp_path / f"b200_sxm_{GEN}", [within])
    assert cw.fit_window_seconds(tmp_path, "b200_sxm") is None


@pytest.mark.skipif(not (KERNELS / f"h100_sxm_{GEN}").exists(), reason="kernel tables absent")
def test_the_shipped_value_is_the_h100_tables_median() -> None:
    fit = cw.fit_window_seconds(KERNELS, "h100_sxm")
    assert fit is not None and fit.rows > 1000
    value = load_chip("h100-sxm").attention_decode.window_seconds.value
    assert value == pytest.approx(fit.seconds, abs=0.01e-6)
    assert cw.fit_window_seconds(KERNELS, "h200_sxm") is None  # its windowed rows read all KV
