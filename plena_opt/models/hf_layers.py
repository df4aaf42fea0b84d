"""Which layers slide, chunk or route to experts: the per-layer rules of each config spelling.

Explicit lists (``layer_types``, ``mlp_types``, ``hybrid_layer_pattern``, ``moe_layer_freq`` as a
list) win; otherwise the family's pattern fields decide, following the transformers config
classes (docs/models.md). The result is compressed into ``LayerRun``s.
"""

from __future__ import annotations

from typing import Any

from plena_opt.errors import PlenaInputError, PlenaTypeError
from plena_opt.models.hf_fields import ALL_LAYERS_SLIDE
from plena_opt.models.hf_hybrid import default_layer_types, is_gated_deltanet
from plena_opt.models.limits import bounded, short

# Families whose ``sliding_window`` is inactive unless ``use_sliding_window`` is set (Qwen2Config
# and its descendants default it to False); ``unknown`` keeps the reference rule (§4.1).
WINDOW_UNUSED = frozenset(
    {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "unknown"}
)
ATTENTION_TYPES = ("full_attention", "sliding_attention", "chunked_attention")
MLP_TYPES = ("moe", "ffn")
_UNMODELLED_LAYER = {
    "linear_attention": "linear-attention layers are not modelled",
    "mamba": "state-space (Mamba) layers are not modelled",
    "conv": "convolution layers are not modelled",
    "recurrent": "recurrent layers are not modelled",
}


def _get(cfg: dict[str, Any], key: str, default: Any = None) -> Any:
    value = cfg.get(key)
    return default if value is None else value


def per_layer(cfg: dict[str, Any], key: str, allowed: tuple[Any, ...], layers: int) -> list[Any]:
    """A per-layer list field, checked for length and values."""
    values = cfg[key]
    if not isinstance(values, list):
        raise PlenaTypeError(key, f"{key} must be a list with one entry per layer")
    if len(values) != layers:
        raise PlenaInputError(key, f"{key} has {len(values)} entries for {layers} layers")
    for i, value in enumerate(values):
        if isinstance(value, str) and value in _UNMODELLED_LAYER and value not in allowed:
            raise PlenaInputError(key, f"{key}[{i}]: {value}: {_UNMODELLED_LAYER[value]}")
        if isinstance(value, bool) or value not in allowed:
            names = ", ".join(str(a) for a in allowed)
            raise PlenaInputError(key, f"{key}[{i}] must be one of {names} (got {short(value)})")
    return list(values)


def attention_types(cfg: dict[str, Any], model_type: str, layers: int, window: int) -> list[str]:
    """The attention type of every layer."""
    if _get(cfg, "layer_types") is not None:
        kinds = ATTENTION_TYPES + (("linear_attention",) if is_gated_deltanet(model_type) else ())
        return per_layer(cfg, "layer_types", kinds, layers)
    hybrid = default_layer_types(cfg, model_type, layers)
    if hybrid is not None:
        return hybrid
    if _get(cfg, "hybrid_layer_pattern") is not None:  # MiMo: 1 = sliding window
        flags = per_layer(cfg, "hybrid_layer_pattern", (0, 1), layers)
        return ["sliding_attention" if f else "full_attention" for f in flags]
    if model_type in ("llama4", "llama4_text") and _get(cfg, "attention_chunk_size"):
        if _get(cfg, "no_rope_layers"):
            rope = per_layer(cfg, "no_rope_layers", (0, 1), layers)
        else:
            step = 4  # Llama4TextConfig.no_rope_layer_interval default
            rope = [int((i + 1) % step != 0) for i in range(layers)]
        return ["chunked_attention" if r else "full_attention" for r in rope]
    if _get(cfg, "attention_chunk_size"):
        raise PlenaInputError(
            "attention_chunk_size",
            "attention_chunk_size: which layers are chunked is not given (set layer_types)",
        )
    if window and _get(cfg, "sliding_window_pattern") is not None:  # Gemma-3, Cohere-2
        n = bounded(cfg["sliding_window_pattern"], "sliding_window_pattern")
        return ["sliding_attention" if (i + 1) % n else "full_attention" for i in range(layers)]
    if window and model_type == "gemma2":  # alternating, first layer slides
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    if window and cfg.get("use_sliding_window") is True:  # Qwen2 family
        first = bounded(_get(cfg, "max_window_layers", 0), "max_window_layers", "layer_index")
        return ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    if window and model_type in ALL_LAYERS_SLIDE:
        return ["sliding_attention"] * layers
    if window and cfg.get("use_sliding_window") is None and model_type not in WINDOW_UNUSED:
        raise PlenaInputError(
            "sliding_window",
            f"sliding_window: which layers of a {model_type!r} model use the window is not "
            "given (set layer_types, or use_sliding_window: false)",
        )
    return ["full_attention"] * layers


def _indices(cfg: dict[str, Any], key: str, layers: int) -> set[int]:
    values = _get(cfg, key, [])
    if not isinstance(values, list):
        raise PlenaTypeError(key, f"{key} must be a list of layer indices")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < layers:
            raise PlenaInputError(key, f"{key} entries must be layer indices below {layers}")
    return set(values)


def mlp_types(cfg: dict[str, Any], experts: int, layers: int) -> list[str]:
    """The MLP type of every layer: ``moe`` (routed experts) or ``ffn`` (dense)."""
    if _get(cfg, "mlp_types") is not None:
        return per_layer(cfg, "mlp_types", MLP_TYPES, layers)
    if not experts:
        return ["ffn"] * layers
    if _get(cfg, "moe_layers") is not None:  # Llama-4: explicit MoE layer indices
        moe = _indices(cfg, "moe_layers", layers)
        return ["moe" if i in moe else "ffn" for i in range(layers)]
    freq = _get(cfg, "moe_layer_freq", 1)
    if isinstance(freq, list):  # MiMo: one 0/1 flag per layer
        flags = per_layer(cfg, "moe_layer_freq", (0, 1), layers)
        return ["moe" if f else "ffn" for f in flags]
    freq = bounded(freq, "moe_layer_freq")
    first = bounded(_get(cfg, "first_k_dense_replace", 0), "first_k_dense_replace")
    sparse = bounded(_get(cfg, "decoder_sparse_step", 1), "decoder_sparse_step")
    inter = bounded(_get(cfg, "interleave_moe_layer_step", 1), "interleave_moe_layer_step")
    dense = _indices(cfg, "mlp_only_layers", layers)
    return [
        "moe"
        if i >= first
        and i % freq == 0
        and (i + 1) % sparse == 0
        and (i + 1) % inter == 0
        and i not in dense
        else "ffn"
        for i in range(layers)
    ]
