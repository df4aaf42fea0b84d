"""HBM bytes of a GPU linear layer (input quantisation + GEMM) and of a fused MoE layer: one count
for the kernel-table fits (``plena_opt.validate.calibrate``) and the pricing
(``plena_opt.chip.gpu.perf``).

A fitted bandwidth efficiency means something only on the byte count it was fitted on, so both
sides call these functions (issue 23, README_serving r16bytes). The kernel tables time vLLM
0.19's linear layer on a bf16 input, which for a W8A8 / W4A4 format is the input's quantisation
kernel(s) and then the GEMM (``GpuPerfModel.gemm`` prices that pair; no separate quantisation
kernel is priced). Per element, that layer moves:

* weights ``n·k`` at the format's stored width (values + scales);
* input ``m·k``: bf16 (2 B) read once per quantisation pass (``QUANT_PASSES``), the quantised
  input written and read back by the GEMM (its stored width, scales included); bf16 and
  weight-only (W4A16) formats: the bf16 input read once by the GEMM;
* output ``m·n`` in bf16 (``GEMM_OUTPUT_BYTES``) for every format (vLLM's and TensorRT-LLM's
  W8A8 / NVFP4 GEMMs write ``out_dtype`` = the activation dtype, bf16).

An engine that fuses the quantisation into the kernel before the GEMM (TensorRT-LLM: its
RMSNorm / activation kernels write the quantised input; ``fused_quant``) reads the quantised
input once and makes no bf16 pass of its own: the GEMM's input is its stored width.

Evidence (README_serving r16bytes): refitting each table's full-range curve with the input width
as a free choice, bf16 fits best at 2 B (its true count), per-tensor fp8 at 6-7 B (this count:
6), NVFP4 at 2.5-3.1 B (3.125); counted at the GEMM kernel's own widths (1 B, 0.5625 B) the
fits are 3-4 points worse than at these.
"""

from __future__ import annotations

from plena_opt.chip.precision import GPU_BYTES, WEIGHT_ONLY_COMPUTE, FormatBytes, is_weight_only
from plena_opt.errors import PlenaInputError

BF16_BYTES = 2.0
# The engines that fuse a quantised GEMM's input quantisation into the kernel before it
# (TensorRT-LLM's fused RMSNorm / activation quant kernels; ``fused_quant`` above): an estimate
# priced on one of them (``Workload.fused_input_quant``) and its serving step model agree.
FUSED_QUANT_ENGINES = frozenset({"trtllm"})
GEMM_OUTPUT_BYTES = 2.0  # bf16 GEMM output, every format (vLLM / TensorRT-LLM ``out_dtype``)
BLOCK_WEIGHT = 128 * 128  # fp8_block: one fp32 scale per 128 x 128 weight block (DeepSeek-V3)
BLOCK_GROUP = 128  # fp8_block: one fp32 scale per 128-element token group of the input
# bytes per element of a block-scaled fp8 GEMM's operands as stored: e4m3 + their fp32 scales
BLOCK_FP8 = FormatBytes(1.0 + 4.0 / BLOCK_WEIGHT, 1.0 + 4.0 / BLOCK_GROUP)
# bf16 passes over a linear layer's input before its GEMM, per quantised compute format (vLLM
# 0.19): per-tensor fp8 with dynamic activation scales reads it twice (``scaled_fp8_quant``
# without a scale: ``dynamic_scaled_fp8_quant``, a max reduction, then the quantisation);
# block fp8 (``per_token_group_quant_fp8``), NVFP4 (``scaled_fp4_quant``, a static global
# scale) and the MX formats (per-block scales) quantise in one pass.
QUANT_PASSES = {"fp8": 2, "fp8_block": 1, "fp4": 1, "mxfp8": 1, "mxfp4": 1}
# Per-tensor fp8 with STATIC activation scales (a calibrated ``input_scale`` per linear layer in
# the checkpoint, ``Workload.fp8_static_input``): ``scaled_fp8_quant`` with the scale given
# (``static_scaled_fp8_quant``) is the quantisation alone, one bf16 pass. vLLM loads NVIDIA
# ModelOpt ``quant_algo: FP8`` checkpoints with ``ModelOptFp8LinearMethod``, "static weight scale
# and activation scale": it registers an ``input_scale`` per layer and quantises with it
# (``ModelOptFp8Config.ACTIVATION_SCHEMES = ["static"]`` in the 0.5-0.10 releases;
# ``activation_quant_key=kFp8StaticTensorSym`` in 0.18, vllm/model_executor/layers/quantization/
# modelopt.py). The kernel tables ran dynamic scales: their fits keep ``QUANT_PASSES``.
STATIC_QUANT_PASSES = {"fp8": 1}


