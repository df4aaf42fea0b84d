"""Scheduler settings the InferenceX launch recipes ran a row with, beyond the engine defaults
(``validate --measurements`` prices a row as it was deployed; ``serving_rows.resolve``).

An InferenceX row is one whose id starts with its dump date (``2026_04_06_…``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from plena_opt.serving.kernel_scale import ARCHITECTURE

if TYPE_CHECKING:
    from plena_opt.validate.serving_rows import Deployment, ServingRow

INFERENCEX_ID = re.compile(r"^\d{4}_\d\d_\d\d_")
DEEPSEEK_R1 = frozenset({"deepseek-v3"})  # DeepSeek-R1's catalog model (ARCHITECTURE_TWINS)
# The chips whose InferenceX vLLM gpt-oss recipes export ``VLLM_MXFP4_USE_MARLIN=1``
# (gptoss_fp4_h100.sh, gptoss_fp4_h200.sh): only there do weight-only experts run Marlin. The AMD
# ones (gptoss_fp4_mi300x.sh, gptoss_fp4_mi325x.sh) run vLLM's ROCm backends
# (``VLLM_ROCM_USE_AITER=1``); Marlin is a CUDA kernel (``chip.gpu.perf.MMA_SYNC_PEAK_FRACTION``).
MARLIN_RECIPE_CHIPS = frozenset({"h100-sxm", "h200-sxm"})
# The recipes export it only from 4e52ed4c6 (2026-01-02, PR #327 "Update vLLM version to v0.13.0
# ... Fix H100/H200 perf regression": gptoss_fp4_h100_docker.sh, gptoss_fp4_h100_slurm.sh,
# gptoss_fp4_h200_slurm.sh; every later version keeps it through 0ee5ff342 of 2026-04-05). A row
# of an MXFP4 checkpoint measured before that day ran vLLM's own default backend
# (``chip.gpu.moe_kernels.default_moe_kernel``). Other weight-only experts (no recipe flag) keep
# the rule above.
MARLIN_RECIPE_SINCE = "2026-01-02"


def marlin_recipe(chip: str, fmt: str, inferencex_vllm: bool, mxfp4: bool = False,
                  day: str = "") -> bool:  # fmt: skip
    """Whether an InferenceX vLLM row ran its experts on Marlin: a ``MARLIN_RECIPE_CHIPS`` chip
    running ``fmt`` weight-only (W4A16: no tensor cores of that width); for an MXFP4 checkpoint
    (``mxfp4``) only when measured (``day``, ISO date; "" undated) from ``MARLIN_RECIPE_SINCE``."""
    from plena_opt.chip import load_chip
    from plena_opt.chip.precision import is_weight_only

    if not inferencex_vllm or chip not in MARLIN_RECIPE_CHIPS:
        return False
    if mxfp4 and day and day < MARLIN_RECIPE_SINCE:
        return False
    return is_weight_only(fmt, load_chip(chip).formats[fmt])  # type: ignore[union-attr]


# The InferenceX TensorRT-LLM recipes of Llama-3.1-70B (benchmarks/70b_fp8_b200_trt_slurm.sh,
# 70b_fp4_b200_trt_slurm.sh, 70b_fp8_h200_trt_slurm.sh) write ``batch_wait_timeout_iters: 20``
# and ``batch_wait_max_tokens_ratio: 0.9`` when ISL = OSL = 1024 and TP < 8 ("will improve the
# performance, by default they are all zeros"): waiting prompts are held back up to 20 steps
# (``serving.steady.batch_wait_steps``). Not fitted; on the shipped file those 72 B200 rows were
# under-predicted 2.5-3x (TP 1-4; the TP 8 rows, without the setting, within ~10 %).
TRTLLM_BATCH_WAIT = {("llama-3.1-70b", 1024, 1024): (20, 0.9)}
TRTLLM_BATCH_WAIT_SYSTEMS = frozenset({"b200_sxm", "h200_sxm"})  # the recipes' systems
TRTLLM_BATCH_WAIT_MAX_TP = 7  # ``${TP} -lt 8``


def trtllm_batch_wait(row: ServingRow, system: str, d: Deployment) -> tuple[int, float] | None:
    """(``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``) an InferenceX TensorRT-LLM
    recipe ran ``row`` with (``TRTLLM_BATCH_WAIT``), else None (the engine default: off). The
    DeepSeek-R1 FP8 recipe's DELAY_BATCHING is not applied (benchmarks/README_serving.md,
    r9hiconc)."""
    if d.engine != "trtllm" or not INFERENCEX_ID.match(row.id) or d.tp > TRTLLM_BATCH_WAIT_MAX_TP:
        return None
    if system not in TRTLLM_BATCH_WAIT_SYSTEMS:
        return None
    return TRTLLM_BATCH_WAIT.get((d.model, d.input_len, d.output_len))


# vLLM async (overlap) scheduling (``serving.vllm_async``): the InferenceX vLLM recipes of
# Llama-3.1-70B and gpt-oss-120b pass ``async-scheduling: true`` / ``--async-scheduling`` until
# their image moved to a vLLM that runs it by default, then drop the flag: NVIDIA (70b_*.sh,
# gptoss_fp4_{h100,h200,b200}*.sh) until d2c2acb19 (2026-02-25, image v0.13.0 -> v0.15.1,
# "Remove deprecated async-scheduling flag (default since v0.14.0)"); gptoss_fp4_mi300x/mi325x
# until 25bda3d71 (2026-01-21, v0.14.0 ROCm); gptoss_fp4_mi355x until 3450ced07 (2026-02-26,
# v0.16.0). Every vLLM recipe in the repository on 2025-10-28, 2025-12-10 and 2026-01-20 passes
# it; the Llama-3.1-70B ones were removed on 2025-10-29. A row of those models measured before
# its chip's date ran the flag; later rows, and other models, run their version's default.
VLLM_ASYNC_FLAG_MODELS = frozenset({"gpt-oss-120b", "llama-3.1-70b"})
VLLM_ASYNC_FLAG_UNTIL = {"mi300x": "2026-01-21", "mi325x": "2026-01-21", "mi355x": "2026-02-26"}
VLLM_ASYNC_FLAG_UNTIL_NVIDIA = "2026-02-25"
# an image tag naming the vLLM release (the InferenceX images: vllm/vllm-openai:v0.11.2)
VLLM_IMAGE = re.compile(r"^(?:docker\.io/)?vllm/vllm-openai(?:-rocm)?:(v?[0-9][^\s]*)$")


def inferencex_async_flag(row: ServingRow, chip: str, model: str) -> bool:
    """True when ``row``'s InferenceX vLLM recipe passed ``--async-scheduling`` (the dates
    above, by the row's ``measured_on``, else its id's dump date, which is no earlier)."""
    if not INFERENCEX_ID.match(row.id) or model not in VLLM_ASYNC_FLAG_MODELS:
        return False
    day = row.get("measured_on") or row.id[:10].replace("_", "-")
    return day < VLLM_ASYNC_FLAG_UNTIL.get(chip, VLLM_ASYNC_FLAG_UNTIL_NVIDIA)


# The vLLM 0.14.0 wheel's files are dated 2026-01-18 (PyPI; v0.14.0 release notes, Jan 2026):
# a run measured before it ran 0.13 or older, whose async-scheduling default is off.
VLLM_ASYNC_DEFAULT_RELEASED = "2026-01-18"


def _vllm_release(row: ServingRow) -> tuple[str | None, str]:
    """(the vLLM release ``row`` records: ``backend_version``, else an ``engine_image`` tag naming
    it; None: not recorded), the day it was measured (``measured_on``, else an InferenceX id's
    dump date; '' undated)."""
    version = row.get("backend_version") or None
    if version is None and (m := VLLM_IMAGE.match(row.get("engine_image"))):
        version = m[1]
    day = row.get("measured_on") or (row.id[:10].replace("_", "-") if INFERENCEX_ID.match(row.id)
                                     else "")  # fmt: skip
    return version, day


def vllm_async_scheduling(row: ServingRow, chip: str, model: str, pp: int) -> bool | None:
    """Whether the vLLM server of ``row`` ran async scheduling (None: not vLLM): its recipe's
    flag, else its version's default (``backend_version``, else an ``engine_image`` tag naming
    the release). A row that records no version runs the default of a version older than 0.14.0
    when it was measured before that release; otherwise (measured later, or undated) the default
    of the version the product's builders model (``serving.engines.VERSIONS``: on), which is what
    ``estimate`` prices. Raises ``PlenaInputError`` naming ``backend_version`` when the version
    is not a vLLM release, or refuses the flag with ``pp`` stages."""
    from plena_opt.serving.engines import VERSIONS
    from plena_opt.serving.vllm_async import vllm_async

    if row.get("backend") != "vllm":
        return None
    flag = inferencex_async_flag(row, chip, model)
    version, day = _vllm_release(row)
    if version is None and not flag:
        if day and day < VLLM_ASYNC_DEFAULT_RELEASED:
            return False
        version = VERSIONS["vllm"]  # not recorded: the modelled version's default
    return vllm_async(version, pp, flag)


def vllm_large_tier_row(row: ServingRow) -> bool | None:
    """Whether the vLLM server of ``row`` had the >= 160 GiB step-budget tier (16384 tokens,
    from 0.28.0: ``serving.vllm_budget``; None: not vLLM): its release's rule; a row recording
    none measured before 0.28.0 ran an older release (no tier); undated: the modelled version's.
    Raises ``PlenaInputError`` naming ``backend_version`` when it is not a vLLM release."""
    from plena_opt.serving.engines import VERSIONS
    from plena_opt.serving.vllm_budget import LARGE_TIER_RELEASED, vllm_large_tier

    if row.get("backend") != "vllm":
        return None
    version, day = _vllm_release(row)
    if version is None:
        if day and day < LARGE_TIER_RELEASED:
            return False
        version = VERSIONS["vllm"]
    return vllm_large_tier(version)


# Attention-DP balancing of the InferenceX TensorRT-LLM B200 recipes with DP_ATTENTION true
# (SemiAnalysisAI/InferenceX benchmarks/dsr1_fp{4,8}_b200_trt*.sh: ``attention_dp_config:
# enable_balance: true, timeout_iters: 60, batching_wait_iters: 0``, in every version from
# 2025-09 on; gptoss_fp4_b200_trt*.sh: ``enable_balance: true`` alone, so TensorRT-LLM's
# AttentionDpConfig defaults timeout_iters 50, batching_wait_iters 10). (timeout, batching wait)
# by (system, catalog model); ``serving.steady.adp_balance_steps`` prices the wait. H200:
# dsr1_fp8_h200_trt_slurm.sh / single_node/dsr1_fp8_h200_trt.sh (ec90f3fe7 2025-09-18 through
# 0ee5ff342 2026-04-05) write the same block as B200 with DP_ATTENTION true; gptoss_fp4_h200_trt*.sh
# (551d81e95 through 0ee5ff342) write none (off). Not fitted.
TRTLLM_ADP_BALANCE = {
    ("b200_sxm", "deepseek-v3"): (60, 0),
    ("b200_sxm", "gpt-oss-120b"): (50, 10),
    ("h200_sxm", "deepseek-v3"): (60, 0),
}


def trtllm_adp_balance(row: ServingRow, system: str, d: Deployment) -> tuple[int, int] | None:
    """(``timeout_iters``, ``batching_wait_iters``) of the attention-DP balancing an InferenceX
    TensorRT-LLM recipe ran ``row`` with (``TRTLLM_ADP_BALANCE``), else None (off)."""
    if d.engine != "trtllm" or not INFERENCEX_ID.match(row.id) or d.ep < 2 or d.pools:
        return None
    return TRTLLM_ADP_BALANCE.get((system, d.model))


# The step token budget (``--max_num_tokens``) of the InferenceX TensorRT-LLM B200 recipes, where
# it is not the engine's 8192: 70b_fp{4,8}_b200_trt_*.sh 16384 (2025-09-18 to their removal on
# 2025-10-29); gptoss_fp4_b200_trt*.sh 20000; dsr1_fp{4,8}_b200_trt*.sh ``(CONC + ISL + 127)``
# rounded down to 64, at least 8192 only from 2026-01-21 (PR #258). The H200 recipes set the same:
# 70b_fp8_h200_trt_slurm.sh 16384 (1b563c858 2025-09-18 to its removal), gptoss_fp4_h200_trt*.sh
# 20000 (551d81e95 2025-09-15 through 0ee5ff342 2026-04-05), dsr1_fp8_h200_trt*.sh the same
# formula (ec90f3fe7 2025-09-18), its 8192 floor from 64af5a771 (2026-01-21). Not fitted.
TRTLLM_MAX_NUM_TOKENS = {"llama-3.1-70b": 16384, "gpt-oss-120b": 20000}
TRTLLM_MAX_NUM_TOKENS_SYSTEMS = frozenset({"b200_sxm", "h200_sxm"})
DSR1_MAX_NUM_TOKENS_FLOOR = 8192
DSR1_MAX_NUM_TOKENS_FLOOR_SINCE = "2026-01-21"


def trtllm_max_num_tokens(row: ServingRow, system: str, d: Deployment) -> int | None:
    """The ``max_num_tokens`` an InferenceX TensorRT-LLM B200 / H200 recipe ran ``row`` with,
    else None (the engine default)."""
    if (d.engine != "trtllm" or not INFERENCEX_ID.match(row.id)
            or system not in TRTLLM_MAX_NUM_TOKENS_SYSTEMS):  # fmt: skip
        return None
    if d.model in DEEPSEEK_R1:
        budget = (d.concurrency + d.input_len + 127) // 64 * 64
        if row.get("measured_on") >= DSR1_MAX_NUM_TOKENS_FLOOR_SINCE:
            budget = max(budget, DSR1_MAX_NUM_TOKENS_FLOOR)
        return budget
    return TRTLLM_MAX_NUM_TOKENS.get(d.model)


# The KV memory of the InferenceX TensorRT-LLM B200 recipes (``kv_cache_config.
# free_gpu_memory_fraction``): dsr1_fp{4,8}_b200_trt*.sh 0.8 (the FP8 one from 2026-01-29, PR
# #594: 0.7 at 1k/8k from CONC 256, 0.75 at 8k/1k on TP 4), gptoss_fp4_b200_trt*.sh 0.85; the
# Llama-3.1-70B ones set none (TensorRT-LLM's default, ``TRTLLM_FREE_GPU_MEMORY_FRACTION``). Under
# the default capacity scheduler (GUARANTEED_NO_EVICT) a request is admitted only with KV for its
# whole sequence (``serving.kv_admission``). DeepSeek-R1 runs up to 2025-11-02 chose their own EP
# and attention DP (dsr1_fp4_b200_trt_slurm.sh before PR #145), which the rows do not record: not
# capped. H200: dsr1_fp8_h200_trt*.sh 0.75 (every version, ec90f3fe7 2025-09-18 through 0ee5ff342
# 2026-04-05; its EP / attention DP chosen in the script, not recorded, until 17d5e204f of
# 2025-11-03, PR #145, as on B200), gptoss_fp4_h200_trt*.sh 0.85 (551d81e95 on),
# 70b_fp8_h200_trt_slurm.sh none. Not fitted.
TRTLLM_KV_FRACTION: dict[str, dict[str, float | None]] = {
    "b200_sxm": {"deepseek-v3": 0.8, "gpt-oss-120b": 0.85, "llama-3.1-70b": None},
    "h200_sxm": {"deepseek-v3": 0.75, "gpt-oss-120b": 0.85, "llama-3.1-70b": None},
}
DSR1_RECORDED_SIZES_SINCE = "2025-11-03"
DSR1_FP8_FRACTIONS_SINCE = "2026-01-29"


def trtllm_kv_fraction(row: ServingRow, system: str, d: Deployment) -> float | None | bool:
    """The ``free_gpu_memory_fraction`` an InferenceX TensorRT-LLM B200 / H200 recipe ran ``row``
    with (None: the engine's default), or False where its KV admission is not known (not
    capped)."""
    fractions = TRTLLM_KV_FRACTION.get(system, {})
    if d.engine != "trtllm" or not INFERENCEX_ID.match(row.id) or d.model not in fractions:
        return False
    if d.model in DEEPSEEK_R1:
        on = row.get("measured_on")
        if on < DSR1_RECORDED_SIZES_SINCE:
            return False
        if system == "b200_sxm" and d.precision == "fp8" and on >= DSR1_FP8_FRACTIONS_SINCE:
            if (d.input_len, d.output_len) == (1024, 8192) and d.concurrency >= 256:
                return 0.7
            if (d.input_len, d.output_len) == (8192, 1024) and d.tp * d.ep == 4:
                return 0.75
    return fractions[d.model]


# The InferenceX SGLang recipes of DeepSeek-R1 on B200 (benchmarks/dsr1_fp4_b200.sh,
# dsr1_fp8_b200.sh) pass ``--scheduler-recv-interval`` 10, or 30 from a concurrency of 16 (fp8 at
# TP 4: always 10): the scheduler reads arrivals every that many decode steps. The Qwen3.5 B200
# recipes set the same 10 / 30 (qwen3.5_bf16_b200.sh from 9dc87a68c of 2026-02-20, none before;
# qwen3.5_fp8_b200.sh from its creation, efd49e50b of 2026-03-03). No other SGLang recipe of a
# modelled system passes it up to 0ee5ff342 (2026-04-05): dsr1_fp8_h200.sh, dsr1_fp8_mi300x.sh,
# dsr1_fp8_mi325x.sh, qwen3.5_*_{h200,mi300x,mi325x}.sh, glm5_*.sh. (system, catalog model) ->
# the first day its recipe passes it ("": every version read). Not fitted.
SGLANG_RECV_INTERVAL = {
    ("b200_sxm", "deepseek-v3"): "",
    ("b200_sxm", "qwen3.5-397b-a17b"): "2026-02-20",
}


def sglang_recv_interval(row: ServingRow, system: str, d: Deployment) -> int:
    """The ``--scheduler-recv-interval`` an InferenceX SGLang recipe ran ``row`` with, else 1."""
    if d.engine != "sglang" or not INFERENCEX_ID.match(row.id):
        return 1
    since = SGLANG_RECV_INTERVAL.get((system, d.model))
    day = row.get("measured_on") or row.id[:10].replace("_", "-")
    if since is None or day < since:
        return 1
    if d.model in DEEPSEEK_R1 and d.precision == "fp8" and d.tp * d.ep == 4:
        return 10
    return 30 if d.concurrency >= 16 else 10


# Where the InferenceX DeepSeek-R1 fp8 B200 TensorRT-LLM recipe (dsr1_fp8_b200_trt.sh) sets
# ``moe_config.backend: DEEPGEMM`` instead of ``TRTLLM``: 1k-token prompts with 256+ clients.
TRTLLM_DEEPGEMM_ISL = 1024
TRTLLM_DEEPGEMM_MIN_CONCURRENCY = 256


def trtllm_gen_moe(engine: str, chip: str, isl: int, conc: int) -> bool:
    """Whether a row's block-scaled fp8 experts run TensorRT-LLM's generated MoE kernels
    (``chip.gpu.perf.TRTLLM_GEN_MOE_NOTE``): on Blackwell, the InferenceX DeepSeek-R1 fp8 B200
    recipes, SGLang ``--moe-runner-backend flashinfer_trtllm`` always (dsr1_fp8_b200.sh),
    TensorRT-LLM ``moe_config.backend: TRTLLM`` except ``DEEPGEMM`` at 1k input with 256+
    clients (dsr1_fp8_b200_trt.sh); vLLM's default fp8 MoE is the table's Triton kernel. Only
    block-scaled fp8 experts read the flag. Not fitted."""
    if ARCHITECTURE.get(chip) != "blackwell":
        return False
    deepgemm = isl == TRTLLM_DEEPGEMM_ISL and conc >= TRTLLM_DEEPGEMM_MIN_CONCURRENCY
    return engine == "sglang" or (engine == "trtllm" and not deepgemm)


# The MoE kernel of an MXFP4 checkpoint's experts (gpt-oss): the engine's own default
# (``chip.gpu.moe_kernels.default_moe_kernel``, shared with estimate, search and export:
# TensorRT-LLM's TRTLLM backend, MXFP8 x MXFP4, on Blackwell; SGLang flashinfer_mxfp4, MXFP8, on
# Blackwell; vLLM FlashInfer MXFP4 x BF16 on Blackwell; Triton on Hopper), with the InferenceX vLLM
# recipes on top: gptoss_fp4_b200.sh exports ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``
# (FlashInfer's TRT-LLM-gen MXFP4 x MXFP8 MoE) and gptoss_fp4_h100.sh / gptoss_fp4_h200.sh
# ``VLLM_MXFP4_USE_MARLIN=1`` (``MARLIN_RECIPE_CHIPS``; set in ``serving_rows.resolve``).
INFERENCEX_MOE_KERNEL = {("vllm", "blackwell"): "mxfp8"}  # (engine, architecture) -> recipe's


def moe_kernel(engine: str, chip: str, model: str, fmt: str, inferencex: bool) -> str | None:
    """The kernel a row's MXFP4 experts run (``chip.gpu.moe_kernels``): its InferenceX recipe's
    (``INFERENCEX_MOE_KERNEL``), else the engine's default; None where the experts are not an
    MXFP4 checkpoint's at a 4-bit format on a GPU generation listed. Not fitted."""
    from plena_opt.chip import load_chip
    from plena_opt.chip.gpu.moe_kernels import default_moe_kernel
    from plena_opt.chip.precision import is_weight_only
    from plena_opt.models import load_model

    if engine not in ("vllm", "sglang", "trtllm"):
        return None
    formats = load_chip(chip).formats  # type: ignore[union-attr]
    if fmt not in formats:
        return None
    compute = formats[fmt]
    ckpt = load_model(model).checkpoint_precision
    kernel = default_moe_kernel(engine, chip, ckpt, compute, is_weight_only(fmt, compute))
    recipe = INFERENCEX_MOE_KERNEL.get((engine, ARCHITECTURE.get(chip, "")))
    return recipe if kernel is not None and inferencex and recipe else kernel


