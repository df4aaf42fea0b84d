"""Hugging Face ``config.json`` → ``ModelSpec`` fields (analytic-model §4.1 rules, extended).

Only decoder hyper-parameters are read; weights and unrelated keys are ignored. Every size is
range-checked (``limits.SIZE_LIMITS``). Architectures the analytic model cannot price (linear
attention, state-space layers, sparse attention, NAS blocks) are refused by field name rather
than priced as something else. Error messages follow the reference wording where it has one
(golden invalid_plans.json). Supported beyond the reference: MLA, shared experts, dense-first
and interleaved MoE layers, sliding/chunked attention patterns, non-gated MLPs, parallel blocks,
multimodal wrappers (``text_config``) and ChatGLM/Falcon field names (docs/models.md).
"""

from __future__ import annotations

from typing import Any

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.models import hf_fields as hf
from plena_opt.models import hf_hybrid
from plena_opt.models.hf_layers import attention_types, mlp_types
from plena_opt.models.layer_runs import runs_from_lists
from plena_opt.models.limits import MAX_NAME_CHARS, bounded, check_depth, short

EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
TOP_K_KEYS = ("experts_per_token", "num_experts_per_tok")


def _get(cfg: dict[str, Any], key: str, default: Any = None) -> Any:
    """``cfg[key]``, treating an explicit JSON null as absent."""
    value = cfg.get(key)
    return default if value is None else value


def _required(cfg: dict[str, Any], key: str, name: str) -> int:
    if _get(cfg, key) is None:
        raise PlenaInputError(key, f"{name}: model config is missing {key}")
    return bounded(cfg[key], key)


def _experts(cfg: dict[str, Any]) -> tuple[int, int]:
    """(routed experts, top-k); (0, 1) for a dense model (§4.1: one expert is dense)."""
    experts = max(bounded(_get(cfg, k, 0), k, "num_experts") for k in EXPERT_COUNT_KEYS)
    if experts <= 1:
        return 0, 1
    top_k = 1
    for key in TOP_K_KEYS:
        if _get(cfg, key) is not None:
            top_k = bounded(cfg[key], key, "experts_per_token")
            break
    if top_k > experts:
        raise PlenaInputError("experts_per_token", "experts_per_token exceeds num_experts")
    return experts, top_k


def _mla(cfg: dict[str, Any], heads: int) -> dict[str, Any]:
    """Multi-head latent attention fields (DeepSeek-V2/V3, Kimi-K2); {} when not MLA."""
    if _get(cfg, "kv_lora_rank") is None:
        if _get(cfg, "q_lora_rank") is not None:
            raise PlenaInputError("q_lora_rank", "q_lora_rank: MLA needs kv_lora_rank as well")
        return {}
    out: dict[str, Any] = {"attention": "mla"}
    out["kv_lora_rank"] = bounded(cfg["kv_lora_rank"], "kv_lora_rank")
    out["q_lora_rank"] = bounded(_get(cfg, "q_lora_rank", 0), "q_lora_rank")
    for key in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        if _get(cfg, key) is None:
            raise PlenaInputError(key, f"{key}: an MLA config (kv_lora_rank) needs {key}")
        out[key] = bounded(cfg[key], key)
    out["head_dim"] = out["qk_rope_head_dim"] + out["qk_nope_head_dim"]
    if out["head_dim"] < 1:
        raise PlenaInputError("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be > 0")
    out["num_kv_heads"] = heads  # each head has its own decompressed K/V
    return out


def _shared(cfg: dict[str, Any], model_type: str, experts: int, moe_inter: int) -> dict[str, Any]:
    """Shared experts: one dense FFN of ``n_shared · width`` in every MoE layer."""
    n = bounded(
        _get(cfg, "n_shared_experts", _get(cfg, "num_shared_experts", 0)), "n_shared_experts"
    )
    width = bounded(
        _get(cfg, "shared_expert_intermediate_size", 0), "shared_expert_intermediate_size"
    )
    gate = False
    if width:  # Qwen2-MoE / Qwen1.5-MoE: one shared expert of this width, sigmoid-gated
        n = max(n, 1)
        gate = model_type in hf.SHARED_EXPERT_GATE
    elif n:
        width = n * moe_inter
    elif model_type in ("llama4", "llama4_text") and experts:
        n, width = 1, moe_inter  # Llama-4: one shared expert beside the routed ones
    if width and not experts:
        key = (
            "n_shared_experts"
            if n and not cfg.get("shared_expert_intermediate_size")
            else ("shared_expert_intermediate_size")
        )
        raise PlenaInputError(key, f"{key}: shared experts need routed experts")
    return {
        "num_shared_experts": n,
        "shared_expert_intermediate_size": width,
        "shared_expert_gate": gate,
    }


