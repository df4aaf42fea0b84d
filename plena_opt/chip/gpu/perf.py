"""GPU roofline kernel model: seconds of the kernels a transformer layer launches.

Every method returns a ``KernelTime``: ``seconds`` (float or an array over KV lengths), the FLOPs
and HBM bytes it moves, and whether the compute side dominates. Kernel time is the fitted curve
``t0 + (c^p + m^p)^(1/p)`` with ``c`` = FLOPs / (peak · compute efficiency) and ``m`` = bytes /
(HBM bandwidth · bandwidth efficiency) (see ``profile.GemmCurve``). Shapes: ``m, n, k`` GEMM
dims, ``b`` sequences, ``H``/``KV`` heads on this device, ``hd`` head dim, ``s`` query tokens,
``kv`` attended KV length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plena_opt.chip.gpu.kernel_bytes import fused_moe_bytes, gemm_bytes, gemm_operand_bytes
from plena_opt.chip.gpu.moe_imbalance import imbalance_factor, tile_law
from plena_opt.chip.gpu.profile import AttentionCurve, GemmCurve, GpuChipProfile
from plena_opt.chip.precision import W4A16_DEQUANT_SLOWDOWN, FormatBytes, is_weight_only
from plena_opt.errors import PlenaInputError


@dataclass(frozen=True)
class KernelTime:
    """One kernel (or a fused group): seconds, FLOPs, bytes read + written, compute-bound?"""

    seconds: np.ndarray | float
    flops: float
    read_bytes: np.ndarray | float
    write_bytes: np.ndarray | float
    compute_bound: np.ndarray | bool


def _mean(x) -> float:
    """``float(np.mean(x))``: for a 1-d float64 array, its ``sum`` (the same pairwise
    reduction ``np.mean`` runs) over its length, without ``np.mean``'s Python-level dispatch."""
    if type(x) is np.ndarray and x.ndim == 1 and x.dtype == np.float64 and x.size:
        return float(x.sum() / x.size)
    return float(np.mean(x))


def _curve(flops, nbytes, peak: float, bw: float, c: GemmCurve | AttentionCurve):
    """(seconds, compute-bound?) of the fitted curve (scalars or arrays)."""
    tc = flops / (peak * c.compute_efficiency.value)
    tm = nbytes / (bw * c.bandwidth_efficiency.value)
    p = c.blend.value
    t = c.fixed_seconds.value + (tc**p + tm**p) ** (1.0 / p)
    return t, tc >= tm


# Why Marlin W4A16 experts take the compute format's fused-MoE curve (``fused_moe(marlin=True)``):
# the kernel tables' W4A16 MXFP4 rows (``vllm_mxfp4_moe``: AIConfigurator times vLLM's FusedMoE
# module with ``Mxfp4Config`` and no backend variable, i.e. vLLM's default SM90 backend, OpenAI's
# Triton ``matmul_ogs`` where ``triton_kernels`` is installed; fitted as ``moe.mxfp4``: a 57 us
# floor) are not the kernels a Marlin deployment runs; a vLLM pull request measured that Triton
# default 35 % slower end to end than Marlin for gpt-oss-120b on SM90 (``vllm bench latency``
# 1.58 s vs 1.17 s, vllm-project/vllm#27523). Marlin's MoE (``fused_marlin_moe``) is the kernel
# chain of vLLM's ``fused_experts`` (align/sort, gate-up GEMM, activation, down GEMM, top-k sum)
# with GEMMs that dequantise 4-bit weights in registers for the bf16 tensor cores, and no Marlin
# MoE table ships (``vllm_marlin_int4_moe`` rows are ``fused_experts`` with an ``int4_w4a16``
# config: the Triton GPTQ/AWQ kernel). So it is priced by the chip's fused-MoE curve of the
# compute format (bf16 ``vllm_fused_moe``, fitted on the same H200 table) reading the weight
# format's bytes at the weight-only rate. Nothing is fitted for it (benchmarks/README_serving.md:
# the shipped H100 gpt-oss vLLM rows' TPOT MAPE 23.8 -> 11.9 %).
MARLIN_MOE_NOTE = "W4A16 experts on vLLM's Marlin MoE: the compute format's fused-MoE curve"

