"""One byte count for GPU GEMM / fused-MoE kernels: the kernel-table fits and the pricing agree
(``plena_opt.chip.gpu.kernel_bytes``, issue 23, README_serving r16bytes)."""

from __future__ import annotations

import pytest

from plena_opt.chip.gpu import GpuPerfModel, load_gpu_chip
from plena_opt.chip.gpu.kernel_bytes import (
    GEMM_OUTPUT_BYTES,
    gemm_bytes,
    gemm_operand_bytes,
)
from plena_opt.chip.precision import GPU_BYTES
from plena_opt.errors import PlenaInputError
from plena_opt.validate.calibrate import gemm_nbytes, moe_nbytes

# format (, compute format) -> (weight bytes, input bytes per element): the input holds the
# bf16 passes of its quantisation, the quantised write and the GEMM's read of it
WIDTHS = {
    ("bf16", None): (2.0, 2.0),
    ("fp8", None): (1.0, 2 * 2.0 + 2 * 1.0),  # dynamic per-tensor: max pass + quantise pass
    ("fp8_block", None): (1 + 4 / 128**2, 2.0 + 2 * (1 + 4 / 128)),
    ("fp4", None): (4.5 / 8, 2.0 + 2 * 4.5 / 8),
    ("mxfp8", "fp8"): (8.25 / 8, 2.0 + 2 * 8.25 / 8),
    ("int4", "bf16"): (4.125 / 8, 2.0),  # weight-only: bf16 input, no quantisation
    ("mxfp4", "bf16"): (4.25 / 8, 2.0),
}


@pytest.mark.parametrize(("key", "widths"), WIDTHS.items())
def test_each_format_has_its_linear_layer_bytes(key: tuple, widths: tuple) -> None:
    fb = gemm_operand_bytes(*key)
    assert (fb.weight, fb.activation) == pytest.approx(widths)


def test_a_gemm_writes_bf16_whatever_its_format() -> None:
    assert GEMM_OUTPUT_BYTES == 2.0
    for fmt in ("bf16", "fp8", "fp4"):
        fb = gemm_operand_bytes(fmt)
        assert gemm_bytes(3, 5, 7, fb.weight, fb.activation)[1] == 3 * 5 * 2.0


def test_a_quantised_format_without_a_known_input_path_is_refused() -> None:
    with pytest.raises(PlenaInputError) as err:
        gemm_operand_bytes("int4", "int4")
    assert err.value.field == "precision"


# (chip, precision, block-scaled?) the product prices and the table format it was fitted on
PRICED = [
    ("h100-sxm", "bf16", False, "bf16"),
    ("h100-sxm", "fp8", False, "fp8"),
    ("h200-sxm", "fp8", True, "fp8_block"),
    ("b200", "fp8", False, "fp8"),
    ("b200", "fp4", False, "fp4"),
]


SHAPES = [(1, 8192, 8192), (64, 1024, 28672), (4097, 10240, 8192)]


@pytest.mark.parametrize(("chip", "precision", "block", "fmt"), PRICED)
@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
def test_the_pricing_counts_the_bytes_the_fit_counted(
    chip: str, precision: str, block: bool, fmt: str, m: int, n: int, k: int
) -> None:
    """``GpuPerfModel.gemm`` moves exactly the bytes ``calibrate`` fitted its curve on (fails if
    either side counts on its own again)."""
    fb = GPU_BYTES[precision]
    p = GpuPerfModel(load_gpu_chip(chip), precision, fb.weight, fb.activation, 2.0)
    p = p.block_scaled() if block else p
    kt = p.gemm(m, n, k)
    assert kt.read_bytes + kt.write_bytes == pytest.approx(gemm_nbytes(fmt, m, n, k), rel=1e-12)


MOE = [("h200-sxm", "fp8", False, "fp8"), ("h200-sxm", "fp8", True, "fp8_block"),
       ("b200", "fp4", False, "fp4"), ("h200-sxm", "bf16", False, "bf16")]  # fmt: skip


@pytest.mark.parametrize(("chip", "precision", "block", "fmt"), MOE)
def test_the_fused_moe_pricing_counts_the_bytes_the_fit_counted(
    chip: str, precision: str, block: bool, fmt: str
) -> None:
    fb = GPU_BYTES[precision]
    p = GpuPerfModel(load_gpu_chip(chip), precision, fb.weight, fb.activation, 2.0)
    tokens, k, experts, h, f = 64, 8, 256, 7168, 256
    pairs = tokens * k
    active = min(experts, pairs)
    kt = p.fused_moe(tokens, pairs, active, h, f, block_scaled=block)
    want = moe_nbytes(fmt, tokens, pairs, active, h, f)
    assert kt.read_bytes + kt.write_bytes == pytest.approx(want, rel=1e-12)


def test_a_weight_only_layer_reads_bf16_input_in_fit_and_pricing() -> None:
    fb = GPU_BYTES["mxfp4"]
    p = GpuPerfModel(load_gpu_chip("h100-sxm"), "mxfp4", fb.weight, 2.0, 2.0)
    kt = p.gemm(16, 2880, 2880)
    want = 2880 * 2880 * 4.25 / 8 + 16 * 2880 * 2.0 + 16 * 2880 * 2.0
    assert kt.read_bytes + kt.write_bytes == pytest.approx(want)
    got = p.fused_moe(16, 64, 64, 2880, 2880, marlin=True)
    assert got.read_bytes + got.write_bytes == pytest.approx(
        moe_nbytes("mxfp4", 16, 64, 64, 2880, 2880, "bf16")
    )


def test_an_engine_that_fuses_the_quantisation_reads_only_the_stored_input() -> None:
    """TensorRT-LLM quantises inside the kernel before the GEMM: no bf16 passes, the GEMM reads
    the stored input (bf16 and weight-only layers are unchanged)."""
    fused = gemm_operand_bytes("fp8", fused_quant=True)
    assert (fused.weight, fused.activation) == (1.0, 1.0)
    assert gemm_operand_bytes("fp4", fused_quant=True).activation == 4.5 / 8
    assert gemm_operand_bytes("bf16", fused_quant=True).activation == 2.0
    assert gemm_operand_bytes("int4", "bf16", fused_quant=True).activation == 2.0
    fb = GPU_BYTES["fp8"]
    chip = load_gpu_chip("h100-sxm")
    p = GpuPerfModel(chip, "fp8", fb.weight, fb.activation, 2.0, fused_quant=True)
    kt = p.gemm(64, 1024, 4096)
    assert kt.read_bytes == 1024 * 4096 * 1.0 + 64 * 4096 * 1.0
    assert kt.write_bytes == 64 * 1024 * 2.0
    unfused = GpuPerfModel(chip, "fp8", fb.weight, fb.activation, 2.0).gemm(64, 1024, 4096)
    assert unfused.read_bytes - kt.read_bytes == 64 * 4096 * 5.0  # two bf16 passes + a write
    assert unfused.seconds > kt.seconds


def test_tensorrt_llm_steps_price_fused_quantisation() -> None:
    from plena_opt.estimate import Workload
    from plena_opt.serving import engine_model
    from plena_opt.serving.steps import engine_workload

    wl = Workload(precision="fp8")
    engines = {name: engine_model(name, 80e9) for name in ("vllm", "sglang", "trtllm")}
    assert {n: e.fused_input_quant for n, e in engines.items()} == {
        "vllm": False, "sglang": False, "trtllm": True
    }  # fmt: skip
    assert engine_workload(wl, engines["vllm"]) is wl
    assert engine_workload(wl, engines["trtllm"]).fused_input_quant
