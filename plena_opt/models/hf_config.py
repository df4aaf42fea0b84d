"""Hugging Face ``config.json`` → ``ModelSpec`` fields (analytic-model §4.1 rules).

Only decoder hyper-parameters are read; weights and unrelated keys are ignored. Features the
analytic model cannot price (shared experts, multi-head latent attention) are rejected rather than
silently mis-priced. Error messages follow the reference wording (golden invalid_plans.json).
"""

from __future__ import annotations

from typing import Any

from plena_opt.errors import PlenaInputError, PlenaTypeError

LAYER_TYPES = ("full_attention", "sliding_attention")
MLP_TYPES = ("moe", "ffn")
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
TOP_K_KEYS = ("experts_per_token", "num_experts_per_tok")
SHARED_EXPERT_KEYS = ("n_shared_experts", "num_shared_experts", "shared_expert_intermediate_size")
MLA_KEYS = ("kv_lora_rank", "q_lora_rank")


def _get(cfg: dict[str, Any], key: str, default: Any = None) -> Any:
    """``cfg[key]``, treating an explicit JSON null as absent."""
    value = cfg.get(key)
    return default if value is None else value


def _int(value: Any, field: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlenaTypeError(field, f"{field} must be an integer")
    if value < minimum:
        bound = "greater than zero" if minimum == 1 else f"at least {minimum}"
        raise PlenaInputError(field, f"{field} must be {bound}")
    return value


def _required(cfg: dict[str, Any], key: str, name: str) -> int:
    if _get(cfg, key) is None:
        raise PlenaInputError(key, f"{name}: model config is missing {key}")
    return _int(cfg[key], key)


def _per_layer(cfg: dict[str, Any], key: str, allowed: tuple[str, ...], layers: int) -> list[str]:
    values = cfg[key]
    if not isinstance(values, list):
        raise PlenaTypeError(key, f"{key} must be a list with one entry per layer")
    if len(values) != layers:
        raise PlenaInputError(key, f"{key} has {len(values)} entries for {layers} layers")
    for i, value in enumerate(values):
        if value not in allowed:
            raise PlenaInputError(
                key, f"{key}[{i}] must be one of {', '.join(allowed)} (got {value!r})"
            )
    return list(values)


def _reject_unmodelled(cfg: dict[str, Any], name: str) -> None:
    for key in SHARED_EXPERT_KEYS:
        if cfg.get(key):
            raise PlenaInputError(
                key,
                f"{name}: shared experts are not modelled ({key}={cfg[key]!r}); "
                "only routed experts are supported",
            )
    for key in MLA_KEYS:
        if cfg.get(key) is not None:
            raise PlenaInputError(
                key, f"{name}: multi-head latent attention ({key}) is not modelled"
            )


def _default_mlp_types(cfg: dict[str, Any], experts: int, layers: int) -> list[str]:
    """All "moe" if there are experts, else all "ffn" (§4.1).

    Extension: Qwen-MoE style ``mlp_only_layers`` / ``decoder_sparse_step`` mark dense layers.
    """
    if not experts:
        return ["ffn"] * layers
    dense = _get(cfg, "mlp_only_layers", [])
    if not isinstance(dense, list):
        raise PlenaTypeError("mlp_only_layers", "mlp_only_layers must be a list of layer indices")
    step = _int(_get(cfg, "decoder_sparse_step", 1), "decoder_sparse_step")
    return ["moe" if i not in dense and (i + 1) % step == 0 else "ffn" for i in range(layers)]


def parse_hf_config(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """Return the ``ModelSpec`` field values for ``cfg``; raises PlenaInputError/PlenaTypeError."""
    if not isinstance(cfg, dict):
        raise PlenaTypeError("model", "a model config must be a JSON object")
    if not isinstance(name, str) or not name:
        raise PlenaTypeError("name", "a model name must be a non-empty string")
    _reject_unmodelled(cfg, name)

    hidden = _required(cfg, "hidden_size", name)
    layers = _required(cfg, "num_hidden_layers", name)
    heads = _required(cfg, "num_attention_heads", name)
    intermediate = _required(cfg, "intermediate_size", name)
    vocab = _required(cfg, "vocab_size", name)
    kv_heads = _int(_get(cfg, "num_key_value_heads", heads), "num_key_value_heads")
    if heads % kv_heads:
        raise PlenaInputError(
            "num_key_value_heads", "num_attention_heads must be a multiple of num_key_value_heads"
        )
    head_dim = _int(_get(cfg, "head_dim", hidden // heads), "head_dim")
    moe_intermediate = _int(
        _get(cfg, "moe_intermediate_size", intermediate), "moe_intermediate_size"
    )

    experts = max(_int(_get(cfg, key, 0), key, minimum=0) for key in EXPERT_COUNT_KEYS)
    experts = experts if experts > 1 else 0
    top_k = 1
    if experts:
        for key in TOP_K_KEYS:
            if _get(cfg, key) is not None:
                top_k = _int(cfg[key], key)
                break
        if top_k > experts:
            raise PlenaInputError("experts_per_token", "experts_per_token exceeds num_experts")

    if _get(cfg, "layer_types") is not None:
        layer_types = _per_layer(cfg, "layer_types", LAYER_TYPES, layers)
    else:
        layer_types = ["full_attention"] * layers
    if _get(cfg, "mlp_types") is not None:
        mlp_types = _per_layer(cfg, "mlp_types", MLP_TYPES, layers)
    else:
        mlp_types = _default_mlp_types(cfg, experts, layers)
    if "moe" in mlp_types and experts < 2:
        raise PlenaInputError(
            "mlp_types", "moe layers need at least 2 experts (num_local_experts / num_experts)"
        )

    window = _int(_get(cfg, "sliding_window", 0), "sliding_window", minimum=0)
    if "sliding_attention" in layer_types and window <= 0:
        raise PlenaInputError(
            "sliding_window", "sliding-window layers need a positive sliding_window"
        )

    tied = _get(cfg, "tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise PlenaTypeError("tie_word_embeddings", "tie_word_embeddings must be a bool")
    model_type = str(_get(cfg, "model_type", "unknown"))
    family = (
        "moe"
        if experts or "sliding_attention" in layer_types or model_type == "gpt_oss"
        else "llama"
    )
    return {
        "name": name,
        "model_type": model_type,
        "family": family,
        "hidden_size": hidden,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
        "moe_intermediate_size": moe_intermediate,
        "vocab_size": vocab,
        "num_experts": experts,
        "top_k": top_k,
        "layer_types": tuple(layer_types),
        "mlp_types": tuple(mlp_types),
        "sliding_window": window,
        "tie_word_embeddings": tied,
    }