# The compute ceiling of Marlin's tensor-core instructions on each GPU it runs on (chip profile
# name -> fraction of the chip's dense peak). Marlin (dense and MoE: ``moe_wna16_marlin_gemm``)
# issues the warp-level ``mma.sync`` instructions of Ampere and has no ``wgmma`` path, and on
# Hopper "without [wgmma] i.e. using mma instructions you can expect to achieve at best ~75% of
# peak" (vllm-project/vllm#7174, the Machete pull request by vLLM's kernel authors, citing
# ThunderKittens and Luo et al., arXiv:2402.13499). The bf16 fused-MoE curve a Marlin layer is
# priced by (``MARLIN_MOE_NOTE``) was fitted on Triton kernels that issue ``wgmma``; a Marlin
# layer keeps that curve's efficiency against the lower ceiling (the compute side x 0.75; the
# memory side unchanged). A published bound, not fitted (benchmarks/README_serving.md, r13oss:
# the 8k-prompt gpt-oss-120b H100 vLLM TTFT bias -24.4 -> -17.8 %). Marlin is a CUDA kernel:
# a chip without an entry (AMD, or a GPU whose ceiling is not published here) is refused.
MMA_SYNC_PEAK_FRACTION = {"h100-sxm": 0.75, "h200-sxm": 0.75}


def marlin_peak_fraction(chip_name: str) -> float:
    """``MMA_SYNC_PEAK_FRACTION`` of chip ``chip_name``; refused naming ``marlin_moe`` where
    Marlin's ceiling on that chip is not known."""
    if chip_name not in MMA_SYNC_PEAK_FRACTION:
        raise PlenaInputError(
            "marlin_moe",
            f"marlin_moe: no Marlin (mma.sync) compute ceiling is known for {chip_name}; "
            f"known: {', '.join(sorted(MMA_SYNC_PEAK_FRACTION))}",
        )  # fmt: skip
    return MMA_SYNC_PEAK_FRACTION[chip_name]


def mxfp8_moe_peak(chip: GpuChipProfile, compute_format: str) -> float:
    """The dense FLOP/s a 4-bit expert GEMM with MXFP8 activations runs at on ``chip``: its fp8
    peak (``MXFP8_MOE_NOTE``); refused naming ``mxfp8_moe`` where the experts do not run on
    4-bit tensor cores or the chip has no fp8 peak."""
    return _activation_moe_peak(chip, compute_format, "fp8", "mxfp8_moe")


def bf16_moe_peak(chip: GpuChipProfile, compute_format: str) -> float:
    """The dense FLOP/s a 4-bit expert GEMM with bf16 activations runs at on ``chip``: its bf16
    peak (``BF16_MOE_NOTE``); refused naming ``bf16_moe`` where the experts do not run on 4-bit
    tensor cores or the chip has no bf16 peak."""
    return _activation_moe_peak(chip, compute_format, "bf16", "bf16_moe")


def _activation_moe_peak(chip: GpuChipProfile, compute_format: str, peak: str, field: str) -> float:
    """``chip``'s ``peak`` FLOP/s for 4-bit experts whose activations set the tensor-core rate;
    refused naming ``field`` unless the experts run on fp4 tensor cores and the peak exists."""
    if compute_format != "fp4" or peak not in chip.peak_flops:
        raise PlenaInputError(
            field,
            f"{field}: {peak} activations pair with 4-bit experts on fp4 tensor cores; "
            f"{chip.name} runs these experts as {compute_format}",
        )  # fmt: skip
    return chip.peak_flops[peak].value


# Why block-scaled fp8 experts on the TensorRT-LLM-gen MoE take the chip's ``moe.fp4`` curve's
# memory side in the decode range (``fused_moe(trtllm_gen=True)``): the InferenceX DeepSeek-R1
# fp8 recipes on B200 run the experts on TensorRT-LLM's generated MoE kernels, SGLang
# ``--moe-runner-backend flashinfer_trtllm --quantization fp8`` (benchmarks/dsr1_fp8_b200.sh:
# FlashInfer ``trtllm_fp8_block_scale_moe``) and TensorRT-LLM ``moe_config.backend: TRTLLM``
# (dsr1_fp8_b200_trt.sh; DEEPGEMM only at 1k/1k and 1k/8k with 256+ clients, not separated
# here), while the chip's ``moe.fp8_block`` curve was fitted on vLLM's Triton ``fused_moe``
# (``vllm_fused_moe fp8_block`` rows: 68.5 % of the HBM bandwidth, a 37 us floor). No table
# times the generated fp8 kernel; its nvfp4 sibling of the same runner is the table's
# ``vllm_flashinfer_trtllm_moe_fp4`` rows (``moe.fp4``: 100 % of the bandwidth, a 21 us floor).
# At decode token counts the layer streams expert weights, so the runner's bandwidth, floor and
# per-expert cost (``moe.fp4``) price it at the fp8 bytes; the compute side stays the measured
# fp8 block-scale rate (``moe.fp8_block``), and prefill-range token counts keep the
# ``moe_prefill`` fits. Nothing fitted (benchmarks/README_serving.md, r11moe).
TRTLLM_GEN_MOE_NOTE = "block-scaled fp8 experts on TensorRT-LLM-gen: moe.fp4's memory side"


