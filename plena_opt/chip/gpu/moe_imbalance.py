"""Routing imbalance in a prefill-size fused-MoE layer: the grouped GEMMs' M-tile count.

A fused MoE sorts its token-expert pairs by expert and pads each expert's rows to a multiple of
the kernel's M tile (vLLM ``moe_align_block_size``; the Triton grid then runs one program per
(M tile, N tile), ``fused_moe_kernel``), so the GEMM work is the number of M tiles,
``sum_e ceil(n_e / BLOCK_M)``, not the pairs. The chip's ``moe_prefill`` curves are fitted on
the kernel tables' ``balanced`` rows (every expert ``T·k/E`` pairs); under skewed routing hot
experts fill whole tiles while cold ones pad theirs, and a step of the same pairs runs more (or,
where balanced routing pads every expert, fewer) tiles. The layer time is scaled by
``1 + share · (tiles / balanced tiles − 1)``, the share by kernel family (8/16-bit weights,
4-bit weight-only): equal counts give exactly 1.

Applied only where the prefill-range curve prices the layer (more than the chip's
``moe_prefill_min_tokens`` tokens a step); below it the fitted curves' active-expert count
carries routing (the tables' power-law / balanced ratio is 0.7–1.0 at decode sizes, from the
experts a step does not touch). Fitted and scored by ``validate.calibrate_moe_imbalance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

# The M tile (rows of one expert per GEMM program) of the kernel each prefill fused-MoE curve
# times (curve key -> BLOCK_M), at prefill token counts:
# * ``fp8_block`` 64 and ``int4`` 64: vLLM ``fused_moe.get_default_config`` (block-quantised fp8:
#   ``BLOCK_SIZE_M`` 64; ``int4_w4a16`` Triton kernel at M > 40: 64); the tables agree (of
#   16-256, 64 correlates best with their power-law / balanced ratios, 0.87-0.99).
# * ``bf16`` and ``fp8`` (per-tensor) 128: read off the tables (vLLM's tuned per-shape configs,
#   not its default 64): correlation 0.84-0.87 at 128 against 0.26-0.30 at 64 and 0.28-0.35 at
#   256 (H200 and B200 ``vllm_fused_moe`` rows above 1,024 tokens).
# * ``mxfp4`` 128: OpenAI's ``triton_kernels`` routing, ``block_m = max(16, min(next_pow2(T·k/E),
#   128))`` (the ``vllm_mxfp4_moe`` rows' kernel, ``matmul_ogs``).
# The TensorRT-LLM-gen ``fp4`` runner has none: its table rows (``vllm_flashinfer_trtllm_moe_fp4``)
# follow no tile count (correlation at most 0.32 for any tile of 8-256), so it is left as fitted.
MOE_BLOCK_M = {"bf16": 128, "fp8": 128, "fp8_block": 64, "int4": 64, "mxfp4": 128}
# vLLM's Marlin MoE (``fused_marlin_moe``): ``block_size_m`` is the first of 8, 16, 32, 48, 64
# with ``T·k/E / block_size_m < 0.9``, i.e. 64 at prefill sizes. Not in the tables.
MARLIN_BLOCK_M = 64
# The share of a prefill fused-MoE layer's time that scales with its M-tile count (the rest:
# routing sort, activation, top-k sum, weight reads), by kernel family. Fitted by
# ``python -m plena_opt.validate.calibrate_moe_imbalance`` on the H200 and B200 kernel tables
# (../shared/data/kernels/{h200,b200}_sxm_moe_vllm-0.19.0.csv.gz): the power_law_1.01 and
# power_law_1.2 rows over their balanced twins, EP 1, more than 1,024 tokens (tiles of the
# seed-0 ``deepstack.power_law`` draws, as pricing draws them); least squares on log ratios.
# MOE_TILE_TIME_SHARE = 0.453: 8/16-bit weights (bf16, fp8, block fp8; 5,760 ratios). Ratio
# MAPE 8.56 % (priced as balanced) -> 3.08 %; leave-one-GPU-out: fitted on H200 0.484, B200
# scored 7.93 -> 3.15 %; fitted on B200 0.422, H200 9.20 -> 3.27 %; leave-one-model-out (12
# layer shapes) 0.445-0.461, held out 2.0-3.7 %.
# W4A16_TILE_TIME_SHARE = 0.879: 4-bit weights x bf16 activations (Triton int4, ``matmul_ogs``
# MXFP4; applied to Marlin; 1,440 ratios). Each M-tile program dequantises its weight tiles
# whatever rows it holds, so a padded tile costs nearly a full one. MAPE 11.26 -> 1.86 %;
# fitted on H200 0.835, B200 10.77 -> 2.10 %; on B200 0.921, H200 11.73 -> 1.89 %;
# leave-one-model-out (13 shapes) 0.870-0.887, held out 0.5-2.7 % but gpt-oss-120b's 2880 x
# 2880 x top-4 of 128 (19.4 -> 9.9 %; 6.8 -> 4.5 % at 32 experts).
# benchmarks/README_serving.md, r17moeimb.
MOE_TILE_TIME_SHARE = 0.453
W4A16_TILE_TIME_SHARE = 0.879
W4A16_CURVES = ("int4", "mxfp4")  # prefill curves of weight-only 4-bit kernels


def tile_law(curve_key: str, marlin: bool) -> tuple[int, float] | None:
    """(M tile, tile time share) of the kernel behind prefill curve ``curve_key`` (None: its
    table rows follow no tile count)."""
    if marlin:
        return MARLIN_BLOCK_M, W4A16_TILE_TIME_SHARE
    if curve_key not in MOE_BLOCK_M:
        return None
    share = W4A16_TILE_TIME_SHARE if curve_key in W4A16_CURVES else MOE_TILE_TIME_SHARE
    return MOE_BLOCK_M[curve_key], share


def tile_ratio(counts: Sequence[int], block_m: int) -> float:
    """M tiles of per-expert pair ``counts`` over those of the same pairs spread evenly over the
    same experts (1.0 for equal counts)."""
    if type(counts) is not tuple:
        counts = tuple(int(c) for c in counts)
    return _tile_ratio(counts, int(block_m))


@lru_cache(maxsize=4096)
def _tile_ratio(counts: tuple[int, ...], block_m: int) -> float:
    n = len(counts)
    pairs = sum(counts)
    if n == 0 or pairs == 0:
        return 1.0
    q, r = divmod(pairs, n)
    even = (n - r) * -(-q // block_m) + r * -(-(q + 1) // block_m)
    return sum(-(-c // block_m) for c in counts) / even


def imbalance_factor(counts: Sequence[int] | None, law: tuple[int, float] | None) -> float:
    """``1 + share · (tile_ratio − 1)`` for ``law`` = (M tile, share); 1.0 without either."""
    if counts is None or law is None:
        return 1.0
    block_m, share = law
    return 1.0 + share * (tile_ratio(counts, block_m) - 1.0)
