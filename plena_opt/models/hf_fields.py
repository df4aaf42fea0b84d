"""Hugging Face config spellings: nested text configs, family field names, family defaults and
the architectures the analytic model refuses by name (docs/models.md).
"""

from __future__ import annotations

from typing import Any

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.models.limits import MAX_NAME_CHARS, short

# Families whose transformers config class defaults ``tie_word_embeddings`` to True (the
# ``PretrainedConfig`` default, not overridden by these classes).
TIED_BY_DEFAULT = frozenset(
    {"gemma", "gemma2", "gemma3", "gemma3_text", "starcoder2", "falcon", "cohere", "cohere2"}
)
# Two-matrix (up, activation, down) MLPs instead of gated SwiGLU/GeGLU (transformers: the
# family's MLP has no gate projection; Nemotron-4 and Arcee use squared ReLU).
NON_GATED_MLP = frozenset(
    {"starcoder2", "falcon", "gpt_neox", "phi", "gptj", "nemotron", "arcee", "gpt_bigcode"}
)
# Gated (gate · act(up), down: three matrices) MLPs, from each family's transformers modeling
# code (``gate_proj``/``up_proj``/``down_proj`` or a fused ``gate_up_proj``; MoE experts alike).
GATED_MLP = frozenset(
    {
        "llama", "llama4", "llama4_text", "mistral", "mistral3", "ministral", "mixtral",
        "qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen3", "qwen3_moe", "qwen3_vl",
        "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "gemma", "gemma2", "gemma3",
        "gemma3_text", "cohere", "cohere2", "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_vl",
        "phi3", "phimoe", "olmo", "olmo2", "olmo3", "olmoe", "granite", "granitemoe",
        "granitemoeshared", "internlm2", "internlm3", "chatglm", "glm", "glm4", "glm4_moe",
        "baichuan", "exaone", "exaone4", "minicpm", "minicpm3", "ernie4_5", "ernie4_5_moe",
        "gpt_oss", "dbrx", "smollm3", "hunyuan_v1_dense", "hunyuan_v1_moe", "minimax_m2",
        "mimo", "stablelm", "helium", "dots1", "bailing_moe", "seed_oss", "yi",
        "deepseek_v32", "glm_moe_dsa", "kimi_k25", "qwen3_next", "qwen3_5", "qwen3_5_text",
        "qwen3_5_moe", "qwen3_5_moe_text",
    }
)  # fmt: skip
# Activation names that are themselves gated (``hidden_act: swiglu``): the config says it.
GATED_ACTIVATIONS = ("glu",)
# Falcon's original remote-code ``model_type`` spellings: Falcon-40B/180B ("RefinedWeb": grouped
# KV heads ``n_head_kv``, ``ln_attn`` + ``ln_mlp``, transformers' ``new_decoder_architecture``)
# and Falcon-7B ("RefinedWebModel": multi-query, one norm); tiiuae/falcon-40b and falcon-7b
# ``modelling_RW.py``.
TYPE_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "RefinedWeb": ("falcon", {"new_decoder_architecture": True}),
    "RefinedWebModel": ("falcon", {}),
}
# Attention and MLP read the same normalised input and are added in parallel.
PARALLEL_BLOCK = frozenset({"gpt_neox", "phi", "gptj", "cohere", "cohere2"})
# Four RMSNorms per layer (pre/post attention, pre/post feed-forward).
FOUR_NORMS = frozenset({"gemma2", "gemma3", "gemma3_text"})
# Every layer slides when ``sliding_window`` is set and no layer list is given.
ALL_LAYERS_SLIDE = frozenset({"mistral", "mixtral", "starcoder2", "phi3"})
# Per-head RMSNorm on q and k.
QK_NORM = frozenset(
    {"qwen3", "qwen3_moe", "gemma3", "gemma3_text", "qwen3_next", "qwen3_5", "qwen3_5_text",
     "qwen3_5_moe", "qwen3_5_moe_text"}
)  # fmt: skip
# A sigmoid gate ``h → 1`` on the shared expert (transformers Qwen2MoE / Qwen3-Next / Qwen3.5-MoE
# ``shared_expert_gate``).
SHARED_EXPERT_GATE = frozenset({"qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"})
# q, k, v (not o) projections carry biases.
QKV_BIAS = frozenset({"qwen2", "qwen2_moe"})

# Defaults of text config classes whose saved ``config.json`` stores only the values that differ
# (multimodal wrappers save ``text_config`` as a diff). Source: transformers
# ``Gemma3TextConfig.__init__`` (configuration_gemma3.py) and ``Llama4TextConfig.__init__``
# (configuration_llama4.py); architecture fields only.
_GEMMA3_TEXT = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}
_LLAMA4_TEXT = {
    "vocab_size": 202_048,
    "hidden_size": 5120,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_experts_per_tok": 1,
    "num_local_experts": 16,
    "interleave_moe_layer_step": 1,
    "attention_chunk_size": 8192,
}
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": _GEMMA3_TEXT,
    "gemma3": _GEMMA3_TEXT,
    "llama4_text": _LLAMA4_TEXT,
    "llama4": _LLAMA4_TEXT,
}

