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
# benchmarks/*.sh): every recipe of the file's (system, engine, model) groups stores an fp8 KV
# cache except gpt-oss on H100 (gptoss_fp4_h100.sh sets no kv-cache-dtype: vLLM's "auto" keeps
# the bf16 of the checkpoint's activations). TRT-LLM: ``kv_cache_config: dtype: fp8``
# (70b_fp8_b200_trt_slurm.sh, 70b_fp4_b200_trt_slurm.sh, gptoss_fp4_b200_trt.sh,
# dsr1_fp4_b200_trt.sh, dsr1_fp8_b200_trt.sh); vLLM ``kv-cache-dtype: fp8`` (70b_fp8_h100_slurm.sh,
# 70b_fp8_b200_docker.sh, 70b_fp4_b200_docker.sh, gptoss_fp4_b200.sh); SGLang ``--kv-cache-dtype
# fp8_e4m3`` (dsr1_fp4_b200.sh, dsr1_fp8_b200.sh). An InferenceX row is one whose id starts with
# its dump date (``2026_04_06_…``). Not fitted: on the shipped file it moved B200 TPOT MAPE from
# 35.0 to 30.0 % (every B200 engine and model group closer) and H100 vLLM Llama-3.1-70B's from
# 5.5 to 9.3 % (bias +0.5 to -6.9 %: that fp8-KV decode is slower than the HBM bytes say).
INFERENCEX_BF16_KV = frozenset({("h100_sxm", "vllm", "gpt-oss-120b")})
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
    if ix and (system, engine, model) not in INFERENCEX_BF16_KV:
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
