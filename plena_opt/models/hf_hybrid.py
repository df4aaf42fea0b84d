"""Attention variants beyond dense softmax attention, read from their configs (docs/models.md).

* **DeepSeek sparse attention** (DSA; DeepSeek-V3.2 ``deepseek_v32``, GLM-5 ``glm_moe_dsa``):
  MLA plus a lightning indexer (``index_n_heads`` heads of ``index_head_dim``) that scores every
  cached key; each query then attends its ``index_topk`` best keys. Source: DeepSeek-V3.2-Exp
  ``inference/model.py`` (``Indexer``: ``wq_b``, ``wk``, ``k_norm``, ``weights_proj``) and the
  transformers ``DeepseekV32Config`` / ``GlmMoeDsaConfig`` fields.
* **Gated DeltaNet** linear attention (``linear_attention`` layers of Qwen3-Next and Qwen3.5,
  interleaved with gated full attention): a fixed recurrent state per sequence and layer instead
  of a KV cache. Source: transformers ``Qwen3NextConfig`` (``layer_types`` default: layer ``i`` is
  full attention iff ``(i + 1) % full_attention_interval == 0``) and ``Qwen3NextGatedDeltaNet``.

Any other use of these fields stays refused by name (``hf_fields.refuse_unmodelled``).
"""

from __future__ import annotations

from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.models.limits import bounded, short

# Families whose ``linear_attention`` layers are Gated DeltaNet (transformers modeling code).
GATED_DELTANET_TYPES = frozenset(
    {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
)
LINEAR_KEYS = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)
INDEX_KEYS = ("index_n_heads", "index_head_dim", "index_topk")
# Families whose every layer is DSA (transformers DeepseekV32Config, GlmMoeDsaConfig).
DSA_TYPES = frozenset({"deepseek_v32", "glm_moe_dsa"})
# DSA variants whose indexer is shared or skipped across layers (GLM-5.2): not modelled.
SHARED_INDEXER_KEYS = ("index_topk_freq", "index_skip_topk_offset", "indexer_types")
# Gated (sigmoid) output of the full-attention layers: Qwen3-Next always, Qwen3.5 by the flag.
OUTPUT_GATE_DEFAULT = GATED_DELTANET_TYPES


def _get(cfg: dict[str, Any], key: str) -> Any:
    return cfg.get(key)


def is_gated_deltanet(model_type: str) -> bool:
    """Whether ``linear_attention`` layers of this family are Gated DeltaNet layers."""
    return model_type in GATED_DELTANET_TYPES


def is_dsa(cfg: dict[str, Any]) -> bool:
    """The config asks for DeepSeek sparse attention (an MLA config with ``index_topk``)."""
    value = _get(cfg, "index_topk")
    return value is not None and value is not False and value != 0


def default_layer_types(cfg: dict[str, Any], model_type: str, layers: int) -> list[str] | None:
    """Qwen3-Next without ``layer_types``: every ``full_attention_interval``-th layer (default 4,
    ``Qwen3NextConfig``) is full attention, the others Gated DeltaNet; None for other families."""
    if not is_gated_deltanet(model_type):
        return None
    n = bounded(cfg.get("full_attention_interval") or 4, "full_attention_interval")
    return ["linear_attention" if (i + 1) % n else "full_attention" for i in range(layers)]


def linear_fields(cfg: dict[str, Any], model_type: str, attention: list[str]) -> dict[str, Any]:
    """Gated DeltaNet sizes when some layer is ``linear_attention``; each must be given."""
    out: dict[str, Any] = {}
    if is_gated_deltanet(model_type):
        gate = cfg.get("attn_output_gate")
        if gate is not None and not isinstance(gate, bool):
            raise PlenaInputError("attn_output_gate", "attn_output_gate must be a bool")
        out["attn_output_gate"] = model_type in OUTPUT_GATE_DEFAULT if gate is None else gate
    if "linear_attention" not in attention:
        return out
    for key in LINEAR_KEYS:
        if _get(cfg, key) is None:
            raise PlenaInputError(key, f"{key}: a Gated DeltaNet (linear_attention) layer needs it")
        out[key] = bounded(cfg[key], key)
    dtype = cfg.get("mamba_ssm_dtype")
    if dtype is not None and dtype not in ("float32", "bfloat16", "float16"):
        raise PlenaInputError(
            "mamba_ssm_dtype",
            f"mamba_ssm_dtype must be float32, bfloat16 or float16 ({short(dtype)})",
        )
    out["linear_state_bytes"] = 4 if dtype == "float32" else 2
    if out["linear_num_value_heads"] % out["linear_num_key_heads"]:
        raise PlenaInputError(
            "linear_num_value_heads",
            "linear_num_value_heads must be a multiple of linear_num_key_heads",
        )
    return out


def sparse_fields(cfg: dict[str, Any], mla: dict[str, Any]) -> dict[str, Any]:
    """DSA indexer sizes (``{}`` without ``index_topk``); refused without MLA or a field."""
    if not is_dsa(cfg):
        stray = [k for k in INDEX_KEYS[:2] if _get(cfg, k) is not None]
        if stray or cfg.get("model_type") in DSA_TYPES:
            raise PlenaInputError(
                "index_topk",
                "index_topk: a DeepSeek sparse attention config (indexer fields or model_type "
                f"{short(cfg.get('model_type'))}) must give index_topk",
            )
        return {}
    if not mla:
        raise PlenaInputError(
            "index_topk", "index_topk: DeepSeek sparse attention is modelled on MLA configs only"
        )
    for key in SHARED_INDEXER_KEYS:
        value = cfg.get(key)
        if value is not None and value != [] and value is not False:
            raise PlenaInputError(
                key, f"{key}: indexers shared or skipped across layers are not modelled"
            )
    out = {}
    for key in INDEX_KEYS:
        if _get(cfg, key) is None:
            raise PlenaInputError(key, f"{key}: DeepSeek sparse attention (index_topk) needs it")
        out[key] = bounded(cfg[key], key)
    return out


def supported_by_variant(key: str, cfg: dict[str, Any], model_type: str) -> bool:
    """Whether an otherwise refused field (``hf_fields.UNMODELLED_FIELDS``) is read here."""
    if key in LINEAR_KEYS or key == "full_attention_interval":
        return is_gated_deltanet(model_type)
    if key in ("index_topk", "index_n_heads"):
        return cfg.get("kv_lora_rank") is not None
    return False
