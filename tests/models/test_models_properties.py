"""Property test: any config built from the known fields parses or fails with a field error."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plena_opt.errors import PlenaInputError
from plena_opt.models import ModelSpec, builtin_config
from plena_opt.models.params import count_parameters
from plena_opt.models.summary import architecture

KEYS = [
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "moe_intermediate_size", "vocab_size", "num_experts", "n_routed_experts",
    "num_experts_per_tok", "n_shared_experts", "shared_expert_intermediate_size",
    "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step",
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    "sliding_window", "sliding_window_pattern", "attention_chunk_size", "layer_types",
    "mlp_types", "model_type", "text_config", "tie_word_embeddings", "use_sliding_window",
    "max_window_layers", "mlp_only_layers", "moe_layers", "hybrid_layer_pattern",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.sampled_from([2**31, 10**10, 10**30, 4096, 4097, 65536, 65537]),
    st.floats(allow_nan=True),
    st.sampled_from(["llama", "gemma2", "deepseek_v3", "falcon", "llama4", "mamba", "x" * 300]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=12,
)
LAYER_LISTS = st.lists(
    st.sampled_from(["full_attention", "sliding_attention", "chunked_attention", "moe", "ffn",
                     "linear_attention", 0, 1]),
    min_size=0,
    max_size=6,
)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(["fictional-moe-128", "deepseek-v3", "llama-3.1-8b", "gemma-2-27b"]),
    patch=st.dictionaries(st.sampled_from(KEYS), VALUES | LAYER_LISTS, max_size=6),
)
def test_configs_parse_or_name_a_field(base: str, patch: dict) -> None:
    cfg = {**builtin_config(base), **patch}
    if "num_hidden_layers" not in patch:
        cfg["num_hidden_layers"] = 4
    try:
        spec = ModelSpec.from_hf_config(cfg, "fuzz")
    except PlenaInputError as exc:
        assert exc.field and len(str(exc)) < 500
        return
    counts = count_parameters(spec)
    assert 0 < counts.active <= counts.total
    assert sum(architecture(spec)["layers_by_kind"].values()) == spec.num_layers


def test_short_bounds_nested_values() -> None:
    """A dict of lists of long strings (each level within reprlib's limits) echoes ≤ 120 chars;
    before the cut it gave ≈ 700 and a fuzzed config error reached 501 characters."""
    from plena_opt.models.limits import MAX_SHORT_CHARS, short

    value = {k: ["x" * 300] * 6 for k in ("alpha", "beta", "gamma", "delta", "eps")}
    assert len(short(value)) <= MAX_SHORT_CHARS
    assert short(value).endswith("...")
    assert short(7) == "7"
