"""Catalog entries the public serving measurements use (issue 24), counted against their cards."""

from __future__ import annotations

import pytest

from plena_opt.models import load_model, model_info
from plena_opt.models.params import count_parameters

# name: (card total, card active, whether the card's active count leaves the embedding and LM
# head out). DeepSeek-R1 / V3.1 cards: 671B total, 37B activated (deepseek-ai/DeepSeek-R1,
# deepseek-ai/DeepSeek-V3.1); MiniMax-M2 card: 230B total, 10B activated (MiniMaxAI/MiniMax-M2).
CARDS = {
    "deepseek-r1": (671e9, 37e9, False),
    "deepseek-v3.1": (671e9, 37e9, False),
    "minimax-m2": (230e9, 10e9, True),
}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_counts_match_the_model_card(name: str) -> None:
    total, active, without_embeddings = CARDS[name]
    spec = load_model(name)
    counts = count_parameters(spec)
    assert counts.total == pytest.approx(total, rel=0.01)
    tables = spec.vocab_size * spec.hidden_size * (1 if spec.tie_word_embeddings else 2)
    got = counts.active - tables if without_embeddings else counts.active
    assert got == pytest.approx(active, rel=0.03)  # cards round the active count (37B, 10B)
    assert model_info(name)["external"] and "card" in model_info(name)["source"]


def test_deepseek_r1_and_v3_1_are_deepseek_v3_architecture() -> None:
    v3 = load_model("deepseek-v3").model_dump(exclude={"name"})
    for name in ("deepseek-r1", "deepseek-v3.1"):
        assert load_model(name).model_dump(exclude={"name"}) == v3


def test_minimax_m2_is_full_attention_moe() -> None:
    spec = load_model("minimax-m2")
    assert spec.num_experts == 256 and spec.top_k == 8 and spec.moe_layers == 62
    assert spec.sliding_layers == 0 and spec.qk_norm and spec.gated_mlp
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim) == (48, 8, 128)
