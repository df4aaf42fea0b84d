"""The routed EP all-to-all from its non-zero (source, destination) pairs (``_slot_pairs``): the
same pattern and busiest rank as the dense [windows, ep, ep] count stack (``_slot_stack``, the
reference kept for these checks), on switch and ring levels, and without the dense array's
memory — at ep = 65,536 that array is 32 GiB and the search of a 65,536-device MoE model died."""

from __future__ import annotations

import tracemalloc

import deepstack as ds
import numpy as np
import pytest
from deepstack.ep_dispatch import _slot_pairs, _slot_stack, active_rows, routed_pattern
from deepstack.placement import groups
from deepstack.profile import Level
from deepstack.stage import StagePattern

REL = 1e-12  # same integer loads summed in another order: float rounding of the costs only


def _net(kind: str) -> ds.Network:
    rng = np.random.default_rng(3)

    def lv(n: int, k: str = "switch") -> Level:
        return Level(k, 1, n, float(rng.uniform(0, 5e-6)), float(rng.uniform(10e9, 400e9)))

    top = lv(2, kind)
    return ds.Network(ds.make_hierarchy("x", top, lv(2), lv(4), ds.EnergyConfig(1.0, 2.5, 4.0)))


def _dense(router, scheme: ds.ParallelScheme, active: np.ndarray, experts: int):
    """The pattern and busiest rank from the dense stack, every pair listed (the old path)."""
    slots = scheme.dp * scheme.sp
    stack = _slot_stack(active, scheme.ep, experts, slots)
    g = groups(scheme, "ep")
    slot = np.arange(g.shape[0]) % slots
    used = stack[: min(slots, g.shape[0])]
    used = used[used[:, 0, 0] >= 0]
    busiest = max(int(used.sum(axis=2).max()), int(used.sum(axis=1).max())) if len(used) else 0
    valid = stack[slot, 0, 0] >= 0
    g, slot = g[valid], slot[valid]
    src = np.repeat(g, scheme.ep, axis=1).reshape(-1)
    dst = np.tile(g, (1, scheme.ep)).reshape(-1)
    return StagePattern(router, src, dst, stack[slot].reshape(-1), routed=True), busiest


@pytest.mark.parametrize("kind", ["switch", "ring"])
@pytest.mark.parametrize(
    ("scheme", "tokens", "experts", "top_k"),
    [
        (ds.ParallelScheme(ep=16), 5, 64, 4),  # fewer tokens than ranks
        (ds.ParallelScheme(ep=4, dp=4), 24, 16, 4),
        (ds.ParallelScheme(ep=8, dp=2), 7, 16, 2),  # a window is empty
        (ds.ParallelScheme(tp=2, ep=2, dp=4), 40, 8, 2),
        (ds.ParallelScheme(ep=2, dp=8), 9, 2, 1),
    ],
)
def test_sparse_pairs_price_like_the_dense_stack(kind, scheme, tokens, experts, top_k) -> None:
    router = _net(kind).router
    rng = np.random.default_rng(tokens)
    rows = rng.integers(0, experts, size=(tokens, top_k))
    active = active_rows(rows, tokens, experts, top_k)
    pat, busiest = routed_pattern(router, scheme, active, experts)
    ref, ref_busiest = _dense(router, scheme, active, experts)
    assert busiest == ref_busiest
    a, b = pat.cost(4096), ref.cost(4096)
    assert a.link_seconds == pytest.approx(b.link_seconds, rel=REL, abs=0.0)
    assert a.hop_seconds == pytest.approx(b.hop_seconds, rel=REL, abs=0.0)
    assert a.energy_pj == pytest.approx(b.energy_pj, rel=REL, abs=0.0)


def test_the_pairs_are_the_non_zero_entries_of_the_stack() -> None:
    active = active_rows(None, 30, 32, 4)
    slot, pair, count = _slot_pairs(active, 8, 32, 3)
    stack = _slot_stack(active, 8, 32, 3)
    dense = np.zeros_like(stack)
    dense.reshape(3, -1)[slot, pair] = count
    np.testing.assert_array_equal(dense, np.where(stack > 0, stack, 0))


def test_a_65536_rank_ep_group_needs_no_dense_array() -> None:
    """ep = 65,536 over one group of 16 tokens: megabytes, not the 32 GiB of ep² counts."""
    prof = ds.make_hierarchy(
        "big",
        Level("switch", 1, 16, 1e-6, 50e9),
        Level("switch", 1, 512, 1e-6, 100e9),
        Level("switch", 1, 8, 1e-6, 400e9),
        ds.EnergyConfig(1.0, 2.5, 4.0),
    )
    router = ds.Network(prof).router
    active = active_rows(None, 16, 256, 8)
    tracemalloc.start()
    pat, busiest = routed_pattern(router, ds.ParallelScheme(ep=65536), active, 256)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 256 * 2**20
    assert busiest == 8  # a token's 8 experts sit on 8 distinct ranks, none its own
    assert pat.cost(1024).link_seconds > 0