def _check_v_head_dim(cfg: dict[str, Any], head_dim: int) -> None:
    v = _get(cfg, "v_head_dim")
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise PlenaTypeError("v_head_dim", f"v_head_dim must be an integer (got {short(v)})")
    if v != head_dim:
        raise PlenaInputError(
            "v_head_dim",
            f"v_head_dim: a value width ({short(v)}) different from head_dim ({head_dim}) is not "
            "modelled outside MLA",
        )


def _biases(cfg: dict[str, Any], model_type: str) -> dict[str, bool]:
    """Linear-layer biases (parameter counts only; their compute is negligible)."""
    every = hf.flag(cfg, "use_bias", hf.flag(cfg, "bias", model_type == "gpt_neox"))
    qkv_only = model_type in hf.QKV_BIAS or cfg.get("add_qkv_bias") is True
    explicit = hf.flag(cfg, "attention_bias", False)
    return {
        "attention_bias": every or qkv_only or explicit,
        "output_bias": every or (explicit and not qkv_only),
        "mlp_bias": hf.flag(cfg, "mlp_bias", every),
    }


def parse_hf_config(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """Return the ``ModelSpec`` field values for ``cfg``; raises PlenaInputError/PlenaTypeError."""
    if not isinstance(cfg, dict):
        raise PlenaTypeError("model", "a model config must be a JSON object")
    if not isinstance(name, str) or not name:
        raise PlenaTypeError("name", "a model name must be a non-empty string")
    if len(name) > MAX_NAME_CHARS:
        raise PlenaInputError("name", f"a model name must be at most {MAX_NAME_CHARS} characters")
    check_depth(cfg)
    cfg, notes = hf.unwrap(cfg)
    cfg, model_type = hf.resolve_alias(cfg, hf.model_type_of(cfg))
    cfg = hf.canonical(cfg, model_type)
    hf.refuse_unmodelled(cfg, model_type)
    _reject_reference_shared(cfg, name)
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        if _get(cfg, key):
            notes.append(f"{key}: multi-token-prediction layers are not priced")
    groups, chosen = _get(cfg, "n_group", 1), _get(cfg, "topk_group", 1)
    if isinstance(groups, int) and isinstance(chosen, int) and 1 <= chosen < groups:
        notes.append(
            f"n_group/topk_group: group-limited routing ({chosen} of {groups} groups) is not "
            "modelled; tokens are routed as the workload's routing says"
        )
    sizes = _sizes(cfg, model_type, name)
    layers = _layers(cfg, model_type, sizes)
    gated = hf.gated_mlp(cfg, model_type)
    parallel = model_type in hf.PARALLEL_BLOCK or (
        model_type == "falcon"
        and (hf.flag(cfg, "parallel_attn", True) or hf.flag(cfg, "new_decoder_architecture", False))
    )
    if model_type in hf.FOUR_NORMS:
        norms = 4
    elif model_type == "falcon" and hf.flag(cfg, "new_decoder_architecture", False):
        norms = 2  # ln_attn and ln_mlp beside each other
    else:
        norms = 1 if parallel else 2
    sliding = layers["layer_runs"] and any(
        r.attention == "sliding_attention" for r in layers["layer_runs"]
    )
    return {
        "name": name,
        "model_type": model_type,
        "family": "moe" if sizes["num_experts"] or sliding or model_type == "gpt_oss" else "llama",
        **sizes,
        **layers,
        "tie_word_embeddings": hf.flag(cfg, "tie_word_embeddings", hf.tied_default(model_type)),
        "gated_mlp": gated,
        "parallel_block": parallel,
        "qk_norm": hf.flag(cfg, "use_qk_norm", model_type in hf.QK_NORM),
        "norms_per_layer": norms,
        "not_modelled": tuple(notes),
        **_biases(cfg, model_type),
        **_shared(cfg, model_type, sizes["num_experts"], sizes["moe_intermediate_size"]),
    }


def _sizes(cfg: dict[str, Any], model_type: str, name: str) -> dict[str, Any]:
    """Widths, head counts, vocabulary, experts and MLA fields (each range-checked)."""
    hidden = _required(cfg, "hidden_size", name)
    layers = _required(cfg, "num_hidden_layers", name)
    heads = _required(cfg, "num_attention_heads", name)
    moe_inter = _get(cfg, "moe_intermediate_size")
    if model_type in ("llama4", "llama4_text") and _get(cfg, "intermediate_size_mlp") is not None:
        # Llama-4: ``intermediate_size`` is the expert width, ``intermediate_size_mlp`` the dense
        moe_inter = moe_inter or _required(cfg, "intermediate_size", name)
        intermediate = bounded(
            cfg["intermediate_size_mlp"], "intermediate_size_mlp", "intermediate_size"
        )
    elif _get(cfg, "intermediate_size") is None and moe_inter is not None and _experts(cfg)[0]:
        # Qwen3.5-MoE: no dense MLP width because every layer routes (checked in ``_layers``)
        intermediate = bounded(moe_inter, "moe_intermediate_size")
    else:
        intermediate = _required(cfg, "intermediate_size", name)
    vocab = _required(cfg, "vocab_size", name)
    kv_heads = bounded(_get(cfg, "num_key_value_heads", heads), "num_key_value_heads")
    if heads % kv_heads:
        raise PlenaInputError(
            "num_key_value_heads", "num_attention_heads must be a multiple of num_key_value_heads"
        )
    head_dim = bounded(_get(cfg, "head_dim", max(hidden // heads, 1)), "head_dim")
    mla = _mla(cfg, heads)
    if not mla:
        _check_v_head_dim(cfg, head_dim)
    mla.update(hf_hybrid.sparse_fields(cfg, mla))
    experts, top_k = _experts(cfg)
    if experts and model_type in hf.NON_GATED_MLP:
        raise PlenaInputError(
            "model_type",
            f"model_type: routed experts with a two-matrix MLP ({model_type}) are not modelled",
        )
    return {
        "hidden_size": hidden,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
        "moe_intermediate_size": bounded(
            moe_inter if moe_inter is not None else intermediate, "moe_intermediate_size"
        ),
        "vocab_size": vocab,
        "num_experts": experts,
        "top_k": top_k,
        **mla,
    }


def _layers(cfg: dict[str, Any], model_type: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """Layer runs (attention × MLP type), the window and the chunk size."""
    layers, experts = sizes["num_layers"], sizes["num_experts"]
    window = bounded(_get(cfg, "sliding_window", 0), "sliding_window")
    context = _get(cfg, "max_position_embeddings")
    if window and context is not None and window >= bounded(context, "max_position_embeddings"):
        window = 0  # a window covering the whole context is no window (Phi-3.5-MoE: both 131072)
    chunk = bounded(_get(cfg, "attention_chunk_size", 0), "attention_chunk_size")
    attn = attention_types(cfg, model_type, layers, window)
    mlps = mlp_types(cfg, experts, layers)
    linear = hf_hybrid.linear_fields(cfg, model_type, attn)
    if "ffn" in mlps and _get(cfg, "intermediate_size") is None:
        if _get(cfg, "intermediate_size_mlp") is None:
            raise PlenaInputError("intermediate_size", "dense MLP layers need intermediate_size")
    if "moe" in mlps and experts < 2:
        raise PlenaInputError(
            "mlp_types", "moe layers need at least 2 experts (num_local_experts / num_experts)"
        )
    if "sliding_attention" in attn and window <= 0:
        raise PlenaInputError(
            "sliding_window", "sliding-window layers need a positive sliding_window"
        )
    if "chunked_attention" in attn and chunk <= 0:
        raise PlenaInputError(
            "attention_chunk_size", "chunked-attention layers need a positive attention_chunk_size"
        )
    return {
        "layer_runs": runs_from_lists(attn, mlps),
        "sliding_window": window,
        "attention_chunk_size": chunk if "chunked_attention" in attn else 0,
        **linear,
    }


def _reject_reference_shared(cfg: dict[str, Any], name: str) -> None:
    """Shared experts need a width: ``n_shared_experts`` without ``moe_intermediate_size`` (the
    reference fixture, golden invalid_plans "shared experts") has none and stays refused."""
    n = _get(cfg, "n_shared_experts", _get(cfg, "num_shared_experts"))
    if n and _get(cfg, "moe_intermediate_size") is None:
        key = "n_shared_experts" if _get(cfg, "n_shared_experts") else "num_shared_experts"
        raise PlenaInputError(
            key,
            f"{name}: shared experts are not modelled without moe_intermediate_size "
            f"({key}={short(n)} gives no expert width)",
        )
