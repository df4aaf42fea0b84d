"""The KV-cache format a serving row ran (``serving_rows.resolve``): its ``kv_cache_dtype``
column, an InferenceX recipe's, or the one its checkpoint declares where the engine's default
inherits it (``models.checkpoint.KV_FP8_CHECKPOINTS`` / ``KV_INHERITS``; README_serving
r17kvckpt). None is bf16."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plena_opt.validate.serving_recipes import INFERENCEX_ID

if TYPE_CHECKING:
    from plena_opt.validate.serving_rows import ServingRow


class KvRefused(Exception):
    """The row's KV format cannot be priced; ``serving_rows`` refuses the row with the message."""


# The KV-cache format of an InferenceX run is its launch recipe's (SemiAnalysisAI/InferenceX,
# benchmarks/*.sh, benchmarks/single_node/*.sh from 2026-02-19): an fp8 KV cache except where the
# recipe passes no KV dtype (or ``dtype: auto``), where the engine's default keeps the bf16 of the
# checkpoint's activations (``checkpoint_kv``). TRT-LLM ``kv_cache_config: dtype: fp8``
# (70b_fp8_b200_trt_slurm.sh, 70b_fp4_b200_trt_slurm.sh, 70b_fp8_h200_trt_slurm.sh,
# gptoss_fp4_b200_trt.sh, dsr1_fp4_b200_trt.sh, dsr1_fp8_b200_trt.sh, dsr1_fp8_h200_trt.sh); vLLM
# ``kv-cache-dtype: fp8`` (70b_fp8_h100_slurm.sh, 70b_fp8_h200_slurm.sh, 70b_fp8_b200_docker.sh,
# 70b_fp4_b200_docker.sh, 70b_fp8_mi300x/mi325x_*.sh, gptoss_fp4_b200.sh); SGLang
# ``--kv-cache-dtype fp8_e4m3`` (dsr1_fp4_b200.sh, dsr1_fp8_b200.sh, qwen3.5_fp8_b200.sh,
# qwen3.5_fp8_h200.sh, glm5_fp8_b200.sh). An InferenceX row is one whose id starts with its dump
# date (``2026_04_06_…``). Not fitted: on the shipped file it moved B200 TPOT MAPE from 35.0 to
# 30.0 % (every B200 engine and model group closer) and H100 vLLM Llama-3.1-70B's from 5.5 to
# 9.3 % (bias +0.5 to -6.9 %: that fp8-KV decode is slower than the HBM bytes say).
#
# The recipes that pass no KV dtype: (system, engine, catalog model, row ``precision`` or "*") ->
# the first day its recipe passes an fp8 one ("": none up to InferenceX commit 0ee5ff342 of
# 2026-04-05, the last recipes read; README_serving r17ixrec gives each file and commit). A row
# measured (``measured_on``, else its id's dump date) before that day ran the engine's default.
INFERENCEX_BF16_KV: dict[tuple[str, str, str, str], str] = {
    ("h100_sxm", "vllm", "gpt-oss-120b", "*"): "",  # gptoss_fp4_h100*.sh
    ("h200_sxm", "vllm", "gpt-oss-120b", "*"): "",  # gptoss_fp4_h200*.sh
    ("h200_sxm", "trtllm", "gpt-oss-120b", "*"): "",  # gptoss_fp4_h200_trt*.sh: dtype auto
    ("h200_sxm", "sglang", "deepseek-v3", "*"): "",  # dsr1_fp8_h200*.sh
    # 70b_fp8_h200_slurm.sh: fp8 from a157a043c; 70b_h200_slurm.sh, 425f74d51: none
    ("h200_sxm", "vllm", "llama-3.1-70b", "*"): "2025-09-15",
    ("mi300x", "vllm", "gpt-oss-120b", "*"): "",  # gptoss_fp4_mi300x*.sh
    ("mi325x", "vllm", "gpt-oss-120b", "*"): "",  # gptoss_fp4_mi325x*.sh
    # dsr1_fp8_mi300x.sh fp8_e4m3 from 32772c579, dsr1_fp8_mi325x.sh from e9b6e0fde
    ("mi300x", "sglang", "deepseek-v3", "*"): "2026-01-23",
    ("mi325x", "sglang", "deepseek-v3", "*"): "2026-01-23",
    # 70b_mi300x_docker.sh fp8 from 5b2ca985e, 70b_mi325x_*.sh from afbbe82c4
    ("mi300x", "vllm", "llama-3.1-70b", "*"): "2025-09-10",
    ("mi325x", "vllm", "llama-3.1-70b", "*"): "2025-09-10",
    # kimik2.5_{int4,fp4}_b200.sh, kimik2.5_int4_{h200,mi300x,mi325x}.sh
    ("b200_sxm", "vllm", "kimi-k2.5", "*"): "",
    ("h200_sxm", "vllm", "kimi-k2.5", "*"): "",
    ("mi300x", "vllm", "kimi-k2.5", "*"): "",
    ("mi325x", "vllm", "kimi-k2.5", "*"): "",
    # minimaxm2.5_fp8_{h100,h200,mi300x,mi325x}.sh; minimaxm2.5_fp8_b200.sh fp8 from bddbf4031
    ("b200_sxm", "vllm", "minimax-m2.5", "*"): "2026-04-03",
    ("h100_sxm", "vllm", "minimax-m2.5", "*"): "",
    ("h200_sxm", "vllm", "minimax-m2.5", "*"): "",
    ("mi300x", "vllm", "minimax-m2.5", "*"): "",
    ("mi325x", "vllm", "minimax-m2.5", "*"): "",
    # qwen3.5_bf16_b200.sh, qwen3.5_{bf16,fp8}_{mi300x,mi325x}.sh (the fp8 B200 / H200 pass fp8)
    ("b200_sxm", "sglang", "qwen3.5-397b-a17b", "bf16"): "",
    ("mi300x", "sglang", "qwen3.5-397b-a17b", "*"): "",
    ("mi325x", "sglang", "qwen3.5-397b-a17b", "*"): "",
    # glm5_fp4_b200.sh (glm5_nvfp4_b200.sh before 800f57aaf), glm5_fp8_h200.sh
    ("b200_sxm", "sglang", "glm-5", "fp4"): "",
    ("h200_sxm", "sglang", "glm-5", "*"): "",
}