# Why 4-bit experts with MXFP8 activations compute at the chip's fp8 rate
# (``fused_moe(mxfp8=True)``): Blackwell's tensor cores run a block-scaled MXFP4 x MXFP8 product
# as ``tcgen05.mma kind::mxf8f6f4`` at the FP8 rate ("2x Hopper Fp8 Tensor Core"), where only
# ``kind::mxf4`` / ``mxf4nvf4`` (both operands 4-bit) run at the FP4 rate ("4x"; CUTLASS,
# "Blackwell SM100 GEMMs", docs.nvidia.com/cutlass/media/docs/cpp/blackwell_functionality.html).
# gpt-oss's MXFP4 experts run so on B200 in both InferenceX engines: TensorRT-LLM's default
# Blackwell MoE backend TRTLLM takes MXFP8 activations x MXFP4 weights (TensorRT-LLM "Deployment
# Guide for GPT-OSS", MoE backend support matrix; gptoss_fp4_b200_trt.sh sets
# ``moe_config.backend: TRTLLM``), and gptoss_fp4_b200.sh exports
# ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` (FlashInfer's TRT-LLM-gen MXFP4 x MXFP8 MoE). Those
# layers keep the chip's ``moe.fp4`` curve (the same generated runner, measured at NVFP4 x NVFP4:
# ``vllm_flashinfer_trtllm_moe_fp4``) with its compute side at the chip's fp8 peak; the memory
# side is unchanged. A published rate, not fitted (benchmarks/README_serving.md, r16oss8k:
# gpt-oss-120b B200 TRT-LLM 8k-prompt TTFT bias -25.0 -> -14.0 %).
MXFP8_MOE_NOTE = "4-bit experts x MXFP8 activations (kind::mxf8f6f4): moe.fp4 at the fp8 rate"

# Why 4-bit experts with bf16 activations compute at the chip's bf16 rate
# (``fused_moe(bf16=True)``): Blackwell has no bf16 x fp4 tensor-core product (``tcgen05.mma``
# kinds: ``f16`` for bf16 x bf16, ``mxf8f6f4`` for 8/6/4-bit pairs; CUTLASS, "Blackwell SM100
# GEMMs"), so a kernel that keeps the activations in bf16 widens the 4-bit weights to bf16 and
# multiplies at the bf16 rate. vLLM 0.34.0 runs gpt-oss's MXFP4 experts so by default on SM100
# (``FLASHINFER_TRTLLM_MXFP4_BF16``, ``chip.gpu.moe_kernels``); SGLang with
# ``--flashinfer-mxfp4-moe-precision bf16``. The layer keeps the chip's ``moe.fp4`` curve (the
# same generated runner) with its compute side at the bf16 peak; the memory side is unchanged
# (the weights stay 4-bit in HBM). A published rate, not fitted; no shipped row runs this path
# (the InferenceX vLLM B200 recipe exports MXFP8).
BF16_MOE_NOTE = "4-bit experts x bf16 activations (kind::f16): moe.fp4 at the bf16 rate"


