"""MoE routing statistics (network-model §11, analytic-model §4.5 / §7.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from deepstack import moe

from tests.conftest import load_golden


def test_balanced_rows_spread_evenly() -> None:
    rows = moe.balanced_rows(64, 32, 4)
    assert rows.shape == (64, 4)
    assert np.all(np.bincount(rows.ravel(), minlength=32) == 8)
    ranks = moe.expert_rank(32, 8)[rows]
    assert all(len(set(r)) == 4 for r in ranks)  # ep=8 ≥ k: distinct ranks per token


def test_random_rows_seeded_and_distinct_per_token() -> None:
    a = moe.random_rows(100, 128, 8, seed=0)
    assert np.array_equal(a, moe.random_rows(100, 128, 8, seed=0))
    assert not np.array_equal(a, moe.random_rows(100, 128, 8, seed=1))
    assert all(len(set(r)) == 8 for r in a)
    assert a.min() >= 0 and a.max() < 128


def test_random_rows_reproduce_reference_busiest_rank_counts() -> None:
    """Golden distributed.json 'random' cases with counted (< 4096-token) MoE loads: our seeded
    generator + busiest-rank counting reproduce the reference's pairs and active experts."""
    dist = load_golden("distributed")
    checked = 0
    for case in dist["cases"]:
        inp, out = case["inputs"], case["output"]
        if inp.get("routing") != "random" or not out.get("moe") or inp["plan"].get("pp", 1) != 1:
            continue
        cfg = dist["models"][inp["model"]]
        experts = max(cfg.get(k) or 0 for k in ("num_local_experts", "num_experts"))
        k = cfg.get("experts_per_token") or cfg.get("num_experts_per_tok")
        m = out["moe"]
        micro = out["micro_batch"]
        for phase, q in (("prefill", inp["input_seq_len"]), ("decode", 1)):
            tokens = micro * q
            if tokens >= 4096:
                continue
            group = math.ceil(micro / m["dp"]) * q
            rows = moe.random_rows(tokens, experts, k, seed=0)
            counts = moe.busiest_rank_counts(rows, experts, m["ep"], group)
            assert counts.sum() == m[phase]["token_expert_pairs_on_busiest_rank"], case["id"]
            assert (counts > 0).sum() == m[phase]["active_experts_on_busiest_rank"], case["id"]
            checked += 1
    assert checked >= 5


def test_busiest_rank_counts_hand_example() -> None:
    # 4 experts on 2 ranks (0,1 → rank 0; 2,3 → rank 1); windows of 2 tokens
    rows = np.array([[0, 1], [0, 2], [3, 2], [3, 3]])
    # window 0: e0×2, e1, e2 → rank0 3, rank1 1; window 1: e2, e3×3 → rank1 4
    assert moe.busiest_rank_counts(rows, 4, 2, 2).tolist() == [1, 3]


def test_imbalance_closed_form_example() -> None:
    """§11.2 example: M=256, n=8, EP=8, R=4, T=32 → 1.30303."""
    r = moe.estimate_moe_routing_imbalance_overhead(256, 8, 8, 32, 4)
    mu, p = 32 * 8 / 8, 1 / 8
    sigma = math.sqrt(32 * 8 * p * (1 - p) * (256 - 8) / 255)
    m = 7 * 4
    a = math.sqrt(2 * math.log(m)) - (math.log(math.log(m)) + math.log(4 * math.pi)) / (
        2 * math.sqrt(2 * math.log(m))
    )
    assert r == pytest.approx(1 + sigma * a / mu, rel=1e-12)
    assert round(r, 5) == 1.30303
    assert moe.estimate_moe_routing_imbalance_overhead(256, 8, 1, 32, 4) == 1.0
    assert moe.estimate_moe_routing_imbalance_overhead(8, 8, 8, 32, 4) == 1.0  # M = n


@pytest.mark.parametrize(("tokens", "experts"), [(100, 32), (0, 4), (64, 16), (7, 8)])
def test_even_split(tokens: int, experts: int) -> None:
    c = moe.estimate_experts_activated(tokens, experts)
    assert len(c) == experts and c.sum() == tokens
    assert c.max() - c.min() <= 1