def gemm_operand_bytes(fmt: str, compute_format: str | None = None, fused_quant: bool = False,
                       static_input: bool = False) -> FormatBytes:  # fmt: skip
    """Bytes per weight element and per input element of a linear layer in format ``fmt``
    (a ``precision.GPU_BYTES`` format or ``fp8_block``) computed at ``compute_format`` (default
    ``fmt``; ``bf16`` for a narrower ``fmt``: weight-only, bf16 input). The input figure holds
    every pass the layer makes over it (module docstring); ``fused_quant``: the quantisation is
    fused into the kernel before (the GEMM reads the stored input, nothing else);
    ``static_input``: the checkpoint carries static activation scales (``STATIC_QUANT_PASSES``;
    the other formats' pass counts do not depend on it). A quantised format with no known
    quantisation path is refused naming ``precision``."""
    compute = compute_format or fmt
    if fmt == WEIGHT_ONLY_COMPUTE or is_weight_only(fmt, compute):
        return FormatBytes(GPU_BYTES[fmt].weight, BF16_BYTES)
    if fmt not in QUANT_PASSES:
        raise PlenaInputError(
            "precision", f"no input quantisation path is known for {fmt} GEMMs at {compute} "
            f"(known: {', '.join(QUANT_PASSES)})"
        )  # fmt: skip
    stored = BLOCK_FP8 if fmt == "fp8_block" else GPU_BYTES[fmt]
    if fused_quant:
        return stored
    passes = STATIC_QUANT_PASSES.get(fmt, QUANT_PASSES[fmt]) if static_input else QUANT_PASSES[fmt]
    return FormatBytes(stored.weight, passes * BF16_BYTES + 2 * stored.activation)


def gemm_bytes(m, n, k, weight_bytes: float, input_bytes: float, groups=1):
    """(read, written) bytes of ``groups`` GEMMs ``[m/groups, k] × [k, n]`` sharing one launch
    (``m`` rows in all): each group's weights, the input (``input_bytes`` per element, from
    ``gemm_operand_bytes``: its quantisation included), the bf16 output. Scalars or arrays."""
    reads = groups * n * k * weight_bytes + m * k * input_bytes
    return reads, m * n * GEMM_OUTPUT_BYTES


def fused_moe_bytes(tokens, pairs, active, h, f, weight_bytes: float, input_bytes: float):
    """(read, written) bytes of a fused MoE layer (gate/up and down GEMMs, activation, top-k
    sum) of ``tokens`` tokens, ``pairs`` token-expert pairs, ``active`` experts hit, hidden
    ``h``, per-device expert width ``f``: the active experts' gate/up/down weights and the
    tokens at ``gemm_operand_bytes`` widths; the intermediates (2·f per pair read, f per pair
    written) and the output (h per token) in bf16 (``GEMM_OUTPUT_BYTES``). Scalars or arrays."""
    out = GEMM_OUTPUT_BYTES
    reads = active * 3 * h * f * weight_bytes + tokens * h * input_bytes + 2 * pairs * f * out
    return reads, tokens * h * out + pairs * f * out