class GpuPerfModel:
    """Kernel times on one GPU for a weight/activation format and a KV-cache byte width."""

    def __init__(
        self, chip: GpuChipProfile, precision: str, weight_bytes: float, act_bytes: float,
        kv_bytes: float, bandwidth_bytes_per_s: float | None = None, fused_quant: bool = False,
        static_input: bool = False,
    ) -> None:  # fmt: skip
        self.chip = chip
        self.precision = precision
        self.compute_format = chip.compute_format(precision)
        self.peak = chip.peak_flops[self.compute_format].value
        # weight-only (W4A16) GEMMs dequantise on the way to the tensor cores
        self.weight_only = is_weight_only(precision, self.compute_format)
        if self.weight_only:
            self.peak /= W4A16_DEQUANT_SLOWDOWN
        self.attn_peak = chip.peak_flops["bf16"].value  # attention runs in bf16
        self.bw = bandwidth_bytes_per_s or chip.hbm.bandwidth_bytes_per_s.value
        self.gemm_curve = chip.gemm[self.compute_format]
        # memory-bound row counts: the decode-range fit where the chip has one
        self.gemm_decode_curve = chip.gemm_decode.get(self.compute_format, self.gemm_curve)
        self.gemm_decode_max = chip.gemm_decode_max_tokens
        self.wb, self.ab, self.kvb = weight_bytes, act_bytes, kv_bytes
        # a linear layer's weight and input bytes per element, as the kernel-table fits count
        # them (``kernel_bytes.gemm_operand_bytes``: the input's quantisation passes included,
        # unless ``fused_quant``: the engine quantises inside the kernel before the GEMM; one
        # pass for per-tensor fp8 with the checkpoint's static activation scales, ``static_input``)
        self.fused_quant, self.static_input = fused_quant, static_input
        fb = gemm_operand_bytes(precision, self.compute_format, fused_quant, static_input)
        self.gemm_w, self.gemm_in = fb.weight, fb.activation
        self.kernel_s = chip.overheads.kernel_seconds.value
        self.step_s = chip.overheads.step_seconds.value
        self.ew_eff = chip.overheads.elementwise_bandwidth_efficiency.value

    def block_scaled(self) -> GpuPerfModel:
        """This model with its GEMMs on the chip's ``<format>_block`` curves (weights with
        128x128 block scales); refused naming the curve where the chip has none."""
        from copy import copy

        key = self.compute_format + "_block"
        if key not in self.chip.gemm:
            raise PlenaInputError(
                "precision", f"{self.chip.name} has no gemm.{key} curve (block-scaled "
                f"{self.compute_format} GEMMs are priced from a fitted kernel table)"
            )  # fmt: skip
        out = copy(self)
        fb = gemm_operand_bytes(key, fused_quant=self.fused_quant)  # the block scales too
        out.gemm_w, out.gemm_in = fb.weight, fb.activation
        out.gemm_curve = self.chip.gemm[key]
        out.gemm_decode_curve = self.chip.gemm_decode.get(key, out.gemm_curve)
        return out

    def gemm(self, m: int, n: int, k: int) -> KernelTime:
        """``[m,k] × [k,n]`` with weights in the model format; activations in/out."""
        if m <= 0 or n <= 0 or k <= 0:
            return KernelTime(0.0, 0.0, 0.0, 0.0, False)
        flops = 2.0 * m * n * k
        reads, writes = gemm_bytes(m, n, k, self.gemm_w, self.gemm_in)
        t, cb = _curve(flops, reads + writes, self.peak, self.bw, self._gemm_curve(m))
        return KernelTime(t, flops, reads, writes, bool(cb))

    def _gemm_curve(self, m: float) -> GemmCurve:
        """The GEMM curve for ``m`` rows: the decode-range fit up to ``gemm_decode_max_tokens``."""
        return self.gemm_decode_curve if m <= self.gemm_decode_max else self.gemm_curve

    def grouped_gemm(self, tokens_per_group: float, groups: int, n: int, k: int) -> KernelTime:
        """A fused MoE GEMM over ``groups`` active experts of ``tokens_per_group`` tokens each:
        one launch, all active experts' weights read once. Its regime (the decode-range or the
        full-range curve) is set by the rows each expert's weights meet, ``tokens_per_group``:
        every expert is its own weight stream (arithmetic intensity 2·rows/bytes per element),
        however many experts share the launch."""
        if groups <= 0 or tokens_per_group <= 0:
            return KernelTime(0.0, 0.0, 0.0, 0.0, False)
        m = tokens_per_group * groups
        flops = 2.0 * m * n * k
        reads, writes = gemm_bytes(m, n, k, self.gemm_w, self.gemm_in, groups)
        curve = self._gemm_curve(tokens_per_group)
        t, cb = _curve(flops, reads + writes, self.peak, self.bw, curve)
        return KernelTime(t, flops, reads, writes, bool(cb))

    def fused_moe(
        self,
        tokens: int,
        pairs: float,
        active: float,
        h: int,
        f: int,
        block_scaled: bool = False,
        marlin: bool = False,
        trtllm_gen: bool = False,
        mxfp8: bool = False,
        bf16: bool = False,
        expert_counts: tuple[int, ...] | None = None,
    ) -> KernelTime:
        """vLLM's fused MoE (sort, gate/up GEMM, activation, down GEMM, top-k sum) as one curve
        fitted on the measured fused-MoE layer; without a fit, two grouped GEMMs.
        ``block_scaled``: the experts carry 128x128 block scales (DeepSeek-V3's fp8 checkpoint);
        the chip's ``<format>_block`` curve is used where it has one. Above
        ``moe_prefill_min_tokens`` tokens the chip's ``moe_prefill`` curves apply. ``marlin``:
        W4A16 experts run vLLM's Marlin MoE (``VLLM_MXFP4_USE_MARLIN=1``), priced by the
        compute format's fused-MoE curve at the weight format's bytes (``MARLIN_MOE_NOTE``),
        its compute side under Marlin's ``mma.sync`` ceiling (``MMA_SYNC_PEAK_FRACTION``).
        ``trtllm_gen``: block-scaled fp8 experts on TensorRT-LLM's generated MoE kernels: in the
        decode range the ``fp4`` curve's memory side with the ``fp8_block`` compute efficiency
        (``TRTLLM_GEN_MOE_NOTE``; no change on a chip without both curves). ``mxfp8``: 4-bit
        experts multiplied with MXFP8 activations (``kind::mxf8f6f4``): the compute side at the
        chip's fp8 peak instead of the fp4 one (``MXFP8_MOE_NOTE``). ``bf16``: 4-bit experts
        multiplied with bf16 activations: the compute side at the bf16 peak (``BF16_MOE_NOTE``).
        ``expert_counts``: the busiest rank's pairs per local expert; on the prefill curves the
        time is scaled by their M-tile count over balanced routing's (``moe_imbalance``)."""
        curves = self.chip.moe
        if tokens > self.chip.moe_prefill_min_tokens and self.chip.moe_prefill:
            curves = self.chip.moe_prefill  # prefill token counts: the prefill-range fit
        key = self.compute_format
        if self.weight_only and not marlin and self.precision in curves:  # W4A16: its own curve
            key = self.precision
        if block_scaled and self.compute_format + "_block" in curves:
            key = self.compute_format + "_block"
        curve = curves.get(key)
        if block_scaled:
            gen = curves.get("fp4") if trtllm_gen and curves is self.chip.moe else None
            if gen is not None and curve is not None:
                curve = gen.model_copy(update={"compute_efficiency": curve.compute_efficiency})
        if curve is None:
            up = self.grouped_gemm(pairs / active, int(round(active)), 2 * f, h)
            down = self.grouped_gemm(pairs / active, int(round(active)), h, f)
            t = up.seconds + down.seconds + self.kernel_s * 3
            return KernelTime(t, up.flops + down.flops, up.read_bytes + down.read_bytes,
                              up.write_bytes + down.write_bytes, up.compute_bound)  # fmt: skip
        flops = 2.0 * pairs * 3 * h * f
        fb = FormatBytes(self.gemm_w, self.gemm_in)
        if block_scaled and self.compute_format == "fp8":  # block-scaled weights and input
            fb = gemm_operand_bytes("fp8_block", fused_quant=self.fused_quant)
        reads, writes = fused_moe_bytes(tokens, pairs, active, h, f, fb.weight, fb.activation)
        peak = self.peak * marlin_peak_fraction(self.chip.name) if marlin else self.peak
        if mxfp8:
            peak = mxfp8_moe_peak(self.chip, self.compute_format)
        if bf16:
            peak = bf16_moe_peak(self.chip, self.compute_format)
        t, cb = _curve(flops, reads + writes, peak, self.bw, curve)
        t += curve.seconds_per_active_expert.value * active
        if curve.seconds_per_pair is not None:
            t += curve.seconds_per_pair.value * pairs
        if curves is self.chip.moe_prefill and expert_counts is not None and not trtllm_gen:
            t *= imbalance_factor(expert_counts, tile_law(key, marlin))
        return KernelTime(t, flops, reads, writes, bool(cb))

    def attention_decode(
        self, b: int, H: int, KV: int, hd: int, kv: np.ndarray, *, latent: int = 0,
        past_window: np.ndarray | bool = False,
    ) -> KernelTime:  # fmt: skip
        """One decode step of paged attention: read every sequence's K and V. ``latent`` > 0:
        MLA in absorbed form, one shared latent of ``latent`` elements per token (K = V), read
        once for all ``H`` heads (``KV`` = 1). ``past_window`` (per KV length): a sliding
        layer whose KV is longer than its window (``kv`` is then the window's keys); the
        chip's ``attention_decode.window_seconds`` is added there where the chip has it."""
        c = self.chip.attention_decode
        if latent:
            kv_read = 1.0 * b * latent * self.kvb * kv
            hd = latent
        else:
            kv_read = 2.0 * b * KV * hd * self.kvb * kv
        io = 2.0 * b * H * hd * self.ab
        tm = (kv_read + io) / (self.bw * c.bandwidth_efficiency.value)
        ts = (c.seconds_per_sequence_head.value * H + c.seconds_per_sequence_kv_head.value * KV) * b
        p = c.blend.value
        t = c.fixed_seconds.value + (ts**p + tm**p) ** (1.0 / p)
        if c.window_seconds is not None:
            t = t + c.window_seconds.value * np.asarray(past_window, dtype=float)
        flops = _mean(4.0 * b * H * hd * kv)
        return KernelTime(t, flops, kv_read + io / 2, io / 2, ts >= tm)

    def attention_prefill(
        self, b: int, H: int, KV: int, hd: int, s: int, kv: np.ndarray
    ) -> KernelTime:
        """Causal prefill attention of ``s`` new tokens over ``kv`` keys (kv ≥ s)."""
        past = np.maximum(kv - s, 0)
        flops = 4.0 * b * H * hd * s * (past + (s + 1) / 2.0)
        return self._prefill_kernel(b, H, KV, hd, s, kv, flops)

    def attention_prefill_topk(
        self, b: int, H: int, KV: int, hd: int, s: int, kv: np.ndarray, topk: int
    ) -> KernelTime:
        """Prefill attention of ``s`` new tokens over ``kv`` cached keys where each query attends
        at most ``topk`` of the keys before it (DeepSeek sparse attention): query ``j`` (1-based
        position) attends ``min(j, topk)`` keys."""

        def upto(n: np.ndarray) -> np.ndarray:  # sum of min(j, topk) for j = 1..n
            full = np.minimum(n, topk)
            return full * (full + 1) / 2.0 + np.maximum(n - topk, 0) * topk

        kv = np.asarray(kv, dtype=float)
        keys = upto(kv) - upto(np.maximum(kv - s, 0))
        return self.attention_prefill_keys(b, H, KV, hd, s, kv, keys)

    def attention_prefill_keys(
        self, b: int, H: int, KV: int, hd: int, s: int, kv: np.ndarray, keys: np.ndarray
    ) -> KernelTime:
        """Prefill attention of ``s`` new tokens that attend ``keys`` (query, key) pairs in all
        and read ``kv`` cached keys (a sliding window, an attention chunk or top-k selection:
        the caller counts the pairs)."""
        return self._prefill_kernel(b, H, KV, hd, s, kv, 4.0 * b * H * hd * keys)

    def _prefill_kernel(
        self, b: int, H: int, KV: int, hd: int, s: int, kv: np.ndarray, flops: np.ndarray
    ) -> KernelTime:
        """The prefill attention curve at ``flops``: ``s`` queries read with ``kv`` cached keys
        (K and V at the activation width, bytes) and ``s`` outputs written."""
        reads = b * (s * H + 2 * KV * kv) * hd * self.ab
        writes = b * s * H * hd * self.ab
        t, cb = _curve(flops, reads + writes, self.attn_peak, self.bw, self.chip.attention_prefill)
        return KernelTime(t, _mean(flops), reads, writes, cb)

    def elementwise(self, read_bytes: float, write_bytes: float) -> KernelTime:
        """A memory-streaming kernel (norm, RoPE, activation, residual, KV-cache write)."""
        t = self.kernel_s + (read_bytes + write_bytes) / (self.bw * self.ew_eff)
        return KernelTime(t, 0.0, read_bytes, write_bytes, False)