# field → what it means that is not modelled (checked in this order; the first present wins).
UNMODELLED_FIELDS: tuple[tuple[str, str], ...] = (
    ("block_configs", "heterogeneous per-layer blocks (DeciLM / NAS) are not modelled"),
    ("hybrid_override_pattern", "hybrid Mamba (state-space) / attention layers are not modelled"),
    ("layers_block_type", "hybrid state-space / attention layers are not modelled"),
    ("attn_type_list", "lightning (linear) attention layers are not modelled"),
    (
        "linear_num_value_heads",
        "linear-attention layers outside Gated DeltaNet (Qwen3-Next / Qwen3.5) are not modelled",
    ),
    (
        "linear_num_key_heads",
        "linear-attention layers outside Gated DeltaNet (Qwen3-Next / Qwen3.5) are not modelled",
    ),
    (
        "full_attention_interval",
        "hybrid linear/full attention outside Qwen3-Next / Qwen3.5 is not modelled",
    ),
    (
        "index_topk",
        "DeepSeek sparse attention (DSA) without MLA (kv_lora_rank) is not modelled",
    ),
    (
        "index_n_heads",
        "DeepSeek sparse attention (DSA) without MLA (kv_lora_rank) is not modelled",
    ),
    ("attn_layer_period", "hybrid Mamba / attention layers (Jamba) are not modelled"),
    ("ssm_cfg", "state-space (Mamba) layers are not modelled"),
    ("ssm_state_size", "state-space (Mamba) layers are not modelled"),
    ("mamba_d_state", "state-space (Mamba) layers are not modelled"),
    ("swa_num_key_value_heads", "different attention shapes per layer kind are not modelled"),
    ("swa_head_dim", "different attention shapes per layer kind are not modelled"),
    ("swa_num_attention_heads", "different attention shapes per layer kind are not modelled"),
    ("num_kv_shared_layers", "KV cache shared across layers is not modelled"),
    ("altup_num_inputs", "AltUp / per-layer embeddings (Gemma-3n) are not modelled"),
)
UNMODELLED_TYPES: dict[str, str] = {
    "mamba": "state-space (Mamba) layers",
    "mamba2": "state-space (Mamba-2) layers",
    "falcon_mamba": "state-space (Mamba) layers",
    "falcon_h1": "hybrid attention + Mamba layers",
    "jamba": "hybrid attention + Mamba layers",
    "zamba": "hybrid attention + Mamba layers",
    "zamba2": "hybrid attention + Mamba layers",
    "bamba": "hybrid attention + Mamba layers",
    "nemotron_h": "hybrid attention + Mamba layers",
    "granitemoehybrid": "hybrid attention + Mamba layers",
    "rwkv": "RWKV recurrent layers",
    "recurrent_gemma": "RG-LRU recurrent layers",
    "minimax": "lightning (linear) attention layers",
    "minimax_m1": "lightning (linear) attention layers",
    "deci": "heterogeneous per-layer blocks (DeciLM)",
    "nemotron-nas": "heterogeneous per-layer blocks (NAS)",
    "lfm2": "short-convolution layers",
    "gemma3n": "AltUp / per-layer embeddings",
}


def _present(value: Any) -> bool:
    """Set to something that switches the feature on (null, 0, false, "" and empty are off)."""
    if isinstance(value, (list, dict, str)):
        return len(value) > 0
    return value is not None and value is not False and value != 0


def model_type_of(cfg: dict[str, Any]) -> str:
    """``model_type`` as a bounded string (``unknown`` when absent)."""
    value = cfg.get("model_type")
    if value is None:
        return "unknown"
    if not isinstance(value, str):
        raise PlenaTypeError("model_type", "model_type must be a string")
    if len(value) > MAX_NAME_CHARS:
        raise PlenaInputError("model_type", f"model_type must be at most {MAX_NAME_CHARS} chars")
    return value


def resolve_alias(cfg: dict[str, Any], model_type: str) -> tuple[dict[str, Any], str]:
    """``(cfg, model_type)`` with an older spelling of a family's ``model_type`` mapped to the
    transformers one (and the fields that spelling implies, where the config omits them)."""
    if model_type not in TYPE_ALIASES:
        return cfg, model_type
    name, implied = TYPE_ALIASES[model_type]
    out = dict(cfg)
    for key, value in implied.items():
        if out.get(key) is None:
            out[key] = value
    return out, name