def mxfp8_moe(engine: str, chip: str, model: str, fmt: str, inferencex: bool) -> bool:
    """Whether a row's experts run MXFP4 x MXFP8 (``moe_kernel`` "mxfp8"): an MXFP4 checkpoint
    (gpt-oss) served at a 4-bit format on Blackwell's fp4 tensor cores by TensorRT-LLM or SGLang
    (their default), or by vLLM under its InferenceX recipe. Not fitted."""
    return moe_kernel(engine, chip, model, fmt, inferencex) == "mxfp8"


# The NVFP4 checkpoint every single-node InferenceX DeepSeek-R1 fp4 B200 config names (SGLang
# and TensorRT-LLM, .github/configs/nvidia-master.yaml ``dsr1-fp4-b200-*``: ``model:
# nvidia/DeepSeek-R1-0528-FP4-V2`` from 2025-09-15 through 2026-04; the rows' file says only
# ``deepseek-ai/DeepSeek-R1`` at nvfp4). Its q/kv projections stay bf16, o_proj is NVFP4
# (``models.checkpoint.BF16_ATTENTION``).
INFERENCEX_DSR1_FP4 = "nvidia/DeepSeek-R1-0528-FP4-V2"


def checkpoint_attention(row: ServingRow, d: Deployment) -> str:
    """``Workload.bf16_attention`` of the checkpoint ``row`` ran: an NVIDIA NVFP4 DeepSeek id as
    named, or, for an InferenceX DeepSeek-R1 row at fp4, ``INFERENCEX_DSR1_FP4``; "" otherwise
    (every GEMM in the row's format)."""
    from plena_opt.models.checkpoint import nvfp4_attention

    if d.precision != "fp4" or d.model not in DEEPSEEK_R1:
        return ""
    named = nvfp4_attention(row.get("model_path"))
    if named or not INFERENCEX_ID.match(row.id):
        return named
    return nvfp4_attention(INFERENCEX_DSR1_FP4)