def recipe_bf16_kv(row: ServingRow, system: str, engine: str, model: str) -> bool:
    """Whether the InferenceX recipe of ``row`` passed no KV-cache dtype on the day it was
    measured (``INFERENCEX_BF16_KV``; ``measured_on``, else the id's dump date)."""
    day = row.get("measured_on") or row.id[:10].replace("_", "-")
    for precision in (row.get("precision"), "*"):
        since = INFERENCEX_BF16_KV.get((system, engine, model, precision))
        if since is not None:
            return not since or day < since
    return False


# a ``kv_cache_dtype`` column, when present, names the row's KV format (engine spellings)
KV_CACHE_DTYPES = {"": None, "auto": None, "bf16": None, "fp8": "fp8", "fp8_e4m3": "fp8"}


def kv_cache_format(row: ServingRow, system: str, engine: str, model: str,
                    recipes: bool = True) -> str | None:  # fmt: skip
    """The KV-cache format of ``row`` (None: bf16): its ``kv_cache_dtype`` column, else an
    InferenceX row's recipe format (``INFERENCEX_ID``; ``recipes``: the aggregated recipes), else
    the format its checkpoint declares where the engine's default inherits it
    (``checkpoint_kv``); an empty or ``auto`` column is that default too."""
    if "kv_cache_dtype" in row.fields:
        v = row.get("kv_cache_dtype")
        if v not in KV_CACHE_DTYPES:
            raise KvRefused(f"kv_cache_dtype {v!r} is not modelled (known: "
                            f"{', '.join(k for k in KV_CACHE_DTYPES if k)})")  # fmt: skip
        if v not in ("", "auto"):
            return KV_CACHE_DTYPES[v]
        return checkpoint_kv(row, engine, explicit_auto=v == "auto")
    ix = recipes and bool(INFERENCEX_ID.match(row.id))
    if ix and not recipe_bf16_kv(row, system, engine, model):
        return "fp8"
    return checkpoint_kv(row, engine)


def checkpoint_kv(row: ServingRow, engine: str, explicit_auto: bool = False) -> str | None:
    """The KV format the row's checkpoint declares (``models.checkpoint.checkpoint_kv_format``:
    a cited ModelOpt id's ``kv_cache_quant_algo``) where ``engine`` at the row's
    ``backend_version`` stores it by default (``models.checkpoint.engine_inherits_kv``); None
    (bf16) otherwise. vLLM given ``--kv-cache-dtype auto`` explicitly keeps bf16 (issue #34752:
    only the unset flag inherits; ``models.checkpoint.KV_INHERITS``)."""
    from plena_opt.models.checkpoint import checkpoint_kv_format, engine_inherits_kv

    kv = checkpoint_kv_format(row.get("model_path"))
    if kv is None or (explicit_auto and engine == "vllm"):
        return None
    return kv if engine_inherits_kv(engine, row.get("backend_version")) else None
