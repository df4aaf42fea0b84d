"""Documented ranges of every size field a model config can carry (docs/models.md).

The ranges are generous (roughly 8–100× today's largest open models) and exist so that one
request cannot make the evaluator allocate or loop without bound. A value outside its range is a
``PlenaInputError`` naming the field and the range.
"""

from __future__ import annotations

import reprlib
from typing import Any

import plena_opt.jsonio as jsonio
from plena_opt.errors import PlenaInputError, PlenaTypeError

# field (canonical name) → (minimum, maximum), inclusive.
SIZE_LIMITS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 1 << 20),
    "num_hidden_layers": (1, 4096),
    "num_attention_heads": (1, 1 << 14),
    "num_key_value_heads": (1, 1 << 14),
    "head_dim": (1, 1 << 14),
    "intermediate_size": (1, 1 << 22),
    "moe_intermediate_size": (1, 1 << 22),
    "shared_expert_intermediate_size": (0, 1 << 22),
    "vocab_size": (1, 1 << 24),
    "num_experts": (0, 1 << 16),
    "experts_per_token": (1, 1 << 16),
    "n_shared_experts": (0, 1024),
    "sliding_window": (0, (1 << 31) - 1),
    "attention_chunk_size": (0, (1 << 31) - 1),
    "max_position_embeddings": (1, (1 << 31) - 1),
    "q_lora_rank": (0, 1 << 16),
    "kv_lora_rank": (1, 1 << 16),
    "qk_rope_head_dim": (0, 1 << 14),
    "qk_nope_head_dim": (0, 1 << 14),
    "v_head_dim": (1, 1 << 14),
    "first_k_dense_replace": (0, 4096),
    "moe_layer_freq": (1, 4096),
    "decoder_sparse_step": (1, 4096),
    "interleave_moe_layer_step": (1, 4096),
    "sliding_window_pattern": (1, 4096),
    "layer_index": (0, 4095),
    "index_n_heads": (1, 1 << 14),
    "index_head_dim": (1, 1 << 14),
    "index_topk": (1, (1 << 31) - 1),
    "linear_num_key_heads": (1, 1 << 14),
    "linear_num_value_heads": (1, 1 << 14),
    "linear_key_head_dim": (1, 1 << 14),
    "linear_value_head_dim": (1, 1 << 14),
    "linear_conv_kernel_dim": (1, 64),
    "full_attention_interval": (1, 4096),
}
MAX_NAME_CHARS = 200  # model names and model_type strings
MAX_SHORT_CHARS = 120  # one echoed value in an error message
MAX_NESTING = jsonio.MAX_NESTING  # JSON nesting depth accepted in a model config file

_SHORT = reprlib.Repr()
_SHORT.maxstring = 40
_SHORT.maxother = 40
_SHORT.maxlist = 4
_SHORT.maxdict = 4
_SHORT.maxlevel = 2


def short(value: Any) -> str:
    """A bounded ``repr`` for error messages (never recurses deeply, never echoes megabytes).

    reprlib bounds each level (4 items of 40 characters) but not their product: a dict of lists
    of strings still gave ≈ 700 characters, so the whole text is cut at ``MAX_SHORT_CHARS``."""
    text = _SHORT.repr(value)
    return text if len(text) <= MAX_SHORT_CHARS else text[: MAX_SHORT_CHARS - 3] + "..."


def bounded(value: Any, field: str, limit: str | None = None) -> int:
    """``value`` as an int within ``SIZE_LIMITS[limit or field]``; errors name ``field``."""
    lo, hi = SIZE_LIMITS[limit or field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlenaTypeError(field, f"{field} must be an integer")
    if value < lo:
        bound = "greater than zero" if lo == 1 else f"at least {lo}"
        raise PlenaInputError(field, f"{field} must be {bound}")
    if value > hi:
        raise PlenaInputError(
            field, f"{field} must be at most {hi} (range {lo}..{hi}; got {short(value)})"
        )
    return value


def check_depth(value: Any, field: str = "model", depth: int = 0) -> None:
    """Refuse JSON nested deeper than ``MAX_NESTING`` (iterative, so it cannot overflow)."""
    stack = [(value, depth)]
    while stack:
        item, d = stack.pop()
        if d > MAX_NESTING:
            raise PlenaInputError(field, f"{field} is nested deeper than {MAX_NESTING} levels")
        if isinstance(item, dict):
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, d + 1) for v in item)