# The checkpoint InferenceX's Llama-3.1-70B fp8 configs ran (.github/workflows/70b-tmpl.yml of
# 2025-10, e.g. commit 35bc387ff of 2025-10-16: ``image: 'vllm/vllm-openai:v0.10.2'`` on h100,
# h200 and b200, TensorRT-LLM 1.1.0rc2.post2 on h200-trt / b200-trt, every one ``model:
# 'nvidia/Llama-3.3-70B-Instruct-FP8'``; the rows' file says only ``meta-llama/Llama-3.1-70B``
# at fp8): NVIDIA ModelOpt FP8, static activation scales (``models.checkpoint.fp8_static_input``).
INFERENCEX_LLAMA70B_FP8 = "nvidia/Llama-3.3-70B-Instruct-FP8"
LLAMA_70B = "llama-3.1-70b"


def checkpoint_fp8_static(row: ServingRow, d: Deployment) -> bool:
    """``Workload.fp8_static_input`` of the checkpoint ``row`` ran at fp8: a ModelOpt FP8 id as
    named, or, for an InferenceX Llama-3.1-70B row, ``INFERENCEX_LLAMA70B_FP8``; False otherwise
    (the dynamic default: the non-InferenceX Qwen3-32B rows name only ``Qwen/Qwen3-32B``)."""
    from plena_opt.models.checkpoint import fp8_static_input

    if d.precision != "fp8":
        return False
    if fp8_static_input(row.get("model_path")):
        return True
    ix = bool(INFERENCEX_ID.match(row.id))
    return ix and d.model == LLAMA_70B and fp8_static_input(INFERENCEX_LLAMA70B_FP8)


def with_formats(row: ServingRow, d: Deployment) -> Deployment:
    """``d`` with the row's fp8_block GEMM / MoE modes, the bf16 attention projections and static
    fp8 activation scales of the checkpoint it ran (``checkpoint_attention``,
    ``checkpoint_fp8_static``) and its MXFP4 experts' kernel (``moe_kernel``;
    a recipe's Marlin, set by ``serving_rows.resolve``, kept)."""
    from dataclasses import replace

    gemm = row.get("gemm_quant_mode") == "fp8_block"
    moe = row.get("moe_quant_mode") == "fp8_block"
    ix = bool(INFERENCEX_ID.match(row.id))
    kernel = moe_kernel(d.engine, d.chip, d.model, d.precision, ix)
    d = replace(d, bf16_attention=checkpoint_attention(row, d), mxfp8_moe=kernel == "mxfp8",
                bf16_moe=kernel == "bf16",
                fp8_static_input=checkpoint_fp8_static(row, d))  # fmt: skip
    return replace(d, fp8_block_gemm=gemm, fp8_block_moe=moe) if gemm or moe else d
