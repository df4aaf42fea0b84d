"""Number formats for ``--precision`` / ``--kv-precision``: bytes per stored element per chip kind.

GPU formats follow the public format definitions: bf16 16 bits; fp8 (e4m3) 8 bits; fp4 = NVFP4
(e2m1 + one e4m3 scale per 16 elements, 4.5 bits); mxfp8 / mxfp4 = OCP Microscaling v1.0 (e8m0
scale per 32 elements: 8.25 / 4.25 bits); int4 = weight-only 4-bit integers with one bf16 scale
per 128 weights (4.125 bits) and bf16 activations (W4A16, computed at the bf16 rate).

Weight-only formats (``w4a16``): a GPU without FP4 tensor cores (Hopper, CDNA3) runs a 4-bit
checkpoint (MXFP4 gpt-oss, INT4 Kimi-K2) as vLLM's Marlin / Triton kernels do: the weights are
read at 4 bits (+ scales), dequantised in registers and multiplied at the bf16 rate with bf16
activations. A chip profile says so by mapping the format to ``bf16`` in its ``formats``
(``"mxfp4": "bf16"``); ``gpu_bytes`` then keeps the format's weight bytes and bf16 activations,
and the GEMMs pay ``W4A16_DEQUANT_SLOWDOWN`` on their compute side.

PLENA keeps its ISA settings' MX blocks of 8 (analytic-model §1.1): mxfp8 = 9 bits (1.125 B, the
default), mxfp4 = 5 bits; PLENA converts every format to BF16 in SRAM, so a format changes the
HBM bytes, never the cycle counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from plena_opt.errors import PlenaInputError

FORMATS = ("bf16", "fp8", "fp4", "mxfp8", "mxfp4", "int4")


@dataclass(frozen=True)
class FormatBytes:
    """Bytes per element of weights and of activations stored in that format."""

    weight: float
    activation: float


GPU_BYTES: dict[str, FormatBytes] = {
    "bf16": FormatBytes(2.0, 2.0),
    "fp8": FormatBytes(1.0, 1.0),
    "fp4": FormatBytes(4.5 / 8, 4.5 / 8),
    "mxfp8": FormatBytes(8.25 / 8, 8.25 / 8),
    "mxfp4": FormatBytes(4.25 / 8, 4.25 / 8),
    "int4": FormatBytes(4.125 / 8, 2.0),
}

# Bytes per element of the activations a GPU engine's tensor-parallel all-reduces carry, whatever
# the weight format: vLLM and TensorRT-LLM write each W8A8 / NVFP4 GEMM's output in bf16 and
# all-reduce that (vLLM ``tensor_model_parallel_all_reduce`` on the layer output). Pricing an fp8
# plan's all-reduce at 1 byte put B200 fp8 decode of Llama-3.1-70B at TP 8, batch 64, below bf16
# (a 512 KiB all-reduce in the measured table's 26 us bucket, 1 MiB at 16.7 us; issue 24).
GPU_REDUCE_BYTES = 2.0

# Compute-side slowdown of a weight-only (W4A16) GEMM against the bf16 GEMM of the same shape: the
# dequantisation work (unpack, scale, convert) that the tensor cores wait on once the GEMM is
# compute-bound. Value 1.10: Marlin's large-batch (>= 1024 rows, prefill) FP16xINT4 GEMMs stay
# ~10 % slower than the FP16 GEMM (Frantar et al., "MARLIN: Mixed-Precision Auto-Regressive
# Parallel Inference on Large Language Models", arXiv:2408.11743 / PPoPP 2025, 72k x 18k GEMMs,
# batch 1-65k; summary https://wentao.site/marlin_summary, read 2026-12-06). Measured on A10
# (Ampere); assumed to carry over to Hopper's Marlin / Triton kernels for dense W4A16 GEMMs (the
# shipped kernel tables hold no W4A16 dense GEMM; their W4A16 fused-MoE rows are fitted against
# this rate in ``plena_opt.validate.calibrate_w4a16``, so there it only sets the scale of the
# fitted compute efficiency). Memory-bound (decode) GEMMs read 4-bit weights and do not pay it
# (Marlin: near-ideal 3.87x up to batch 16-32).
W4A16_DEQUANT_SLOWDOWN = 1.10
WEIGHT_ONLY_COMPUTE = "bf16"  # the compute format of a weight-only format (chip ``formats``)


def is_weight_only(precision: str, compute_format: str) -> bool:
    """True when ``precision`` is stored narrower than it is computed: a W4A16 / W8A16 GEMM."""
    return compute_format == WEIGHT_ONLY_COMPUTE and precision != WEIGHT_ONLY_COMPUTE


def gpu_bytes(precision: str, compute_format: str) -> FormatBytes:
    """Bytes per weight and activation element of ``precision`` run at ``compute_format`` on a
    GPU: weight-only formats keep their weight bytes (values + scales) and bf16 activations."""
    fb = GPU_BYTES[precision]
    if is_weight_only(precision, compute_format):
        return FormatBytes(fb.weight, GPU_BYTES[WEIGHT_ONLY_COMPUTE].activation)
    return fb


PLENA_BYTES: dict[str, FormatBytes] = {
    "bf16": FormatBytes(2.0, 2.0),
    "fp8": FormatBytes(1.0, 1.0),
    "fp4": FormatBytes(0.5, 0.5),
    "mxfp8": FormatBytes(9 / 8, 9 / 8),
    "mxfp4": FormatBytes(5 / 8, 5 / 8),
    "int4": FormatBytes(0.5, 0.5),
}


def check_format(name: str, field: str) -> str:
    """Return ``name`` if it is a known format; raise naming ``field`` otherwise."""
    if name not in FORMATS:
        flag = "--" + field.replace("_", "-")
        raise PlenaInputError(
            field, f"{flag}: unknown format {name!r}; choose one of " + ", ".join(FORMATS)
        )
    return name


def kv_bytes(name: str, table: dict[str, FormatBytes]) -> float:
    """Bytes per KV-cache element in format ``name`` (KV entries are activations)."""
    return table[name].activation