def gated_mlp(cfg: dict[str, Any], model_type: str) -> bool:
    """Whether the dense/expert MLP is gated (3 matrices) or two-matrix, from the family's
    documented architecture or the config's activation; refuses naming ``model_type`` when
    neither says it. A config without ``model_type`` is the reference's (Llama) layout."""
    if model_type in NON_GATED_MLP:
        return False
    if model_type in GATED_MLP or model_type == "unknown":
        return True
    for key in ("hidden_act", "hidden_activation", "activation_function"):
        act = cfg.get(key)
        if isinstance(act, str) and act.lower().endswith(GATED_ACTIVATIONS):
            return True
    raise PlenaInputError(
        "model_type",
        f"model_type: {short(model_type)}: whether its MLP is gated (3 matrices) or two-matrix "
        "is not modelled for this architecture and the config does not say it (hidden_act "
        "*glu); give a config of a supported family",
    )


def unwrap(cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The language model of a multimodal wrapper (``text_config``) and what is left unpriced."""
    text = cfg.get("text_config")
    if text is None:
        if cfg.get("vision_config") is not None:  # text fields at the top (e.g. Qwen2.5-VL)
            return cfg, [
                "vision_config: the vision tower is not modelled; only the language model is priced"
            ]
        return cfg, []
    if not isinstance(text, dict):
        raise PlenaTypeError("text_config", "text_config must be a JSON object")
    inner = dict(text)
    for key in ("tie_word_embeddings", "model_type"):
        if inner.get(key) is None and cfg.get(key) is not None:
            inner[key] = cfg[key]
    if "text_config" in inner:
        raise PlenaInputError("text_config", "text_config must not nest another text_config")
    notes = []
    for key, what in (("vision_config", "vision"), ("audio_config", "audio")):
        if cfg.get(key) is not None:
            notes.append(
                f"{key}: the {what} tower is not modelled; only the language model "
                "(text_config) is priced"
            )
    return inner, notes


def _alias(cfg: dict[str, Any], canonical: str, *names: str) -> None:
    if cfg.get(canonical) is not None:
        return
    for name in names:
        if cfg.get(name) is not None:
            cfg[canonical] = cfg[name]
            return


def canonical(cfg: dict[str, Any], model_type: str) -> dict[str, Any]:
    """A copy of ``cfg`` with family-specific field names mapped to the Llama spellings."""
    out = dict(cfg)
    for key, value in CLASS_DEFAULTS.get(model_type, {}).items():
        if key not in out:  # absent only: an explicit null keeps its meaning
            out[key] = value
    if model_type == "chatglm" or "multi_query_group_num" in out:
        _alias(out, "num_hidden_layers", "num_layers")
        _alias(out, "vocab_size", "padded_vocab_size")
        _alias(out, "intermediate_size", "ffn_hidden_size")
        _alias(out, "head_dim", "kv_channels")
        if out.get("multi_query_attention"):
            _alias(out, "num_key_value_heads", "multi_query_group_num")
        _alias(out, "attention_bias", "add_qkv_bias")
    if model_type == "falcon" or "n_head_kv" in out:
        _alias(out, "num_attention_heads", "n_head")
        _alias(out, "num_hidden_layers", "n_layer")
        if out.get("new_decoder_architecture"):
            _alias(out, "num_key_value_heads", "num_kv_heads", "n_head_kv")
        elif out.get("multi_query", True) and out.get("num_key_value_heads") is None:
            out["num_key_value_heads"] = 1
        hidden = out.get("hidden_size")
        if out.get("intermediate_size") is None and isinstance(hidden, int):
            out["intermediate_size"] = out.get("ffn_hidden_size") or 4 * hidden
    _alias(out, "num_experts_per_tok", "top_k_experts", "moe_topk", "num_experts_per_token")
    return out


def refuse_unmodelled(cfg: dict[str, Any], model_type: str) -> None:
    """Raise ``<field>: <what is not modelled>`` for architectures the model cannot price."""
    from plena_opt.models.hf_hybrid import supported_by_variant

    for key, what in UNMODELLED_FIELDS:
        value = cfg.get(key)
        if not _present(value) or supported_by_variant(key, cfg, model_type):
            continue
        if key == "attn_type_list" and isinstance(value, list) and set(value) <= {1}:
            continue  # every layer is softmax attention
        if key == "layers_block_type" and isinstance(value, list):
            if set(value) <= {"attention"}:
                continue
        raise PlenaInputError(key, f"{key}: {what}")
    if model_type in UNMODELLED_TYPES:
        raise PlenaInputError(
            "model_type",
            f"model_type: {model_type} ({UNMODELLED_TYPES[model_type]}) is not modelled",
        )
    for key in ("use_mla",):
        if cfg.get(key) is True and cfg.get("kv_lora_rank") is None:
            raise PlenaInputError(key, f"{key}: MLA is set but kv_lora_rank is missing")


def tied_default(model_type: str) -> bool:
    """Whether this family ties the LM head to the embedding when the config omits the key."""
    return model_type in TIED_BY_DEFAULT


def flag(cfg: dict[str, Any], key: str, default: bool) -> bool:
    """A boolean field (JSON null → ``default``)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PlenaTypeError(key, f"{key} must be a bool (got {short(value)})")
    return value
