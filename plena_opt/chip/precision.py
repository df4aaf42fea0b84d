"""Number formats for ``--precision`` / ``--kv-precision``: bytes per stored element per chip kind.

GPU formats follow the public format definitions: bf16 16 bits; fp8 (e4m3) 8 bits; fp4 = NVFP4
(e2m1 + one e4m3 scale per 16 elements, 4.5 bits); mxfp8 / mxfp4 = OCP Microscaling v1.0 (e8m0
scale per 32 elements: 8.25 / 4.25 bits); int4 = weight-only 4-bit integers with one bf16 scale
per 128 weights (4.125 bits) and bf16 activations (W4A16, computed at the bf16 rate).

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
